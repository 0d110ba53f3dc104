"""`make mutate`: mutation testing of storage/ and pipeline/ with mutmut 3, and the kill rate.

mutmut runs in a copy of the working tree (it writes a `mutants/` tree and a
cache beside the sources; other work in the tree goes on meanwhile). Each
mutant is tested by the tests that call its function in the pytest process
(mutmut records that in a first, full run): the in-process tests listed in
TESTS. Tests that reach storage/ only through a server process would run each
mutant in that process too, but mutmut cannot see that they cover it, and the
Spark tests take minutes each: both stay out. The suite itself is `make test`.

    python -m tests.mutate [--paths storage/stream.py ...] [--workdir DIR] [--max-children N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ["storage/", "pipeline/"]
NOT_MUTATED = ["pipeline/jobs/*"]  # example jobs, run by `make pipeline`
ALSO_COPY = ["server/", "protocol/", "persistence/"]  # imported by the in-process Server tests
TESTS = [
    "tests/test_stream_storage.py",
    "tests/test_storage_keyspace.py",
    "tests/test_glob.py",
    "tests/test_group_lag.py",
    "tests/test_group_effects.py",
    "tests/test_keyspace_effects.py",
    "tests/test_streams_effects.py",
    "tests/test_survivors.py",
    "tests/test_keyspace_survivors.py",
    "tests/test_stream_survivors.py",
    "tests/test_spark_planning_model.py",
]
SKIP = {".git", ".venv", "mutants", "data", "__pycache__", ".hypothesis", ".pytest_cache", ".ruff_cache", "spark-warehouse", "metastore_db"}


def copy_tree(workdir: Path) -> None:
    """The sources and tests as they are now, without caches or a previous run's mutants."""
    if workdir.exists():
        shutil.rmtree(workdir)
    shutil.copytree(ROOT, workdir, ignore=lambda _dir, names: [n for n in names if n in SKIP])


def write_config(workdir: Path, paths: list[str]) -> None:
    """setup.cfg for mutmut (the copy's pyproject.toml has no [tool.mutmut], so this is read)."""

    def block(items: list[str]) -> str:
        return "".join(f"\n    {item}" for item in items)

    lines = [
        "[mutmut]",
        f"source_paths ={block(SOURCES)}",
        f"do_not_mutate ={block(NOT_MUTATED)}",
        f"also_copy ={block(ALSO_COPY)}",
        f"pytest_add_cli_args_test_selection ={block(TESTS)}",
        f"pytest_add_cli_args ={block(['-p', 'no:cacheprovider', '-q'])}",
    ]
    if paths:
        lines.append(f"only_mutate ={block(paths)}")
    (workdir / "setup.cfg").write_text("\n".join(lines) + "\n")


def report(workdir: Path) -> int:
    mutmut = [sys.executable, "-m", "mutmut"]
    subprocess.run([*mutmut, "export-cicd-stats"], cwd=workdir, check=True, stdout=subprocess.DEVNULL)
    stats = json.loads((workdir / "mutants" / "mutmut-cicd-stats.json").read_text())
    results = subprocess.run([*mutmut, "results"], cwd=workdir, check=True, capture_output=True, text=True).stdout
    left = [line.strip() for line in results.splitlines() if line.strip()]
    tested = stats["killed"] + stats["survived"] + stats["timeout"] + stats["suspicious"] + stats["segfault"]
    killed = stats["killed"] + stats["timeout"] + stats["segfault"]  # a hang or a crash is a failing test too
    print()
    print("mutants not killed:" if left else "every tested mutant was killed")
    for line in left:
        print("   ", line)
    print()
    print(json.dumps(stats))
    rate = 100.0 * killed / tested if tested else 0.0
    print(f"kill rate: {killed}/{tested} = {rate:.1f}% of the mutants the selected tests cover ({stats['no_tests']} covered by no in-process test)")
    print(f"details: cd {workdir} && {sys.executable} -m mutmut show <name>")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--paths", nargs="*", default=[], help="mutate only these files (globs), e.g. storage/stream.py")
    parser.add_argument("--workdir", default=os.environ.get("MUTATE_DIR", "/tmp/millrace-mutate"))
    parser.add_argument("--max-children", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args()
    workdir = Path(args.workdir).resolve()
    copy_tree(workdir)
    write_config(workdir, args.paths)
    subprocess.run([sys.executable, "-m", "mutmut", "run", "--max-children", str(args.max_children)], cwd=workdir, check=False)
    return report(workdir)


if __name__ == "__main__":
    raise SystemExit(main())
