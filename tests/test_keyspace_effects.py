"""Effects of string/keyspace/transaction commands, in process: exact forms, and replay equivalence.

A `Server` is driven through `Client` objects without sockets, with the
clock (`server.now`) set by the test; a listener on `server.effect_listeners`
collects what would go to the AOF and replicas. Replaying those batches
through a `LoadingClient` into a fresh `Server` (at the same instants) must
give identical data and expiry tables.
"""

from __future__ import annotations

import random

import pytest

import server.commands  # noqa: F401  (registers the command table)
from protocol.reply import NULL_ARRAY, Error
from server.client import Client, LoadingClient
from server.server import Server
from storage.keyspace import Database
from tests.test_diff_keyspace import KEYS, random_command

T0 = 1_700_000_000_000


class Primary:
    def __init__(self) -> None:
        self.server = Server()
        self.server.now = T0
        self.client = Client(self.server)
        self.batches: list[tuple[int, list[list[bytes]]]] = []
        self.server.effect_listeners.append(lambda batch: self.batches.append((self.server.now, batch)))

    def __call__(self, *args, client=None):
        argv = [a if isinstance(a, bytes) else str(a).encode() for a in args]
        return self.server.execute(client or self.client, argv)

    def effects(self) -> list[list[bytes]]:
        """Every propagated command so far, flattened, then forgotten."""
        flat = [argv for _, batch in self.batches for argv in batch]
        self.batches.clear()
        return flat


@pytest.fixture
def p():
    return Primary()


def test_set_effects(p):
    p("SET", "k", "v")
    assert p.effects() == [[b"SELECT", b"0"], [b"SET", b"k", b"v"]]
    p("SET", "k", "v", "EX", "10", "GET")
    assert p.effects() == [[b"SET", b"k", b"v", b"PXAT", b"%d" % (T0 + 10_000)]]
    p("SET", "k", "v", "PX", "5", "XX")
    assert p.effects() == [[b"SET", b"k", b"v", b"PXAT", b"%d" % (T0 + 5)]]
    p("SET", "k", "w", "KEEPTTL")
    assert p.effects() == [[b"SET", b"k", b"w", b"KEEPTTL"]]
    p("SET", "k", "x", "EXAT", "1800000000")
    assert p.effects() == [[b"SET", b"k", b"x", b"PXAT", b"1800000000000"]]
    p("SET", "k", "y", "NX")
    p("SET", "missing", "y", "XX")
    p("SET", "k", "z", "EX", "0")
    assert p.effects() == []  # nothing set, nothing propagated


def test_expire_effects(p):
    p("SET", "k", "v")
    p.effects()
    assert p("EXPIRE", "k", "100") == 1
    assert p.effects() == [[b"PEXPIREAT", b"k", b"%d" % (T0 + 100_000)]]
    p("PEXPIRE", "k", "100", "GT")
    p("EXPIREAT", "k", "2000000000", "NX")
    p("EXPIRE", "nope", "10")
    p("PERSIST", "nope")
    assert p.effects() == []
    p("EXPIREAT", "k", "2000000000", "GT")
    assert p.effects() == [[b"PEXPIREAT", b"k", b"2000000000000"]]
    p("PERSIST", "k")
    assert p.effects() == [[b"PERSIST", b"k"]]
    assert p("PEXPIRE", "k", "-1") == 1
    assert p.effects() == [[b"DEL", b"k"]]


def test_keyspace_effects(p):
    p("MSET", "a", "1", "b", "2")
    p.effects()
    p("DEL", "a", "a", "nope")
    assert p.effects() == [[b"DEL", b"a"]]
    p("DEL", "nope")
    p("UNLINK", "nope")
    p("RENAME", "b", "b")
    p("RENAMENX", "nope", "x")
    assert p.effects() == []
    p("RENAMENX", "b", "c")
    assert p.effects() == [[b"RENAME", b"b", b"c"]]
    p("INCRBY", "c", "5")
    assert p.effects() == [[b"SET", b"c", b"7", b"KEEPTTL"]]
    p("SWAPDB", "1", "1")
    assert p.effects() == []
    assert p("SWAPDB", "00", "1") == Error(b"ERR invalid first DB index")  # string2ll: no leading zeros
    p("SWAPDB", "0", "1")
    assert p.effects() == [[b"SWAPDB", b"0", b"1"]]


def test_lazy_expiry_propagates_del_before_the_write(p):
    p("SET", "k", "5", "PX", "10")
    p.effects()
    p.server.now += 11
    assert p("INCR", "k") == 1
    assert p.effects() == [[b"DEL", b"k"], [b"SET", b"k", b"1", b"KEEPTTL"]]
    p("SET", "g", "1", "PX", "10")
    p.effects()
    p.server.now += 11
    assert p("GET", "g") is None
    assert p.effects() == [[b"DEL", b"g"]]


def test_keepttl_does_not_keep_a_ttl_already_past(p):
    """SET ... KEEPTTL on a key whose TTL has passed but that is still stored: Redis expires the key
    first (DEL propagated), so the new value has no TTL, rather than vanishing at once."""
    p("SET", "k", "5", "PX", "10")
    p.effects()
    p.server.now += 11
    assert p("SET", "k", "9", "KEEPTTL") == Simple_OK()
    assert p.effects() == [[b"DEL", b"k"], [b"SET", b"k", b"9", b"KEEPTTL"]]
    assert p("GET", "k") == b"9" and p("PTTL", "k") == -1
    p("SET", "live", "1", "PX", "10")
    p.server.now += 5
    p("SET", "live", "2", "KEEPTTL")
    assert p("PTTL", "live") == 5  # a TTL still ahead is kept


def test_exec_effects_are_wrapped(p):
    p("SET", "k", "1")
    p.effects()
    p("MULTI")
    p("INCR", "k")
    p("GET", "k")
    p("SET", "j", "1", "EX", "1")
    assert p("EXEC") == [2, b"2", Simple_OK()]
    assert p.effects() == [[b"MULTI"], [b"SET", b"k", b"2", b"KEEPTTL"], [b"SET", b"j", b"1", b"PXAT", b"%d" % (T0 + 1000)], [b"EXEC"]]
    p("MULTI")
    p("GET", "k")
    p("EXEC")
    assert p.effects() == []


def Simple_OK():
    from protocol.reply import OK

    return OK


def test_aborted_exec_propagates_nothing(p):
    other = Client(p.server)
    p("WATCH", "k")
    p("SET", "k", "1", client=other)
    p.effects()
    p("MULTI")
    p("SET", "x", "1")
    assert p("EXEC") is NULL_ARRAY
    assert p.effects() == []
    p("MULTI")
    p("SET", "x")
    assert isinstance(p("EXEC"), Error)
    assert p.effects() == []


def test_watch_invalidated_by_active_expiry(p):
    p("SET", "k", "1", "PX", "10")
    p("WATCH", "k")
    p.server.now += 20
    db = p.server.keyspace[0]
    removed, _ = db.expire_cycle(p.server.now)
    p.server.after_write(0, [[b"DEL", key] for key in removed])
    assert removed == [b"k"]
    p("MULTI")
    assert p("EXEC") is NULL_ARRAY


class FakeList:
    TYPE = "list"


def test_wrongtype_and_type_filters(p):
    p.server.keyspace[0].data[b"l"] = FakeList()
    wrongtype = b"WRONGTYPE Operation against a key holding the wrong kind of value"
    for args in (("GET", "l"), ("APPEND", "l", "x"), ("STRLEN", "l"), ("GETDEL", "l"), ("INCR", "l"), ("SET", "l", "v", "GET")):
        assert p(*args) == Error(wrongtype), args
    assert p("MGET", "l") == [None]
    assert p("TYPE", "l") == b"list"
    p("SET", "s", "v")
    assert p("SCAN", "0", "TYPE", "list") == [b"0", [b"l"]]
    assert p("SCAN", "0", "TYPE", "string") == [b"0", [b"s"]]
    assert p("SET", "l", "now a string") == Simple_OK()
    assert p("GET", "l") == b"now a string"


def snapshot(srv: Server):
    return [(dict(db.data), dict(db.expires)) for db in srv.keyspace.dbs]


@pytest.mark.parametrize("expiry", ["delete", "keep"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_replayed_effects_rebuild_the_same_keyspace(seed, expiry):
    """A random workload (with short TTLs, clock jumps, active expiry and transactions) replays exactly.

    Replayed at the primary's instants, both with lazy expiry on and in the
    "keep" mode a loader or replica uses (expired keys only go by the DELs).
    """
    rng = random.Random(seed)
    p = Primary()
    clients = [p.client, Client(p.server)]
    checkpoints = []  # (batches so far, keyspace then): compared all along the replay, not just at the end
    for step in range(2500):
        if step % 5 == 0:
            checkpoints.append((len(p.batches), snapshot(p.server)))
        p.server.now += rng.choice([0, 0, 1, 3, 50, 400])
        client = rng.choice(clients)
        roll = rng.random()
        if roll < 0.03:
            p("MULTI", client=client)
        elif roll < 0.06:
            p(rng.choice(["EXEC", "EXEC", "DISCARD"]), client=client)
        elif roll < 0.08:
            p("WATCH", rng.choice(KEYS), client=client)
        elif roll < 0.10:
            p("SET", rng.choice(KEYS), "short", "PX", rng.choice(["1", "20", "300"]), client=client)
        elif roll < 0.12:
            for db in p.server.keyspace.dbs:
                removed, _ = db.expire_cycle(p.server.now, keys_per_loop=3, max_loops=2)
                if removed:
                    p.server.after_write(db.id, [[b"DEL", key] for key in removed])
        else:
            args, _ = random_command(rng, p.server.now // 1000)
            if args[0] == "FLUSHDB" and rng.random() < 0.8:
                continue  # keep the keyspace populated most of the time
            p(*args, client=client)
    for client in clients:
        if client.multi is not None:
            p("EXEC", client=client)

    checkpoints.append((len(p.batches), snapshot(p.server)))

    replica = Server()
    loader = LoadingClient(replica)
    applied = 0
    Database.expiry = expiry
    try:
        for upto, expected in checkpoints:
            for now, batch in p.batches[applied:upto]:
                replica.now = now
                for argv in batch:
                    reply = replica.execute(loader, argv)
                    assert not isinstance(reply, Error), (argv, reply)
            applied = upto
            assert snapshot(replica) == expected, f"after {upto} batches"
    finally:
        Database.expiry = "delete"
    assert sum(len(db.data) for db in p.server.keyspace.dbs) > 0


def test_more_string_and_key_effects(p):
    p("SET", "a", "1")
    p.effects()
    p("SETNX", "a", "2")
    p("GETEX", "a")
    p("GETEX", "a", "PERSIST")
    p("SETRANGE", "a", "0", "")
    p("MOVE", "nope", "1")
    p("COPY", "nope", "x")
    assert p.effects() == []
    p("SETEX", "b", "10", "x")
    assert p.effects() == [[b"SET", b"b", b"x", b"PXAT", b"%d" % (T0 + 10_000)]]
    p("GETEX", "b", "PX", "50")
    assert p.effects() == [[b"PEXPIREAT", b"b", b"%d" % (T0 + 50)]]
    p("GETEX", "b", "EXAT", "1")
    assert p.effects() == [[b"DEL", b"b"]]
    p("COPY", "a", "c")
    assert p.effects() == [[b"COPY", b"a", b"c", b"DB", b"0"]]
    p("COPY", "a", "c", "REPLACE")
    assert p.effects() == [[b"COPY", b"a", b"c", b"DB", b"0", b"REPLACE"]]
    p("MOVE", "c", "1")
    assert p.effects() == [[b"MOVE", b"c", b"1"]]


def test_incrbyfloat_propagates_the_exact_value(p):
    p("INCRBYFLOAT", "f", "0.1")
    p("INCRBYFLOAT", "f", "0.2")
    assert p.effects()[1:] == [[b"SET", b"f", b"0.1", b"KEEPTTL"], [b"SET", b"f", b"0.3", b"KEEPTTL"]]


def test_watch_fails_for_a_key_expired_but_not_yet_removed(p):
    p("SET", "k", "1", "PX", "10")
    p("WATCH", "k")
    p.server.now += 20  # nobody touches k: no lazy or active expiry ran
    p("MULTI")
    p("SET", "x", "1")
    assert p("EXEC") is NULL_ARRAY
    assert b"k" in p.server.keyspace[0].data
    p("SET", "j", "1", "PX", "10")
    p.server.now += 20
    p("WATCH", "j")  # already expired when watched: removed now, and no change later
    p("MULTI")
    assert p("EXEC") == []


def test_late_replay_needs_keep_mode(p):
    """Effects applied later than they happened (AOF load, a lagging replica) must not expire keys themselves."""
    p("SET", "k", "v", "PX", "10")
    p.server.now += 5
    p("PERSIST", "k")
    batches = [batch for _, batch in p.batches]

    def replay(mode: str) -> dict:
        replica = Server()
        replica.now = T0 + 1000  # well after the original TTL
        loader = LoadingClient(replica)
        Database.expiry = mode
        try:
            for batch in batches:
                for argv in batch:
                    replica.execute(loader, argv)
        finally:
            Database.expiry = "delete"
        return dict(replica.keyspace[0].data)

    assert replay("keep") == {b"k": b"v"}  # as on the primary
    assert replay("delete") == {}  # the PERSIST found its key expired: why loaders use "keep"
