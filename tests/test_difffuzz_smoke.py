"""Keep `make difffuzz` (tests/difffuzz.py) from rotting: a few seeds of each suite, plain and in MULTI blocks.

The long runs belong in `make difffuzz`; here only that the tool still starts both servers, that its
generators and masks still run, and that today's tree still matches Redis 8.2.3 on these seeds.
"""

from __future__ import annotations

import pytest

from tests import difffuzz
from tests.servers import require_redis


@pytest.mark.parametrize("multi", [False, True], ids=["plain", "multi"])
def test_difffuzz_finds_no_difference(capsys, multi):
    require_redis()
    argv = ["--suite", "all", "--seeds", "25", "--first-seed", "0", "--length", "40"] + (["--multi"] if multi else [])
    code = difffuzz.main(argv)
    out = capsys.readouterr().out
    assert code == 0, out
    assert "streams: seeds 0..24" in out and "keyspace: seeds 0..24" in out and out.rstrip().endswith("PASS"), out


def test_difffuzz_reports_a_difference(capsys, monkeypatch):
    """A difference planted in Millrace's replies is reported, shrunk to its one command, and exits 1."""
    require_redis()
    call = difffuzz.KeyspaceSuite.call
    millrace_conns = []
    init = difffuzz.Pair.__init__

    def recording_init(self):
        init(self)
        millrace_conns.append(self.cm)

    def planted(self, conn, cmd):
        reply = call(self, conn, cmd)
        return reply + 1 if conn in millrace_conns and cmd[0] == "STRLEN" and isinstance(reply, int) else reply

    monkeypatch.setattr(difffuzz.Pair, "__init__", recording_init)
    monkeypatch.setattr(difffuzz.KeyspaceSuite, "call", planted)
    assert difffuzz.main(["--suite", "keyspace", "--seeds", "50"]) == 1
    out = capsys.readouterr().out
    assert "DIFFERENCE: suite keyspace" in out and "minimal repro (1 steps)" in out, out
    lines = out.splitlines()
    assert lines[lines.index("  reply to the last step:") - 1].strip().startswith("STRLEN"), out
