"""A test run leaves nothing in the temporary directory when it passes, and keeps what a failure needs."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.servers import ROOT

# in one process, and as `make test` runs it: xdist workers, whose own directories lie in the controller's
WORKERS = pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one-process", "xdist"])


def _run(tmp_path, fail: bool, workers: list[str]) -> tuple[subprocess.CompletedProcess, list[str]]:
    outside = tmp_path / "tmp"
    outside.mkdir()
    env = {**os.environ, "TMPDIR": str(outside), "PROBE_FAIL": "1" if fail else "0"}
    env.pop("PYTEST_ADDOPTS", None)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *workers, "tests/data/run_tmp_probe.py"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    return done, sorted(os.listdir(outside))


@WORKERS
def test_a_passing_run_leaves_nothing_behind(tmp_path, workers):
    done, left = _run(tmp_path, False, workers)
    assert done.returncode == 0, done.stdout + done.stderr
    assert left == []


@WORKERS
def test_a_failing_run_keeps_its_files_and_says_where(tmp_path, workers):
    done, left = _run(tmp_path, True, workers)
    assert done.returncode == 1, done.stdout + done.stderr
    assert len(left) == 1 and left[0].startswith("millrace-tests-")
    kept = tmp_path / "tmp" / left[0]
    assert f"kept in {kept}" in done.stdout
    files = {name for _, _, names in os.walk(kept) for name in names}
    assert "millrace.log" in files, "the server's log is among what is kept"
    assert "note" in files, "pytest's tmp_path lies there too"
