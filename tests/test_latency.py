"""LATENCY and INFO latencystats (issue 26): reply shapes, texts and errors against Redis
8.2.3, the histogram arithmetic against a brute-force model (sorted durations), and the
spike time series against a model of latency.c's rules."""

from __future__ import annotations

import random
import re
import time

import pytest

from server.latency import (
    HIST_MAX_NS,
    LatencyMonitor,
    TimeSeries,
    cdf,
    doctor,
    graph,
    hdr_index,
    highest_equivalent,
    percentiles_line,
    record_us,
    value_at_percentile,
)
from tests.rawclient import RawConn, encode_command
from tests.servers import require_redis, start_millrace, start_redis


@pytest.fixture(scope="module")
def pair():
    require_redis()
    ours = start_millrace("--enable-debug-command", "yes")
    theirs = start_redis("--enable-debug-command", "yes")
    yield ours, theirs
    ours.stop()
    theirs.stop()


def both(pair, *args, **kw):
    out = []
    for proc in pair:
        with proc.client(**kw) as client:
            out.append(client.execute_command(*args))
    return out


def fresh(pair, threshold: int = 0) -> None:
    for proc in pair:
        with proc.client() as client:
            client.config_set("latency-monitor-threshold", threshold)
            client.config_set("latency-tracking", "yes")
            client.config_set("latency-tracking-info-percentiles", "50 99 99.9")
            client.execute_command("LATENCY", "RESET")
            client.config_resetstat()


def raw_info(proc, section: str) -> str:
    conn = RawConn(proc.port)
    try:
        return conn.call("INFO", section).decode()
    finally:
        conn.close()


def digits(text) -> str:
    text = text.decode() if isinstance(text, bytes) else text
    return re.sub(r"\d+", "N", text)


def test_help_errors_and_config_match_redis(pair):
    ours, theirs = both(pair, "LATENCY", "HELP")
    assert ours == theirs
    for args in (("LATENCY", "FOO"), ("LATENCY", "HISTORY"), ("LATENCY", "GRAPH"), ("LATENCY", "LATEST", "x"),
                 ("LATENCY", "DOCTOR", "x"), ("LATENCY", "GRAPH", "nosuch"), ("LATENCY",)):
        replies = []
        for proc in pair:
            conn = RawConn(proc.port)
            replies.append(conn.call(*args))
            conn.close()
        assert str(replies[0]) == str(replies[1]), args
    configs = [proc.client().config_get("latency*") for proc in pair]
    assert configs[0] == configs[1]


def test_command_docs_arguments_match_redis(pair):
    """redis-cli's hints come from COMMAND DOCS: each LATENCY subcommand's argument tree is Redis's."""
    for sub in ("latest", "history", "reset", "graph", "doctor", "histogram"):
        docs = []
        for proc in pair:
            conn = RawConn(proc.port)
            reply = conn.call("COMMAND", "DOCS", f"latency|{sub}")
            conn.close()
            fields = dict(zip(reply[1][0::2], reply[1][1::2], strict=True))
            docs.append(fields.get(b"arguments"))
        assert docs[0] == docs[1], sub


def test_nothing_recorded(pair):
    fresh(pair, threshold=0)
    assert both(pair, "LATENCY", "LATEST") == [[], []]
    assert both(pair, "LATENCY", "HISTORY", "command") == [[], []]
    ours, theirs = both(pair, "LATENCY", "DOCTOR")
    assert ours == theirs and ours.startswith(b"I'm sorry, Dave")
    fresh(pair, threshold=100)
    ours, theirs = both(pair, "LATENCY", "DOCTOR")
    assert ours == theirs and b"no latency spike" in ours
    assert both(pair, "LATENCY", "RESET", "command") == [0, 0]


def test_spike_replies_have_redis_shapes(pair):
    fresh(pair, threshold=5)
    for proc in pair:
        with proc.client() as client:
            client.execute_command("DEBUG", "SLEEP", "0.02")
            client.ping()  # fast and quick: no sample
    ours, theirs = both(pair, "LATENCY", "LATEST")
    for latest in (ours, theirs):
        assert len(latest) == 1 and latest[0][0] == b"command"
        _, when, last, worst = latest[0]
        assert abs(when - time.time()) < 5 and 20 <= last <= worst < 1000
    for history in both(pair, "LATENCY", "HISTORY", "command"):
        assert len(history) == 1 and len(history[0]) == 2
    ours, theirs = both(pair, "LATENCY", "GRAPH", "command")
    assert digits(ours) == digits(theirs)
    ours, theirs = both(pair, "LATENCY", "DOCTOR")
    assert digits(ours) == digits(theirs)
    assert both(pair, "LATENCY", "RESET", "command", "nosuch") == [1, 1]
    assert both(pair, "LATENCY", "LATEST") == [[], []]


def test_resp3_types_match(pair):
    fresh(pair, threshold=5)
    raw = []
    for proc in pair:
        with proc.client() as client:
            client.execute_command("DEBUG", "SLEEP", "0.01")
            client.ping()
        conn = RawConn(proc.port)
        conn.call("HELLO", "3")
        frames = []
        for args in (("LATENCY", "GRAPH", "command"), ("LATENCY", "DOCTOR"), ("LATENCY", "HISTOGRAM", "ping"), ("LATENCY", "LATEST")):
            conn.send(encode_command(*args))
            frames.append(conn.read_raw(timeout=2)[:1])
        conn.close()
        raw.append(frames)
    assert raw[0] == raw[1] == [b"=", b"=", b"%", b"*"]


def test_histogram_and_latencystats_shapes(pair):
    fresh(pair)
    for proc in pair:
        with proc.client() as client:
            for _ in range(20):
                client.ping()
            client.set("k", "v")
            client.execute_command("CONFIG", "GET", "maxclients")
    ours, theirs = both(pair, "LATENCY", "HISTOGRAM", "ping", "set", "config", "nosuch")
    assert set(ours) == set(theirs) == {b"ping", b"set", b"config|get", b"config|resetstat"}
    for reply in (ours, theirs):
        assert reply[b"ping"][b"calls"] == 20 and reply[b"set"][b"calls"] == 1
        for entry in reply.values():
            bounds = list(entry[b"histogram_usec"])
            assert bounds == sorted(bounds) and set(bounds) <= set(POWER_BOUNDS)
            assert list(entry[b"histogram_usec"].values())[-1] == entry[b"calls"]
    infos = [proc.client().info("latencystats") for proc in pair]
    for info in infos:
        assert {"latency_percentiles_usec_ping", "latency_percentiles_usec_set", "latency_percentiles_usec_config|get"} <= set(info)
    lines = []
    for proc in pair:
        with proc.client() as client:
            client.config_set("latency-tracking-info-percentiles", "0 100 12.5 99.99")
        text = raw_info(proc, "latencystats")
        lines.append(re.search(r"^latency_percentiles_usec_ping:(.*)\r$", text, re.M)[1])
    assert [digits(line) for line in lines] == ["pN=N.N,pN=N.N,pN.N=N.N,pN.N=N.N"] * 2
    assert [re.findall(r"p[\d.]+", line) for line in lines] == [["p0", "p100", "p12.5", "p99.99"]] * 2


def test_tracking_off_and_resetstat(pair):
    fresh(pair)
    for proc in pair:
        with proc.client() as client:
            client.ping()
            client.config_set("latency-tracking", "no")
            assert raw_info(proc, "latencystats") == "# Latencystats\r\n"
            client.config_set("latency-tracking", "yes")
            client.config_resetstat()
            assert client.execute_command("LATENCY", "HISTOGRAM", "ping") == {}


def test_reads_and_writes_processed(pair):
    for proc in pair:
        with proc.client() as client:
            before = client.info("stats")
            for _ in range(5):
                client.ping()
            after = client.info("stats")
        assert after["total_reads_processed"] - before["total_reads_processed"] == 6  # 5 PINGs and the INFO
        assert after["total_writes_processed"] - before["total_writes_processed"] == 6
    keys = []
    for proc in pair:
        text = raw_info(proc, "stats")
        keys.append([line.split(":")[0] for line in text.splitlines() if "processed" in line])
    assert keys[0][:5] == keys[1][:5]  # total_commands, reads, writes, io_threaded reads, writes in Redis's order


def test_graph_and_doctor_render_redis_samples_as_redis(pair):
    """Redis's own time series (LATENCY HISTORY) rendered here equals Redis's GRAPH and DOCTOR."""
    _, theirs = pair
    with theirs.client() as client:
        client.config_set("latency-monitor-threshold", 1)
        client.execute_command("LATENCY", "RESET")
        for sleep in ("0.012", "0.004", "0.03"):
            client.execute_command("DEBUG", "SLEEP", sleep)
            time.sleep(1.05)
        for _ in range(5):
            now = int(time.time())
            # every event Redis recorded, in its own order (a loaded machine adds some, e.g. module-acquire-GIL)
            latest = client.execute_command("LATENCY", "LATEST")
            histories = {name.decode(): client.execute_command("LATENCY", "HISTORY", name) for name, *_ in latest}
            text = client.execute_command("LATENCY", "GRAPH", "command").decode()
            report = client.execute_command("LATENCY", "DOCTOR").decode()
            # the same second, and no event recorded meanwhile (a loaded machine's Redis adds them as it goes)
            if int(time.time()) == now and client.execute_command("LATENCY", "LATEST") == latest:
                break
        config = {k: int(v) for k, v in client.config_get("*slower-than").items()} | {
            "slowlog-max-len": int(client.config_get("slowlog-max-len")["slowlog-max-len"])}
    monitor = LatencyMonitor()
    for name, _when, _last, worst in latest:
        monitor.events[name.decode()] = TimeSeries([(when, ms) for when, ms in histories[name.decode()]], worst)
    series = monitor.events["command"]
    assert len(series.samples) >= 3
    assert graph("command", series, now) == text
    assert doctor(monitor, 1, config["slowlog-log-slower-than"], config["slowlog-max-len"], now) == report


def test_expire_cycle_event(pair):
    """Active expiry that takes at least the threshold is an `expire-cycle` spike, as in Redis."""
    ours, _ = pair
    with ours.client() as client:
        client.flushall()
        client.config_set("latency-monitor-threshold", 1)
        client.execute_command("LATENCY", "RESET")
        pipe = client.pipeline(transaction=False)
        for i in range(60_000):
            pipe.set(f"k{i}", "v", px=200)
        pipe.execute()
        deadline = time.monotonic() + 20
        while client.dbsize() and time.monotonic() < deadline:
            time.sleep(0.2)
        events = {row[0]: row for row in client.execute_command("LATENCY", "LATEST")}
        client.config_set("latency-monitor-threshold", 0)
        assert client.dbsize() == 0
    assert b"expire-cycle" in events, events
    assert events[b"expire-cycle"][2] >= 1


# -- the arithmetic, against brute force -------------------------------------------

POWER_BOUNDS = [highest_equivalent(1024 << k) // 1000 for k in range(21)]


def nearest_rank_ns(durations_us: list[int], percentile: float) -> int:
    values = sorted(min(max(us * 1000, 1), HIST_MAX_NS) for us in durations_us)
    rank = max(int(percentile / 100 * len(values) + 0.5), 1)
    return values[min(rank, len(values)) - 1]


def test_known_redis_figures():
    """Figures Redis 8.2.3 printed: 1 µs is p50=1.003; a 20 ms and a 50 ms DEBUG SLEEP sit under 33816 and 67633."""
    one = {}
    record_us(one, 1)
    assert percentiles_line(one, [50.0, 99.0, 99.9]) == "p50=1.003,p99=1.003,p99.9=1.003"
    assert cdf(one) == [(1, 1)]
    sleeps = {}
    for us in (20185, 50300):
        record_us(sleeps, us)
    assert cdf(sleeps) == [(33816, 1), (67633, 2)]
    assert POWER_BOUNDS[:12] == [1, 2, 4, 8, 16, 33, 66, 132, 264, 528, 1056, 2113]


@pytest.mark.parametrize("seed", range(20))
def test_percentiles_and_cdf_against_sorted_durations(seed):
    rng = random.Random(seed)
    scale = rng.choice([10, 1000, 100_000, 3_000_000])
    durations = [int(rng.expovariate(1 / scale)) for _ in range(rng.randint(1, 3000))]
    histogram: dict[int, int] = {}
    for us in durations:
        record_us(histogram, us)
    assert len(histogram) <= 4096 + 256 * 12  # long durations share keys
    for percentile in (0, 0.1, 12.5, 50, 90, 99, 99.9, 100, rng.uniform(0, 100)):
        exact = nearest_rank_ns(durations, percentile)
        got = value_at_percentile(histogram, percentile)
        # the edge of exact's bucket: the lowest value in it for p0, else the highest (by hdr_index alone)
        assert hdr_index(got) == hdr_index(exact), percentile
        assert hdr_index(got - 1 if percentile == 0 else got + 1) != hdr_index(exact) or got <= 1, percentile
        assert abs(got - exact) <= exact / 100 + 1  # two significant figures
    previous = 0
    points = cdf(histogram)
    for bound_us, cumulative in points:
        level = next(1024 << k for k in range(40) if highest_equivalent(1024 << k) // 1000 == bound_us)
        top = highest_equivalent(level)
        assert hdr_index(top) == hdr_index(level) != hdr_index(top + 1)
        brute = sum(1 for us in durations if min(max(us * 1000, 1), HIST_MAX_NS) <= highest_equivalent(level))
        assert cumulative == brute and cumulative > previous
        previous = cumulative
    assert points[-1][1] == len(durations)
    line = percentiles_line(histogram, [50.0, 99.9])
    assert re.fullmatch(r"p50=\d+\.\d{3},p99\.9=\d+\.\d{3}", line)


@pytest.mark.parametrize("seed", range(10))
def test_time_series_against_model(seed):
    """One sample per second holding that second's worst, the last 160 seconds, the all-time max."""
    rng = random.Random(seed)
    monitor = LatencyMonitor()
    model: dict[str, dict[int, int]] = {}
    worst: dict[str, int] = {}
    now = 1_700_000_000
    for _ in range(rng.randint(1, 600)):
        now += rng.choice([0, 0, 1, 2, 5])
        event = rng.choice(["command", "fast-command", "expire-cycle"])
        ms = rng.randint(1, 500)
        monitor.add(event, ms, now)
        seconds = model.setdefault(event, {})
        seconds[now] = max(seconds.get(now, 0), ms)
        worst[event] = max(worst.get(event, 0), ms)
    for event, seconds in model.items():
        expected = sorted(seconds.items())[-160:]
        assert monitor.history(event) == [list(sample) for sample in expected]
        assert monitor.events[event].max == worst[event]
    assert [row[0].decode() for row in monitor.latest()] == list(model)
    assert monitor.reset(["command", "nosuch"]) == (1 if "command" in model else 0)
    assert monitor.reset([]) == len(model) - (1 if "command" in model else 0)
