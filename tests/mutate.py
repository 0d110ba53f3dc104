"""`make mutate`: mutation testing of storage/ and pipeline/ with mutmut 3, and the kill rate.

mutmut runs in a copy of the working tree (it writes a `mutants/` tree and a
cache beside the sources; other work in the tree goes on meanwhile). Each
mutant is tested by the tests that call its function in the pytest process
(mutmut records that in a first, full run): the in-process tests listed in
TESTS. Tests that reach storage/ only through a server process would run each
mutant in that process too, but mutmut cannot see that they cover it, and the
Spark tests take minutes each: both stay out. The suite itself is `make test`.

    python -m tests.mutate [--paths storage/stream.py ...] [--workdir DIR] [--max-children N] [--resume]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from fnmatch import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ["storage/", "pipeline/"]
NOT_MUTATED = ["pipeline/jobs/*"]  # example jobs, run by `make pipeline`
ALSO_COPY = ["server/", "protocol/", "persistence/"]  # imported by the in-process Server tests
BASE_TESTS = [
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
# The in-process tests written for one module's mutants (they call it directly). A run of
# --paths selects BASE_TESTS plus those of the paths named; a full run selects them all.
TESTS: dict[str, list[str]] = {
    "storage/stream.py": ["tests/test_stream_node_bytes.py", "tests/test_stream_huge.py"],
    "storage/rank.py": ["tests/test_rank.py", "tests/test_rank_survivors.py"],
    "storage/lag.py": ["tests/test_lag.py", "tests/test_lag_survivors.py"],
    "storage/burrow.py": ["tests/test_burrow.py", "tests/test_burrow_model.py"],
    "storage/refs.py": ["tests/test_refs_model.py", "tests/test_r8_refs.py", "tests/test_r8_refs_effects.py"],
    "storage/retention.py": [  # (test_retention.py's server tests cannot be attributed, and one is timing-sensitive there)
        "tests/test_retention_helpers.py",
        "tests/test_retention_inprocess.py",
        "tests/test_retention.py::test_snapshots_without_retention_still_load_and_roles_of_destroyed_groups_go",
        "tests/test_retention.py::test_the_byte_meter_matches_memory_usage_node_by_node",
    ],
    "storage/idmp.py": ["tests/test_idmp_model.py", "tests/test_idmp.py", "tests/test_idmp_effects.py"],
    "storage/claim.py": ["tests/test_claim_survivors.py", "tests/test_claim_model.py", "tests/test_claim_effects.py"],
    "storage/keyshared*.py": [  # (test_keyshared.py's tests run on server processes; only its ring helper is in-process)
        "tests/test_keyshared_survivors.py",
        "tests/test_keyshared_deferred_model.py",
        "tests/test_keyshared_ring.py",
        "tests/test_keyshared_join.py",
        # (not test_reads_past_254_consumers_decide_as_the_entry_loop: it compares the server's two read paths, ~9 s
        # per mutant; the owner-byte cap it reaches is test_keyshared_deferred_model.py's too)
        "tests/test_keyshared_deferred.py::test_the_blocks_answer_as_a_dict",
        "tests/test_keyshared_model.py",
        "tests/test_backlog_keyshared.py",
    ],
    "storage/backlog.py": ["tests/test_backlog_keyshared.py", "tests/test_backlog_survivors.py", "tests/test_backlog_inprocess.py", "tests/test_backlog.py"],
    "pipeline/stream_ids.py": ["tests/test_pipeline_stream_ids.py"],
    "pipeline/idempotence.py": ["tests/test_pipeline_idempotence.py"],
    "pipeline/batch_reader.py": ["tests/test_pipeline_batch_reader.py"],
    "pipeline/save_modes.py": ["tests/test_pipeline_save_modes.py"],
    "pipeline/writer.py": ["tests/test_pipeline_writer.py"],
    "pipeline/client.py": ["tests/test_pipeline_client.py"],
    "pipeline/source.py": ["tests/test_pipeline_client.py"],
    "pipeline/arrow_batches.py": ["tests/test_pipeline_arrow_batches.py", "tests/test_pipeline_batch_reader.py"],
    "pipeline/option*.py": [  # the option tests of test_spark_firsthour.py that need no Spark session or server
        "tests/test_pipeline_options.py",
        "tests/test_spark_firsthour.py::test_read_option_names",
        "tests/test_spark_firsthour.py::test_valid_options_and_spark_own_ones_pass",
        "tests/test_spark_firsthour.py::test_write_option_names",
    ],
}
SKIP = {".git", ".venv", "mutants", "data", "__pycache__", ".hypothesis", ".pytest_cache", ".ruff_cache", "spark-warehouse", "metastore_db"}


def copy_tree(workdir: Path) -> None:
    """The sources and tests as they are now, without caches or a previous run's mutants."""
    if workdir.exists():
        shutil.rmtree(workdir)
    shutil.copytree(ROOT, workdir, ignore=lambda _dir, names: [n for n in names if n in SKIP])


def select_tests(paths: list[str]) -> list[str]:
    """BASE_TESTS, and the module tests of the paths named (of every module when none is)."""
    chosen: list[str] = []
    for module, tests in TESTS.items():
        if not paths or any(fnmatch(module, path) or fnmatch(path, module) for path in paths):
            chosen += [test for test in tests if test not in chosen]
    # the module's own tests first: mutmut's forced-fail check stops at the first test that calls it
    return chosen + [test for test in BASE_TESTS if test not in chosen]


def write_config(workdir: Path, paths: list[str]) -> None:
    """setup.cfg for mutmut (the copy's pyproject.toml has no [tool.mutmut], so this is read)."""

    def block(items: list[str]) -> str:
        return "".join(f"\n    {item}" for item in items)

    lines = [
        "[mutmut]",
        f"source_paths ={block(SOURCES)}",
        f"do_not_mutate ={block(NOT_MUTATED)}",
        f"also_copy ={block(ALSO_COPY)}",
        f"pytest_add_cli_args_test_selection ={block(select_tests(paths))}",
        f"pytest_add_cli_args ={block(['-p', 'no:cacheprovider', '-q'])}",
        # CPU-second limit per mutant: (its tests' time + 1 s) x 5 x 2 rather than mutmut's x 15 x 2, so that
        # a looping mutant does not hold a shared core for minutes (ten times the normal time is still a hang)
        "timeout_multiplier = 5",
    ]
    if paths:
        lines.append(f"only_mutate ={block(paths)}")
    (workdir / "setup.cfg").write_text("\n".join(lines) + "\n")


def _descendants(root: int) -> list[int]:
    """Every process below root (from /proc's parent links)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def watch_mutants(root: int, max_rss_mb: int, max_seconds: float, stop: threading.Event) -> None:
    """SIGKILL a mutant's test process past max_rss_mb of RSS or max_seconds of wall time.

    mutmut limits a mutant's CPU time only; a mutant that loops growing a list can take
    gigabytes first, and on a shared machine a slow one waits long for its CPU seconds.
    A killed mutant counts as killed (a crash or a hang is a failing test), as mutmut's own
    timeouts do. mutmut names each such process "mutmut: <mutant>" (setproctitle).
    """
    seen: dict[int, float] = {}
    while not stop.wait(1.0):
        for pid in _descendants(root):
            try:
                title = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
                if not title.startswith(b"mutmut: "):
                    continue
                rss_kb = next(int(line.split()[1]) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("VmRSS:"))
            except (OSError, StopIteration):
                continue
            started = seen.setdefault(pid, time.monotonic())
            age = time.monotonic() - started
            if rss_kb > max_rss_mb * 1024 or age > max_seconds:
                print(f"\nwatchdog: killing {title.decode(errors='replace')} (pid {pid}, {rss_kb // 1024} MB, {age:.0f} s)", flush=True)
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        seen = {pid: t for pid, t in seen.items() if Path(f"/proc/{pid}").exists()}


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
    parser.add_argument("--resume", action="store_true", help="go on with the mutants left in --workdir (same sources and tests)")
    parser.add_argument("--max-rss-mb", type=int, default=1536, help="kill a mutant's tests past this RSS")
    parser.add_argument("--max-seconds", type=float, default=120.0, help="kill a mutant's tests past this wall time")
    args = parser.parse_args()
    workdir = Path(args.workdir).resolve()
    if not args.resume:
        copy_tree(workdir)
    write_config(workdir, args.paths)
    run = subprocess.Popen([sys.executable, "-m", "mutmut", "run", "--max-children", str(args.max_children)], cwd=workdir)
    stop = threading.Event()
    watchdog = threading.Thread(target=watch_mutants, args=(run.pid, args.max_rss_mb, args.max_seconds, stop), daemon=True)
    watchdog.start()
    run.wait()
    stop.set()
    return report(workdir)


if __name__ == "__main__":
    raise SystemExit(main())
