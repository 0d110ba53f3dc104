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


def run_quick(tmp_path, suite: str) -> tuple[str, dict]:
    """`python -m bench SUITE --quick`: its output and its JSON results."""
    out = tmp_path / "results.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench", suite, "--quick", "--quiet", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout, json.loads(out.read_text())


def test_bench_quick_foundation(tmp_path):
    stdout, result = run_quick(tmp_path, "foundation")
    assert "summary" in stdout
    rows = result["rows"]
    throughput = [f"{cmd} -c 50 -P {p}" for p in (1, 16) for cmd in ("PING", "SET", "GET")]
    cpu = [f"server CPU per request, {cmd} -c 50 -P 1" for cmd in ("PING", "SET", "GET")]
    assert [row["name"] for row in rows] == throughput + cpu
    for row in rows:
        assert row["suite"] == "foundation"
        assert row["status"] in (("info",) if row["name"] in cpu else ("PASS", "MISS")), row
        for kind in ("redis", "millrace", "thin"):
            assert row[kind] >= 0 if row["name"] in cpu else row[kind] > 0, row
    for name in cpu:  # each server's lowest per-request CPU time among the rounds of its row
        row = next(row for row in rows if row["name"] == name)
        source = next(row for row in rows if row["name"] == name.removeprefix("server CPU per request, "))
        for kind in ("redis", "millrace", "thin"):
            assert row[kind] == min(source["extra"][kind]["cpu_us_per_request"])


def test_bench_quick_keyshared(tmp_path):
    """The KEYSHARED suite's rows, and its target row's per-round ratios: KEYSHARED over plain, round by round."""
    rows = {row["name"]: row for row in run_quick(tmp_path, "keyshared")[1]["rows"]}
    plain = rows["XREADGROUP COUNT 10 > + XACK, plain group, -c 50"]
    keyshared = rows["XREADGROUP COUNT 10 > + XACK, KEYSHARED group, -c 50"]
    share = rows["KEYSHARED / plain group (Millrace)"]
    assert plain["redis"] > 0 and plain["millrace"] > 0 and keyshared["millrace"] > 0
    assert share["millrace"] == pytest.approx(keyshared["millrace"] / plain["millrace"])
    rounds = zip(plain["extra"]["millrace"]["pairs_per_second"], keyshared["extra"]["millrace"]["pairs_per_second"], strict=True)
    per_round = share["extra"]["millrace"]["per_round"]
    assert per_round == pytest.approx([k / p for p, k in rounds], abs=2e-3)  # (the pair counts in the JSON are rounded)
    assert share["extra"]["millrace"]["median_per_round"] == pytest.approx(sorted(per_round)[len(per_round) // 2], abs=1e-3)
    assert rows["KEYSHARED index memory per draining hash"]["extra"]["millrace"]["draining"] > 0


def test_row_status_against_targets():
    from bench.harness import NOT_SUPPORTED, Row, Target

    assert Row("s", "x", "req/s", redis=100.0, millrace=30.0, target=Target("ratio_min", 0.3)).status == "PASS"
    assert Row("s", "x", "req/s", redis=100.0, millrace=29.0, target=Target("ratio_min", 0.3)).status == "MISS"
    assert Row("s", "x", "B", redis=10.0, millrace=31.0, target=Target("ratio_max", 3.0)).status == "MISS"
    assert Row("s", "x", "B", redis=10.0, millrace=30.0, target=Target("ratio_max", 3.0)).status == "PASS"
    assert Row("s", "x", "x", redis=1.0, millrace=2.5, target=Target("max", 2.0)).status == "MISS"
    assert Row("s", "x", "x", redis=1.0, millrace=0.69, target=Target("min", 0.7)).status == "MISS"
    assert Row("s", "x", "x", redis=0.1, millrace=0.7, target=Target("min", 0.7)).status == "PASS"
    assert Row("s", "x", "req/s", millrace=5.0, target=Target("ratio_min", 0.3)).status == "n/a"
    assert Row("s", "x", "us", redis=1.0, millrace=2.0).status == "info"
    assert Row("s", "x", "req/s", skipped=NOT_SUPPORTED).status == "n/a (not supported yet)"


def test_parse_redis_benchmark_csv():
    from bench.harness import parse_benchmark_csv

    text = (
        '"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"\n'
        '"PING_MBULK","123456.79","0.200","0.050","0.191","0.300","0.400","1.000"\n'
        '"XADD bench * f v","9000.00","1.000","0.100","0.900","1.500","2.500","9.000"\n'
    )
    results = parse_benchmark_csv(text)
    assert results["PING_MBULK"].rps == 123456.79
    assert results["PING_MBULK"].p99_ms == 0.4
    assert results["XADD BENCH * F V"].p50_ms == 0.9
