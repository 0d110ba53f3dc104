"""The maxmemory meter's measure goes a slice at a time (server/maxmemory.py's MeasurePass): summing
MEMORY USAGE over every key at once stalled the server about half a second each second at 500,000
keys. In process: a pass measures what dataset_bytes() does, however it is sliced, and keys written,
deleted or replaced while it runs neither break it nor go uncounted."""

from __future__ import annotations

import random
import time

import server.commands  # noqa: F401  (registers the command table)
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
