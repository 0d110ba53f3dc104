"""The test harness itself: a server that never answers is not left running."""

from __future__ import annotations

import os
import sys

import pytest

from tests.servers import ServerProcess, free_port


def test_a_server_that_never_answers_is_killed_not_leaked(tmp_path):
    pidfile = tmp_path / "pid"
    silent = [sys.executable, "-c", f"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); time.sleep(60)"]
    with pytest.raises(RuntimeError, match="did not start"):
        ServerProcess(silent, free_port(), str(tmp_path), "silent", ready_timeout=1.0)
    pid = int(pidfile.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # killed and reaped by the harness
