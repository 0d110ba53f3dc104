"""The maxmemory meter's measure goes a slice at a time (server/maxmemory.py's MeasurePass): summing
MEMORY USAGE over every key at once stalled the server about half a second each second at 500,000
keys. In process: a pass measures what dataset_bytes() does, however it is sliced, and keys written,
deleted or replaced while it runs neither break it nor go uncounted."""

from __future__ import annotations

import random
import time

import server.commands  # noqa: F401  (registers the command table)
from server import maxmemory
from server.maxmemory import MeasurePass, dataset_bytes
from server.server import Server
from storage.stream import Stream


def filled_server(keys: int) -> Server:
    server = Server()
    for db in server.keyspace.dbs[:3]:
        for i in range(keys):
            db.data[b"k%d" % i] = b"v" * (i % 50)
    stream = Stream()
    for i in range(1, 500):
        stream.add(1_700_000_000_000 + i, [b"f", b"v%d" % i])
    server.keyspace.dbs[0].data[b"stream"] = stream
    return server


def test_a_sliced_pass_sums_what_one_measure_does():
    server = filled_server(3000)
    expected = dataset_bytes(server)
    measure = MeasurePass(server)
    steps = 1
    while not measure.step(time.perf_counter() - 1):  # a deadline already past: one slice of 256 keys per step
        steps += 1
    assert measure.total == expected
    assert steps >= 3 * 3000 // 256


def test_a_pass_survives_writes_between_its_slices():
    server = filled_server(2000)
    measure = MeasurePass(server)
    rng = random.Random(7)
    db0 = server.keyspace.dbs[0]
    while not measure.step(time.perf_counter() - 1):
        key = b"k%d" % rng.randrange(2000)
        if rng.random() < 0.5:
            db0.data.pop(key, None)  # a key gone before its slice: not counted
        else:
            db0.data[key] = b"x" * 10  # a key replaced: counted as it is when its slice comes
        server.keyspace.dbs[1].data.clear() if rng.random() < 0.01 else None
    assert 0 < measure.total <= dataset_bytes(server) + 2000 * 100


class _Loop:
    def __init__(self) -> None:
        self.soon: list = []

    def call_soon(self, callback, *args) -> None:
        self.soon.append((callback, args))


def test_evictions_cut_short_by_tenacity_let_the_command_run_and_go_on():
    """Redis's EVICT_RUNNING: maxmemory-eviction-tenacity bounds the time one command evicts for (the
    clock read every 16 keys; tenacity 0: 16 keys), the command then runs (it used to get OOM while
    keys were left to evict), and evictions go on between loop turns; tenacity 100: no bound."""
    from server.client import LoadingClient

    server = Server()
    server.loop = loop = _Loop()
    server.config.set("maxmemory-policy", "allkeys-random")
    server.config.set("maxmemory-eviction-tenacity", "0")
    server.memory_startup = 10_000  # (in process it is 0)
    db = server.keyspace.dbs[0]
    for i in range(3000):
        db.data[b"k%d" % i] = b"v" * 100
    server.config.set("maxmemory", "1")  # below the start-up memory: over the limit whatever is evicted
    meter = server.memory_meter
    meter.measure(server.now)
    assert server.oom
    assert len(loop.soon) == 1 and len(db.data) == 3000  # CONFIG SET's evictions start between turns
    loop.soon.clear()
    server.evictor.running = False
    client = LoadingClient(server)
    cmd = server.commands[b"set"]
    assert meter.admit(client, cmd, [b"SET", b"new", b"v"])
    assert len(db.data) == 3000 - 16 and server.stats["evicted_keys"] == 16
    assert len(loop.soon) == 1 and server.evictor.exceeded_since  # going on; over maxmemory since
    callback, args = loop.soon.pop()
    callback(*args)  # one turn: 16 more, and the next turn asked for
    assert len(db.data) == 3000 - 32 and len(loop.soon) == 1
    server.config.set("maxmemory-eviction-tenacity", "100")
    assert not meter.admit(client, cmd, [b"SET", b"new", b"v"])  # no bound: every key evicted, still over: OOM
    assert not db.data


def test_an_eviction_during_a_sliced_pass_is_counted_once(monkeypatch):
    """A key evicted before the pass reaches it was taken off the meter and then never counted by the
    pass either: the meter ended a third low, and the server ran over maxmemory."""
    monkeypatch.setattr(maxmemory, "MEASURE_SLICE_MS", 0)  # a slice of 256 keys, however fast the machine
    server = Server()
    db = server.keyspace.dbs[0]
    for i in range(6000):
        db.data[b"k%05d" % i] = b"v" * 1000
    server.config.set("maxmemory-policy", "allkeys-random")
    server.config.set("maxmemory", str(10**12))
    meter = server.memory_meter
    meter.measure(server.now)
    meter.measured_at = -10**9  # the next cron tick starts a pass
    meter.cron(server.now)
    assert meter.running is not None
    for i in range(2000):  # keys the pass (it walks the list from its end) has not reached
        key = b"k%05d" % i
        meter.freed(server.evictor._size(db, key))
        server.evictor.delete(db, key)
    while meter.running is not None:
        meter.cron(server.now)
    assert meter.dataset + meter.since >= dataset_bytes(server)


def test_the_eviction_time_limit_is_redis_s():
    """Redis's evictionTimeLimitUs: 50 us a step up to tenacity 10, then 15 % more a step, no limit at 100."""
    from server.eviction import eviction_time_limit_us

    assert [eviction_time_limit_us(t) for t in (0, 1, 10)] == [0, 50, 500]
    assert [eviction_time_limit_us(t) for t in (11, 20, 99)] == [575, int(500.0 * 1.15**10), int(500.0 * 1.15**89)]
    assert eviction_time_limit_us(100) == float("inf")
