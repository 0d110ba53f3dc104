"""Keep the benchmark harness from rotting: its quickest run, foundation suite only.

No figure is checked (performance belongs in `make bench`); only that the
harness starts the servers, runs redis-benchmark and writes its JSON rows.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from tests.servers import ROOT

pytestmark = pytest.mark.skipif(
    shutil.which("redis-server") is None or shutil.which("redis-benchmark") is None,
    reason="redis-server and redis-benchmark are needed (apt-get install redis-server)",
)


def test_bench_quick_foundation(tmp_path):
    out = tmp_path / "results.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench", "foundation", "--quick", "--quiet", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "summary" in done.stdout
    result = json.loads(out.read_text())
    rows = result["rows"]
    assert [row["name"] for row in rows] == [f"{cmd} -c 50 -P {p}" for p in (1, 16) for cmd in ("PING", "SET", "GET")]
    for row in rows:
        assert row["suite"] == "foundation"
        assert row["status"] in ("PASS", "MISS"), row
        for kind in ("redis", "millrace", "thin"):
            assert row[kind] > 0, row
