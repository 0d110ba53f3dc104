"""The harnesses themselves (tests' and bench's): a server that never answers is not left running."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bench.harness import Server as BenchServer
from tests.servers import ServerProcess, free_port


def _running_with(marker: str) -> list[str]:
    """PIDs of live processes whose command line holds marker."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if marker.encode() in cmdline.read_bytes():
                found.append(cmdline.parent.name)
        except OSError:
            continue  # gone meanwhile
    return found


@pytest.mark.timeout(60)  # a harness that waits for the process instead of killing it hangs here for an hour
@pytest.mark.parametrize("harness", ["tests", "bench"])
def test_a_server_that_never_answers_is_killed_not_leaked(tmp_path, harness):
    started = tmp_path / "started"
    marker = f"never-answers:{tmp_path}"
    silent = [sys.executable, "-c", f"open({str(started)!r}, 'w'); import time; time.sleep(3600)", marker]
    with pytest.raises(RuntimeError, match="did not start"):
        if harness == "tests":
            ServerProcess(silent, free_port(), str(tmp_path), "silent", ready_timeout=3.0)
        else:
            BenchServer("silent", silent, free_port(), str(tmp_path), ready_timeout=3.0)
    assert started.exists()  # it did run
    assert _running_with(marker) == []  # and was killed and reaped
