"""tests/test_retention_model.py's brute-force model, on an in-process server (issue 27, README "Mutation testing").

The model test runs its workload on a primary process, a replica and
restarts, so mutmut cannot attribute it to storage/retention.py. The same
Workload and Model run here on a Server in this process: every reply goes
through the RESP2 encoder and hiredis, as redis-py would read it, and the
server's clock is the wall clock at each command, as a process's is. After
every step the stream holds exactly the entries the model says, with the
model's counters, holder and per-group losses (byte limits within bounds).
"""

from __future__ import annotations

import time

import hiredis
import msgpack
import pytest
import redis

import server.commands  # noqa: F401  (registers the command table)
from persistence.snapshot import decode_value, encode_value
from protocol.encoder import encode
from protocol.reply import Error
from server.client import Client
from server.server import Server
from tests.test_retention_model import KEY, NODE, Workload, full_state


class InProcessClient:
    """The few redis-py calls the workload makes, answered by an in-process Server."""

    def __init__(self) -> None:
        self.server = Server()
        self.client = Client(self.server)
        self.execute_command("CONFIG", "SET", "stream-node-max-entries", NODE)

    def execute_command(self, *args):
        self.server.now = int(time.time() * 1000)
        argv = [a if isinstance(a, bytes) else str(a).encode() for a in args]
        reply = self.server.execute(self.client, argv)
        if isinstance(reply, Error):
            raise redis.ResponseError(bytes(reply).decode(errors="replace").removeprefix("-").strip())
        reader = hiredis.Reader()
        reader.feed(encode(reply, 2))
        value = reader.gets()
        if isinstance(value, hiredis.ReplyError):
            raise redis.ResponseError(str(value))
        return value

    def xrange(self, key):
        return [(entry[0], entry[1]) for entry in self.execute_command("XRANGE", key, "-", "+")]

    def exists(self, key) -> int:
        return self.execute_command("EXISTS", key)

    def memory_usage(self, key) -> int:
        return self.execute_command("MEMORY", "USAGE", key)

    def xclaim(self, key, group, consumer, min_idle, ids, justid=False):
        return self.execute_command("XCLAIM", key, group, consumer, min_idle, *ids, *(["JUSTID"] if justid else []))


@pytest.mark.parametrize("seed", range(1, 7))
def test_retention_matches_the_model_in_process(seed: int) -> None:
    work = Workload(InProcessClient(), seed)
    work.steps(250)


@pytest.mark.parametrize("seed", range(1, 5))
def test_retention_state_survives_a_snapshot_round_trip(seed: int) -> None:
    """The stream's record as a snapshot writes it (retention's optional map: policy, roles, counters), read
    into another server: the same state, and the model goes on holding there (the policy and roles decide)."""
    work = Workload(InProcessClient(), seed)
    work.steps(120)
    stream = work.c.server.keyspace.dbs[0].data[KEY]
    kind, payload = encode_value(stream)
    packed = msgpack.packb(payload, use_bin_type=True)
    fresh = InProcessClient()
    fresh.server.keyspace.dbs[0].set(KEY, decode_value(kind, msgpack.unpackb(packed, raw=False, strict_map_key=False)))
    assert full_state(fresh) == full_state(work.c)
    work.c = fresh
    work.steps(120)
