"""`python -m bench [suite ...] [--quick] [--json PATH]` (what `make bench` runs).

Runs the chosen suites (all by default, in the order below), prints each
suite's rows as it finishes, then one summary table with every figure as a
ratio against Redis, the issue's target and PASS/MISS, and writes the rows
to bench/results.json. A suite that crashes is reported as an error row and
the others still run; the exit status is 1 only then (a MISS is a result,
not a failure).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import sys
import time
import traceback
from pathlib import Path

from .harness import Env, Row

ORDER = ("foundation", "streams", "groups", "keyshared", "spark", "keyspace", "persistence", "replication", "ha", "lag", "r8", "retention", "hardening")
HERE = Path(__file__).resolve().parent


def available_suites() -> list[str]:
    found = {path.stem.removeprefix("suite_") for path in HERE.glob("suite_*.py")}
    return [name for name in ORDER if name in found] + sorted(found - set(ORDER))


def fmt(value: float | None) -> str:
    if value is None:
        return "-"
    size = abs(value)
    if size >= 1e9:
        return f"{value / 1e9:.2f}G"
    if size >= 1e6:
        return f"{value / 1e6:.2f}M"
    if size >= 1e4:
        return f"{value / 1e3:.1f}k"
    if size >= 100:
        return f"{value:.0f}"
    if size >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def fmt_ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


HEADER = ("suite", "figure", "unit", "Redis", "Millrace", "thin", "M/Redis", "M/thin", "target", "status")


def table(rows: list[Row]) -> str:
    cells = [HEADER]
    for row in rows:
        cells.append(
            (
                row.suite,
                row.name,
                row.unit,
                fmt(row.redis),
                fmt(row.millrace),
                fmt(row.thin),
                fmt_ratio(row.ratio),
                fmt_ratio(row.thin_ratio),
                row.target.label() if row.target else "",
                row.status,
            )
        )
    widths = [max(len(line[col]) for line in cells) for col in range(len(HEADER))]
    numeric = {3, 4, 5, 6, 7}
    out = []
    for index, line in enumerate(cells):
        out.append("  ".join(text.rjust(widths[col]) if col in numeric else text.ljust(widths[col]) for col, text in enumerate(line)).rstrip())
        if index == 0:
            out.append("  ".join("-" * width for width in widths))
    notes = [f"  {row.suite}/{row.name}: {row.note}" for row in rows if row.note]
    if notes:
        out.append("notes:")
        out.extend(notes)
    return "\n".join(out)


def run_suite(name: str, env: Env) -> tuple[list[Row], float, str | None]:
    started = time.monotonic()
    try:
        module = importlib.import_module(f"bench.suite_{name}")
        rows = list(module.run(env))
        error = None
    except Exception as exc:  # a broken suite must not hide the others' figures
        traceback.print_exc()
        rows = [Row(name, "suite", "", skipped=f"error: {type(exc).__name__}", note=str(exc)[:300])]
        error = str(exc)
    return rows, time.monotonic() - started, error


def main(argv: list[str] | None = None) -> int:
    suites = available_suites()
    parser = argparse.ArgumentParser(prog="python -m bench", description="Millrace against Redis and the thin Python server.")
    parser.add_argument("suites", nargs="*", metavar="suite", help=f"suites to run (default: all): {', '.join(suites)}")
    parser.add_argument("--quick", action="store_true", help="small sizes and short runs (a smoke test, not a measurement)")
    parser.add_argument("--json", default=str(HERE / "results.json"), help="where to write the machine-readable results (default: bench/results.json)")
    parser.add_argument("--rounds", type=int, help="interleaved rounds per throughput figure, best kept (default 3, 1 with --quick)")
    parser.add_argument("--millrace-root", type=Path, help="run Millrace from this checkout instead (to compare branches)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    args = parser.parse_args(argv)
    unknown = [name for name in args.suites if name not in suites]
    if unknown:
        parser.error(f"unknown suite(s) {', '.join(unknown)}; choose from {', '.join(suites)}")
    chosen = args.suites or suites
    env = Env(quick=args.quick, verbose=not args.quiet, millrace_root=args.millrace_root)
    if args.rounds:
        env.rounds = args.rounds

    started = time.monotonic()
    all_rows: list[Row] = []
    durations: dict[str, float] = {}
    errors = 0
    for name in chosen:
        print(f"== {name}{' (quick)' if args.quick else ''}", file=sys.stderr, flush=True)
        rows, seconds, error = run_suite(name, env)
        durations[name] = round(seconds, 1)
        errors += error is not None
        all_rows.extend(rows)
        print(f"\n{table(rows)}\n({name}: {seconds:.0f} s)\n", flush=True)

    total = time.monotonic() - started
    print("=" * 20 + f" summary ({total:.0f} s{', quick' if args.quick else ''}) " + "=" * 20)
    print(table(all_rows))
    counts = {status: sum(row.status == status for row in all_rows) for status in ("PASS", "MISS")}
    print(f"{counts['PASS']} PASS, {counts['MISS']} MISS, {len(all_rows) - counts['PASS'] - counts['MISS']} other")

    result = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "quick": args.quick,
        "rounds": env.rounds,
        "machine": {"python": platform.python_version(), "platform": platform.platform(), "cpus": _cpus()},
        "suites": durations,
        "seconds": round(total, 1),
        "rows": [row.to_json() for row in all_rows],
    }
    Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    print(f"results written to {args.json}")
    return 1 if errors else 0


def _cpus() -> int:
    return len(os.sched_getaffinity(0))


if __name__ == "__main__":
    sys.exit(main())
