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


def test_evictions_cut_short_by_their_cap_let_the_command_run():
    """Redis's EVICT_RUNNING: at most MAX_EVICTIONS keys go before one command, which then runs (it
    used to get OOM while keys were left to evict); the next command evicts on."""
    from server.client import LoadingClient
    from server.eviction import MAX_EVICTIONS

    server = Server()
    server.config.set("maxmemory-policy", "allkeys-random")
    server.memory_startup = 10_000  # (in process it is 0)
    server.config.set("maxmemory", "1")  # below the start-up memory: over the limit whatever is evicted
    db = server.keyspace.dbs[0]
    for i in range(3 * MAX_EVICTIONS):
        db.data[b"k%d" % i] = b"v" * 100
    meter = server.memory_meter
    meter.measure(server.now)
    assert server.oom
    client = LoadingClient(server)
    cmd = server.commands[b"set"]
    assert meter.admit(client, cmd, [b"SET", b"new", b"v"])
    assert len(db.data) == 2 * MAX_EVICTIONS and server.stats["evicted_keys"] == MAX_EVICTIONS
    assert meter.admit(client, cmd, [b"SET", b"new", b"v"])
    assert len(db.data) == MAX_EVICTIONS
    assert meter.admit(client, cmd, [b"SET", b"new", b"v"])  # the last ones: cut short again
    assert not db.data and not meter.admit(client, cmd, [b"SET", b"new", b"v"])  # nothing left: OOM


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
