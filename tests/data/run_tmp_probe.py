"""Run by test_run_tmp.py in a pytest of its own: a server started the usual way, a snapshot saved."""

import os

from tests.servers import start_millrace


def test_a_server_saves_in_its_temporary_dir(tmp_path):
    proc = start_millrace("--save", "")
    try:
        client = proc.client()
        client.xadd("s", {"f": "v"})
        client.save()
        assert os.path.exists(os.path.join(proc.dir, "dump.mpk"))
        (tmp_path / "note").write_text("x")
    finally:
        proc.stop()
    assert os.environ.get("PROBE_FAIL") != "1", "failing on purpose"
