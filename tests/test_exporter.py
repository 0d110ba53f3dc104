"""prometheus-redis-exporter (Debian's package) scrapes Millrace as it scrapes Redis 8.2.3:
the same metric names, latency percentiles included, and no errors in its log."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
import urllib.request

import pytest

from tests.servers import free_port, require_redis, start_millrace, start_redis

EXPORTER = shutil.which("prometheus-redis-exporter")
pytestmark = pytest.mark.skipif(EXPORTER is None, reason="prometheus-redis-exporter is not installed (apt-get install prometheus-redis-exporter)")

# Redis 8's INFO keysizes section (per-db power-of-two histograms of string/list/set/zset/hash sizes);
# Millrace has no such section yet, so the exporter publishes none of these for it.
KEYSIZES = re.compile(r"redis_db\d+_distrib_\w+_sizes")


def scrape(port: int) -> tuple[set[str], str, str]:
    """(metric names, the exporter's log, the page) of one scrape of the server on port."""
    listen = free_port()
    proc = subprocess.Popen([EXPORTER, "-redis.addr", f"redis://127.0.0.1:{port}", "-web.listen-address", f"127.0.0.1:{listen}"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                page = urllib.request.urlopen(f"http://127.0.0.1:{listen}/metrics", timeout=10).read().decode()
                break
            except OSError:
                assert time.monotonic() < deadline, "the exporter did not answer"
                time.sleep(0.1)
    finally:
        proc.terminate()
        log = proc.communicate(timeout=10)[0].decode()
    names = {re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line)[0] for line in page.splitlines() if line and not line.startswith("#")}
    return names, log, page


def test_exporter_publishes_the_same_metrics_as_for_redis():
    require_redis()
    servers = [start_millrace(), start_redis()]
    try:
        results = []
        for server in servers:
            with server.client() as client:
                client.xadd("sensors", {"t": "1"})
                client.set("k", "v")
                client.get("k")
                client.execute_command("LATENCY", "LATEST")
            results.append(scrape(server.port))
    finally:
        for server in servers:
            server.stop()
    (ours, our_log, our_page), (theirs, _, _) = results
    assert "level=error" not in our_log and "unknown command" not in our_log, our_log
    assert "redis_up 1" in our_page
    assert ours - theirs == set()
    assert {name for name in theirs - ours if not KEYSIZES.fullmatch(name)} == set()
    assert {"redis_latency_percentiles_usec", "redis_latency_percentiles_usec_sum", "redis_latency_percentiles_usec_count"} <= ours
    assert re.search(r'^redis_latency_percentiles_usec\{cmd="xadd",quantile="99.9"\} \d', our_page, re.M)
