"""Idempotent production (Redis 8.6): XADD IDMP/IDMPAUTO, XCFGSET, XIDMPRECORD, the configs, XINFO's fields.

Redis 8.2.3, the oracle, predates IDMP: the spec (shared/specs/redis-8-streams.md
section 7, from Redis's own tests) is the reference here. Server tests talk to a
real Millrace process (redis-py, raw RESP for reply shapes); the model tests run
random workloads in-process against a brute-force model of the maps (every
iid kept in a list and filtered by age, not a FIFO); the effect tests replay a
workload's effects, and its AOF-rewrite commands, into fresh servers and compare
the maps, counters and limits exactly.
"""

from __future__ import annotations

import random
import time

import pytest
import redis

import server.commands  # noqa: F401  (registers the handlers)
from server.client import Client, LoadingClient
from server.commands.idmp import expire_cycle
from server.rewrite import key_commands
from server.server import Server
from storage.idmp import auto_iid
from storage.stream import Stream
from storage.stream_id import MAX_ID
from tests.rawclient import RawConn

IDMP_FIELDS = [b"idmp-duration", b"idmp-maxsize", b"pids-tracked", b"iids-tracked", b"iids-added", b"iids-duplicates"]


def err(client, *args) -> str:
    with pytest.raises(redis.ResponseError) as info:
        client.execute_command(*args)
    return str(info.value)


def info(client, key: str = "s") -> dict:
    reply = client.execute_command("XINFO", "STREAM", key)
    if isinstance(reply, list):
        reply = dict(zip(reply[0::2], reply[1::2], strict=True))
    return {k.decode() if isinstance(k, bytes) else k: v for k, v in reply.items()}


# -- XADD IDMP / IDMPAUTO -----------------------------------------------------------


def test_xadd_idmp_errors(r2):
    assert err(r2, "XADD", "s", "IDMP", "p1", "*", "f", "v") == "Invalid stream ID specified as stream command argument"
    assert err(r2, "XADD", "s", "IDMP", "p1", "i1", "1-1", "f", "v") == "IDMP/IDMPAUTO can be used only with auto-generated IDs"
    assert err(r2, "XADD", "s", "IDMPAUTO", "p1", "1-1", "f", "v") == "IDMP/IDMPAUTO can be used only with auto-generated IDs"
    assert err(r2, "XADD", "s", "IDMPAUTO", "p1", "5-*", "f", "v") == "IDMP/IDMPAUTO can be used only with auto-generated IDs"
    for args in (("IDMP", "p1", "i1", "IDMP", "p2", "i2"), ("IDMPAUTO", "p1", "IDMP", "p2", "i2"),
                 ("IDMP", "p1", "i1", "IDMPAUTO", "p2"), ("IDMPAUTO", "p1", "IDMPAUTO", "p2")):  # fmt: skip
        assert err(r2, "XADD", "s", *args, "*", "f", "v") == "IDMP/IDMPAUTO specified multiple times"
    assert err(r2, "XADD", "s", "IDMP", "", "i1", "*", "f", "v") == "IDMP requires a non-empty producer ID"
    assert err(r2, "XADD", "s", "IDMP", "p1", "", "*", "f", "v") == "IDMP requires a non-empty idempotent ID"
    assert err(r2, "XADD", "s", "IDMPAUTO", "", "*", "f", "v") == "IDMPAUTO requires a non-empty producer ID"
    assert err(r2, "XADD", "s", "IDMP", "p", "i", "*", "f") == "wrong number of arguments for 'xadd' command"
    assert r2.exists("s") == 0


def test_a_repeat_returns_the_original_id_and_adds_nothing(r):
    first = r.execute_command("XADD", "s", "IDMP", "p1", "payment-abc", "*", "amount", "100", "currency", "USD")
    again = r.execute_command("XADD", "s", "IDMP", "p1", "payment-abc", "*", "amount", "200", "currency", "EUR")
    assert again == first and r.xlen("s") == 1
    assert r.xrange("s")[0][1] == {b"amount": b"100", b"currency": b"USD"}
    other = r.execute_command("XADD", "s", "IDMP", "p2", "payment-abc", "*", "amount", "1")  # producers are isolated
    assert other != first and r.xlen("s") == 2
    fields = info(r)
    assert [fields[k.decode()] for k in IDMP_FIELDS] == [100, 100, 2, 2, 2, 1]


def test_odd_binary_and_long_iids_and_pids(r2):
    iids = ["1", "*", "-", "+", "$", "IDMP", "123-456", "hello世界", "line1\nline2", "x" * 65536, b"\x00\x01\xff"]
    ids = [r2.execute_command("XADD", "s", "IDMP", "a" * 1000, iid, "*", "f", "v") for iid in iids]
    assert len(set(ids)) == len(iids) and r2.xlen("s") == len(iids)
    assert [r2.execute_command("XADD", "s", "IDMP", "a" * 1000, iid, "*", "f", "w") for iid in iids] == ids
    assert r2.execute_command("XADD", "s", "IDMP", b"\x00", "1", "*", "f", "v") not in ids


def test_idmpauto_hashes_the_pairs_in_any_order(r2):
    one = r2.execute_command("XADD", "s", "IDMPAUTO", "p1", "*", "f1", "a", "f2", "b", "f3", "c")
    assert r2.execute_command("XADD", "s", "IDMPAUTO", "p1", "*", "f2", "b", "f3", "c", "f1", "a") == one
    assert r2.execute_command("XADD", "s", "IDMPAUTO", "p1", "*", "f3", "c", "f1", "x", "f2", "b") != one
    assert r2.execute_command("XADD", "s", "IDMPAUTO", "p1", "*", "g1", "a", "f2", "b", "f3", "c") != one  # names count
    empty = r2.execute_command("XADD", "s", "IDMPAUTO", "p1", "*", "f", "")
    assert r2.execute_command("XADD", "s", "IDMPAUTO", "p1", "*", "f", "") == empty
    split = r2.execute_command("XADD", "s", "IDMPAUTO", "p1", "*", "a", "bc")
    assert r2.execute_command("XADD", "s", "IDMPAUTO", "p1", "*", "ab", "c") != split  # no field||value ambiguity
    assert r2.execute_command("XADD", "s", "IDMPAUTO", "p2", "*", "f1", "a", "f2", "b", "f3", "c") != one
    # the parsed path (any letter case, other options) and the usual forms' fast path agree
    assert r2.execute_command("XADD", "s", "idmpauto", "p1", "MAXLEN", "~", "1000", "*", "f3", "c", "f2", "b", "f1", "a") == one
    assert r2.execute_command("XADD", "s", "Idmp", "p9", "x", "*", "f", "v") == r2.execute_command("XADD", "s", "IDMP", "p9", "x", "*", "g", "w")
    assert r2.xlen("s") == 8  # the p9 entry added once
    # A pair given twice is not the same entry as the pair once (a sum of pair hashes, not XOR).
    twice = r2.execute_command("XADD", "s", "IDMPAUTO", "p3", "*", "f", "v", "f", "v")
    assert r2.execute_command("XADD", "s", "IDMPAUTO", "p3", "*", "f", "v") != twice


def test_auto_iid_is_order_independent_and_16_bytes():
    rnd = random.Random(5)
    for _ in range(200):
        pairs = [(rnd.randbytes(rnd.randrange(4)), rnd.randbytes(rnd.randrange(4))) for _ in range(rnd.randrange(1, 6))]
        shuffled = pairs[:]
        rnd.shuffle(shuffled)
        flat = [x for pair in pairs for x in pair]
        assert auto_iid(flat) == auto_iid([x for pair in shuffled for x in pair])
        assert len(auto_iid(flat)) == 16
    assert auto_iid([b"f", b"v"]) != auto_iid([b"v", b"f"])


def test_with_other_options_nomkstream_trims_and_multi(r2):
    assert r2.execute_command("XADD", "s", "NOMKSTREAM", "IDMP", "p1", "r1", "*", "f", "v") is None
    assert r2.exists("s") == 0
    one = r2.execute_command("XADD", "s", "IDMP", "p1", "r1", "MAXLEN", "~", "100", "*", "f", "1")
    two = r2.execute_command("XADD", "s", "MAXLEN", "=", "1", "IDMPAUTO", "p1", "*", "f", "2")
    assert r2.xlen("s") == 1  # the trim ran: r1's entry is gone, its iid is not
    assert r2.execute_command("XADD", "s", "NOMKSTREAM", "IDMP", "p1", "r1", "MINID", "~", "0-1", "*", "f", "3") == one
    assert r2.execute_command("XADD", "s", "IDMPAUTO", "p1", "*", "f", "2") == two
    r2.xdel("s", two)
    assert r2.execute_command("XADD", "s", "IDMPAUTO", "p1", "*", "f", "2") == two  # deleted since: still the original
    assert r2.xlen("s") == 0
    pipe = r2.pipeline(transaction=True)
    pipe.execute_command("XADD", "t", "IDMP", "p1", "a", "*", "f", "v")
    pipe.execute_command("XADD", "t", "IDMP", "p1", "b", "*", "f", "v")
    pipe.execute_command("XADD", "t", "IDMP", "p1", "a", "*", "f", "v")
    a, b, a_again = pipe.execute()
    assert a == a_again != b and r2.xlen("t") == 2


def test_redis_py_idmp_and_xcfgset(r):
    first = r.xadd("s", {"f": "v"}, idmp=("p1", b"iid-1"))
    assert r.xadd("s", {"f": "w"}, idmp=("p1", b"iid-1")) == first
    auto = r.xadd("s", {"a": "1", "b": "2"}, idmpauto="p2")
    assert r.xadd("s", {"b": "2", "a": "1"}, idmpauto="p2") == auto
    assert r.xcfgset("s", idmp_duration=50, idmp_maxsize=7) in (True, b"OK", "OK")
    fields = info(r)
    assert (fields["idmp-duration"], fields["idmp-maxsize"], fields["iids-tracked"], fields["iids-added"]) == (50, 7, 0, 2)


# -- the map: MAXSIZE, XCFGSET, expiry ---------------------------------------------------


def test_maxsize_keeps_the_last_n_per_producer(r2):
    r2.execute_command("XADD", "s", "IDMP", "p1", "init", "*", "f", "init")
    assert r2.execute_command("XCFGSET", "s", "IDMP-MAXSIZE", "8", "IDMP-DURATION", "60") == b"OK"
    ids = [r2.execute_command("XADD", "s", "IDMP", "p1", f"req-{i}", "*", "f", i) for i in range(1, 101)]
    other = r2.execute_command("XADD", "s", "IDMP", "p2", "req-1", "*", "f", "p2")
    for i in range(93, 101):
        assert r2.execute_command("XADD", "s", "IDMP", "p1", f"req-{i}", "*", "f", "dup") == ids[i - 1]
    assert r2.execute_command("XADD", "s", "IDMP", "p2", "req-1", "*", "f", "dup") == other
    assert r2.execute_command("XADD", "s", "IDMP", "p1", "req-92", "*", "f", "new") != ids[91]
    fields = info(r2)
    assert (fields["pids-tracked"], fields["iids-tracked"], fields["iids-added"], fields["iids-duplicates"]) == (2, 9, 103, 9)
    assert r2.xlen("s") == 103


def test_xcfgset_errors_and_ranges(r2):
    assert err(r2, "XCFGSET", "s", "IDMP-DURATION", "5") == "no such key"
    r2.execute_command("XADD", "s", "IDMP", "p1", "r1", "*", "f", "v")
    assert err(r2, "XCFGSET", "s") == "At least one parameter must be specified"
    assert err(r2, "XCFGSET") == "wrong number of arguments for 'xcfgset' command"
    for args in (["IDMP-DURATION"], ["IDMP-MAXSIZE"], ["INVALID"], ["INVALID", "1"], ["IDMP-EXPIRE", "1"], ["IIDS-ADDED", "1"],
                 ["IDMP-DURATION", "5", "IDMP-MAXSIZE"]):  # fmt: skip
        assert err(r2, "XCFGSET", "s", *args) == "syntax error", args
    for value in ("A", "*", "-", "+", "120-5", "3.14", "000000000", "IDMP-DURATION", "99999999999999999999"):
        assert err(r2, "XCFGSET", "s", "IDMP-DURATION", value) == "value is not an integer or out of range"
        assert err(r2, "XCFGSET", "s", "IDMP-MAXSIZE", value) == "value is not an integer or out of range"
    assert err(r2, "XCFGSET", "s", "IDMP-DURATION", "INVALID", "IDMP-MAXSIZE") == "value is not an integer or out of range"
    for value in ("0", "-100", "86401"):
        assert err(r2, "XCFGSET", "s", "IDMP-DURATION", value) == "IDMP-DURATION must be between 1 and 86400 seconds"
    for value in ("0", "-50", "10001"):
        assert err(r2, "XCFGSET", "s", "IDMP-MAXSIZE", value) == "IDMP-MAXSIZE must be between 1 and 10000 entries"
    assert r2.execute_command("XCFGSET", "s", "idmp-duration", "86400", "idmp-maxsize", "1") == b"OK"
    assert (info(r2)["idmp-duration"], info(r2)["idmp-maxsize"]) == (86400, 1)
    r2.set("str", "x")
    assert err(r2, "XCFGSET", "str", "IDMP-DURATION", "5").startswith("WRONGTYPE")
    assert r2.execute_command("XCFGSET", "s", "IDMP-DURATION", "5", "IDMP-DURATION", "7") == b"OK"  # the last one wins
    assert info(r2)["idmp-duration"] == 7


def test_xcfgset_clears_the_map_only_when_a_value_changes(r2):
    one = r2.execute_command("XADD", "s", "IDMP", "p1", "r1", "*", "f", "v")
    r2.execute_command("XADD", "s", "IDMP", "p2", "r1", "*", "f", "v")
    r2.execute_command("XADD", "s", "IDMP", "p1", "r1", "*", "f", "dup")
    r2.execute_command("XCFGSET", "s", "IDMP-DURATION", "100", "IDMP-MAXSIZE", "100")  # the same values
    assert r2.execute_command("XADD", "s", "IDMP", "p1", "r1", "*", "f", "dup") == one
    assert [info(r2)[k.decode()] for k in IDMP_FIELDS] == [100, 100, 2, 2, 2, 2]
    r2.execute_command("XCFGSET", "s", "IDMP-MAXSIZE", "50")
    assert [info(r2)[k.decode()] for k in IDMP_FIELDS] == [100, 50, 0, 0, 2, 2]
    assert r2.execute_command("XADD", "s", "IDMP", "p1", "r1", "*", "f", "new") != one
    assert r2.xlen("s") == 3
    plain = r2.xadd("plain", {"f": "v"})  # a stream never used with IDMP takes XCFGSET too
    assert r2.execute_command("XCFGSET", "plain", "IDMP-DURATION", "3") == b"OK"
    assert info(r2, "plain")["idmp-duration"] == 3 and plain


def test_configs_get_set_and_streams_take_them_on_first_use(r2):
    assert r2.config_get("stream-idmp-*") == {"stream-idmp-duration": "100", "stream-idmp-maxsize": "100"}
    for name, bad in (("stream-idmp-duration", ["0", "-1", "86401"]), ("stream-idmp-maxsize", ["0", "-100", "10001"])):
        for value in bad:
            assert "must be between" in err(r2, "CONFIG", "SET", name, value)
    try:
        r2.xadd("plain", {"f": "v"})
        r2.config_set("stream-idmp-duration", "86400")
        r2.config_set("stream-idmp-maxsize", "2")
        assert (info(r2, "plain")["idmp-duration"], info(r2, "plain")["idmp-maxsize"]) == (86400, 2)
        ids = [r2.execute_command("XADD", "s", "IDMP", "p", i, "*", "f", "v") for i in "abc"]
        assert info(r2)["iids-tracked"] == 2 and r2.execute_command("XADD", "s", "IDMP", "p", "a", "*", "f", "v") != ids[0]
        r2.config_set("stream-idmp-maxsize", "10000")
        assert info(r2)["idmp-maxsize"] == 2  # a stream that tracks iids keeps the limits it took
        assert info(r2, "plain")["idmp-maxsize"] == 10000  # one that never did follows the config
    finally:
        r2.config_set("stream-idmp-duration", "100")
        r2.config_set("stream-idmp-maxsize", "100")


def test_iids_expire_after_the_duration(r2):
    r2.execute_command("XADD", "s", "IDMP", "p1", "req-0", "*", "f", "v")
    r2.execute_command("XCFGSET", "s", "IDMP-DURATION", "1")
    one = r2.execute_command("XADD", "s", "IDMP", "p1", "req-1", "*", "f", "v")
    r2.execute_command("XADD", "s", "IDMP", "p2", "req-1", "*", "f", "v")
    assert r2.execute_command("XADD", "s", "IDMP", "p1", "req-1", "*", "f", "dup") == one
    deadline = time.monotonic() + 5
    while info(r2)["iids-tracked"]:  # the cron forgets them, and the producers with them
        assert time.monotonic() < deadline
        time.sleep(0.05)
    fields = info(r2)
    assert (fields["pids-tracked"], fields["iids-added"], fields["iids-duplicates"]) == (0, 3, 1)
    assert r2.execute_command("XADD", "s", "IDMP", "p1", "req-1", "*", "f", "new") != one


# -- XIDMPRECORD ------------------------------------------------------------------------


def test_xidmprecord(r2):
    assert err(r2, "XIDMPRECORD", "s", "p", "i", "1-1") == "no such key"
    one, two = r2.xadd("s", {"f": "v"}), r2.xadd("s", {"f": "v"})
    assert err(r2, "XIDMPRECORD", "s", "", "i", one) == "IDMP requires a non-empty producer ID"
    assert err(r2, "XIDMPRECORD", "s", "p", "", one) == "IDMP requires a non-empty idempotent ID"
    assert err(r2, "XIDMPRECORD", "s", "p", "i", "bad") == "Invalid stream ID specified as stream command argument"
    assert err(r2, "XIDMPRECORD", "s", "p", "i", "1-2") == "The stream ID specified does not exist"
    assert err(r2, "XIDMPRECORD", "s", "p", "i") == "wrong number of arguments for 'xidmprecord' command"
    assert r2.execute_command("XIDMPRECORD", "s", "p", "i", one) == b"OK"
    assert r2.execute_command("XIDMPRECORD", "s", "p", "i", one) == b"OK"  # the same pair, the same ID
    assert err(r2, "XIDMPRECORD", "s", "p", "i", two) == "The pid/iid pair is already mapped to a different stream ID"
    assert r2.execute_command("XADD", "s", "IDMP", "p", "i", "*", "f", "dup") == one
    assert (info(r2)["iids-tracked"], info(r2)["iids-added"], info(r2)["iids-duplicates"]) == (1, 1, 1)
    r2.xadd("old", {"f": "v"}, id="1-1")  # an iid whose entry is older than IDMP-DURATION expires at once
    assert r2.execute_command("XIDMPRECORD", "old", "p", "i", "1-1") == b"OK"
    assert r2.execute_command("XADD", "old", "IDMP", "p", "i", "*", "f", "dup") != b"1-1"
    r2.set("str", "x")
    assert err(r2, "XIDMPRECORD", "str", "p", "i", "1-1").startswith("WRONGTYPE")


# -- reply shapes ------------------------------------------------------------------------------


def test_xinfo_stream_fields_in_place_resp2_and_resp3(server):
    conn = RawConn(server.port)
    try:
        conn.call("FLUSHALL")
        conn.call("XADD", "s", "IDMP", "p", "i", "*", "f", "v")
        short = conn.call("XINFO", "STREAM", "s")
        assert short[0::2] == [
            b"length", b"radix-tree-keys", b"radix-tree-nodes", b"last-generated-id", b"max-deleted-entry-id", b"entries-added",
            b"recorded-first-entry-id", *IDMP_FIELDS, b"groups", b"first-entry", b"last-entry",
        ]  # fmt: skip
        assert short[15:27:2] == [100, 100, 1, 1, 1, 0]
        full = conn.call("XINFO", "STREAM", "s", "FULL")
        assert len(full) == 30 and full[14:26:2] == IDMP_FIELDS and full[26] == b"entries"
        conn.call("HELLO", "3")
        conn.send(b"*3\r\n$5\r\nXINFO\r\n$6\r\nSTREAM\r\n$1\r\ns\r\n")
        wire = conn.read_raw(until=b"last-entry")
        assert wire.startswith(b"%16\r\n") and b"$13\r\nidmp-duration\r\n:100\r\n$12\r\nidmp-maxsize\r\n:100\r\n$12\r\npids-tracked\r\n:1\r\n" in wire
        assert conn.call("XCFGSET", "s", "IDMP-DURATION", "5") == b"OK"
        conn.send(b"*3\r\n$11\r\nXIDMPRECORD\r\n$1\r\ns\r\n$1\r\np\r\n")
        assert conn.read_raw(until=b"\r\n") == b"-ERR wrong number of arguments for 'xidmprecord' command\r\n"
    finally:
        conn.close()


def test_command_info_and_docs(server):
    conn = RawConn(server.port)
    try:
        infos = conn.call("COMMAND", "INFO", "xcfgset", "xidmprecord")
        assert infos[0][:3] == [b"xcfgset", -2, [b"write", b"fast"]]
        assert infos[1][:3] == [b"xidmprecord", 5, [b"write", b"denyoom", b"fast"]]
        docs = conn.call("COMMAND", "DOCS", "xcfgset")
        assert b"since" in docs[1] and b"8.6.0" in docs[1]
        arguments = docs[1][docs[1].index(b"arguments") + 1]
        assert [(a[1], a[3]) for a in arguments] == [(b"key", b"key"), (b"idmp-duration", b"integer"), (b"idmp-maxsize", b"integer")]
    finally:
        conn.close()


# -- a brute-force model of the maps ---------------------------------------------------------


class Model:
    """Every tracked iid in a list with its entry's ms; expiry filters the whole list (no FIFO, no oldest bound)."""

    def __init__(self, duration: int, maxsize: int) -> None:
        self.duration, self.maxsize = duration, maxsize
        self.iids: dict[bytes, list[tuple[bytes, bytes]]] = {}  # pid -> [(iid, reply id)] in insertion order
        self.added = self.duplicates = 0

    def expire(self, now: int) -> None:
        for pid in list(self.iids):
            self.iids[pid] = [(i, e) for i, e in self.iids[pid] if int(e.split(b"-")[0]) >= now - self.duration * 1000]
            if not self.iids[pid]:
                del self.iids[pid]

    def find(self, pid: bytes, iid: bytes) -> bytes | None:
        return next((e for i, e in self.iids.get(pid, []) if i == iid), None)

    def fields(self) -> list[int]:
        tracked = sum(map(len, self.iids.values()))
        return [self.duration, self.maxsize, len(self.iids), tracked, self.added, self.duplicates]


def random_workload(seed: int, steps: int, replica: Server | None = None):
    """Run a seeded workload on an in-process server with a fake clock, checking it against Model at each step.

    Returns the server and the effects it produced.
    """
    rnd = random.Random(seed)
    source = Server()
    effects: list[list[bytes]] = []
    source.effect_listeners.append(effects.extend)
    source.config.set("stream-idmp-duration", "3")
    source.config.set("stream-idmp-maxsize", "4")
    client = Client(source)
    now = 1_700_000_000_000
    models: dict[bytes, Model | None] = {}
    config = (3, 4)

    def run(*args):
        source.now = now
        return source.execute(client, [a if isinstance(a, bytes) else str(a).encode() for a in args])

    for _step in range(steps):
        now += rnd.choice([0, 0, 1, 5, 200, 900])
        key = rnd.choice([b"s1", b"s2"])
        model = models.get(key)
        roll = rnd.random()
        if roll < 0.6:
            pid = rnd.choice([b"p1", b"p2", b"p3"])
            if rnd.random() < 0.5:
                iid = rnd.choice([b"a", b"b", b"c", b"d", b"e", b"f"])
                reply = run("XADD", key, "IDMP", pid, iid, "*", "f", rnd.randrange(3))
            else:
                pairs = rnd.sample([(b"x", b"1"), (b"y", b"2"), (b"z", b"3")], rnd.randrange(1, 3))
                iid = auto_iid([x for pair in pairs for x in pair])
                rnd.shuffle(pairs)
                reply = run("XADD", key, "IDMPAUTO", pid, "*", *[x for pair in pairs for x in pair])
            if model is None:
                model = models[key] = Model(*config)
            model.expire(now)
            known = model.find(pid, iid)
            if known is not None:
                assert reply == known
                model.duplicates += 1
            else:
                assert type(reply) is bytes and reply[:1].isdigit(), reply
                model.iids.setdefault(pid, []).append((iid, reply))
                model.iids[pid] = model.iids[pid][-model.maxsize :]
                model.added += 1
        elif roll < 0.7:
            duration, maxsize = rnd.choice([1, 2, 3]), rnd.choice([2, 3, 4])
            options = rnd.choice([["IDMP-DURATION", duration], ["IDMP-MAXSIZE", maxsize], ["IDMP-DURATION", duration, "IDMP-MAXSIZE", maxsize]])
            reply = run("XCFGSET", key, *options)
            if key not in models:
                assert reply.startswith(b"ERR no such key")
                continue
            if model is None:
                model = models[key] = Model(*config)
            new = (options[1] if options[0] == "IDMP-DURATION" else model.duration, options[-1] if options[-2] == "IDMP-MAXSIZE" else model.maxsize)
            if new != (model.duration, model.maxsize):
                model.duration, model.maxsize = new
                model.iids = {}
        elif roll < 0.77:
            run("XADD", key, "*", "plain", "entry")
            models.setdefault(key, None)
        elif roll < 0.82:
            run("XTRIM", key, "MAXLEN", rnd.randrange(3))
        elif roll < 0.87:
            ids = run("XRANGE", key, "-", "+")
            if isinstance(ids, list) and ids:
                run("XDEL", key, rnd.choice(ids)[0])
        elif roll < 0.9:
            config = (rnd.choice([1, 2, 3]), rnd.choice([2, 3, 4]))
            source.config.set("stream-idmp-duration", str(config[0]))
            source.config.set("stream-idmp-maxsize", str(config[1]))
        elif roll < 0.92:
            run("DEL", key)
            models.pop(key, None)
        else:
            source.now = now
            expire_cycle(source)
            for m in models.values():
                if m is not None:
                    m.expire(now)
        stream = source.keyspace.dbs[0].data.get(key)
        if stream is not None and stream.idmp is not None:  # each producer's eviction order (a deque) holds its map's iids, in order
            assert all(list(iids.order) == list(iids) for iids in stream.idmp.producers.values()), _step
        if key in models:
            fields = run("XINFO", "STREAM", key)
            got = [fields[name] for name in IDMP_FIELDS]
            expected = models[key].fields() if models[key] is not None else [config[0], config[1], 0, 0, 0, 0]
            assert got == expected, (_step, key, got, expected)
    return source, effects


def idmp_state(server: Server) -> dict:
    """Every stream's entries, counters and IDMP dump (limits, maps in FIFO order, lifetime counters)."""
    out = {}
    for db in server.keyspace.dbs:
        for key, value in db.data.items():
            if isinstance(value, Stream):
                out[(db.id, key)] = (
                    value.range(0, MAX_ID), value.last_id, value.entries_added, value.max_deleted_entry_id,
                    None if value.idmp is None else value.idmp.dump(),
                )  # fmt: skip
    return out


def apply(server: Server, commands: list[list[bytes]]) -> None:
    loader = LoadingClient(server)
    for argv in commands:
        if argv[0] in (b"MULTI", b"EXEC"):
            continue
        reply = server.execute(loader, argv)
        assert type(reply).__name__ != "Error", (argv, reply)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_workload_matches_the_model(seed):
    random_workload(seed, 1500)


@pytest.mark.parametrize("seed", [4, 5])
def test_effects_and_rewrite_reproduce_the_maps_exactly(seed):
    source, effects = random_workload(seed, 1200)
    assert any(argv[0] == b"XIDMPRECORD" for argv in effects)
    assert any(argv[0] == b"XCFGSET" and argv[2] == b"IDMP-EXPIRE" for argv in effects)
    assert any(argv[0] == b"XCFGSET" and argv[2] == b"IDMP-DURATION" for argv in effects)
    # A fresh add to a stream already tracking iids travels as one `XADD key IDMP pid iid <id> ...`;
    # never with `*` or IDMPAUTO (the replica must not compute anything).
    assert any(argv[0] == b"XADD" and argv[2] == b"IDMP" for argv in effects)
    assert not any(argv[0] == b"XADD" and (argv[2] == b"IDMPAUTO" or argv[2] == b"IDMP" and argv[5] == b"*") for argv in effects)
    replica = Server()  # default configs: the limits come from the effects, not from its own configs
    apply(replica, effects)
    ours, theirs = idmp_state(source), idmp_state(replica)
    # iids-duplicates counts the repeats this server answered: a repeat propagates nothing (README).
    for state in (ours, theirs):
        for value in state.values():
            if value[4] is not None:
                value[4]["duplicates"] = 0
    assert theirs == ours
    rebuilt = Server()
    for db in source.keyspace.dbs:
        for key, value in db.data.items():
            apply(rebuilt, list(key_commands(key, value, None)))
    assert idmp_state(rebuilt) == idmp_state(source)  # the AOF rewrite keeps the duplicates counter as well


def test_a_repeat_propagates_only_its_counters():
    source = Server()
    effects: list[list[bytes]] = []
    source.effect_listeners.append(effects.extend)
    client = Client(source)
    source.clock()
    first = source.execute(client, [b"XADD", b"s", b"IDMP", b"p", b"i", b"*", b"f", b"v"])
    assert [argv[0] for argv in effects] == [b"SELECT", b"MULTI", b"XADD", b"XCFGSET", b"XIDMPRECORD", b"EXEC"]
    assert effects[2] == [b"XADD", b"s", first, b"f", b"v"] and effects[4] == [b"XIDMPRECORD", b"s", b"p", b"i", first]
    del effects[:]
    dirty = source.dirty
    assert source.execute(client, [b"XADD", b"s", b"IDMP", b"p", b"i", b"*", b"f", b"w"]) == first
    assert effects == [[b"XCFGSET", b"s", b"IIDS-ADDED", b"1", b"IIDS-DUPLICATES", b"1"]]  # absolute values
    assert source.dirty == dirty + 1  # Redis 8.6.2 marks the key dirty: iids-duplicates is persisted
    del effects[:]
    second = source.execute(client, [b"XADD", b"s", b"IDMPAUTO", b"p", b"*", b"f", b"v"])
    assert effects == [[b"XADD", b"s", b"IDMP", b"p", auto_iid([b"f", b"v"]), second, b"f", b"v"]]


def test_snapshot_records_without_idmp_keys_still_load():
    """The IDMP state is an optional third element of a stream's record: files written before it load unchanged."""
    from persistence.snapshot import STREAM, decode_value, encode_value
    from storage.consumer_group import dump_groups

    stream = Stream()
    stream.add(1000, [b"f", b"v"])
    kind, payload = encode_value(stream)
    assert kind == STREAM and len(payload) == 2  # no IDMP state: the record as before IDMP
    assert decode_value(STREAM, [stream.dump(), dump_groups({})]).idmp is None
    source = Server()
    client = Client(source)
    source.now = 5000
    source.execute(client, [b"XADD", b"s", b"IDMP", b"p", b"i", b"*", b"f", b"v"])
    tracked = source.keyspace.dbs[0].data[b"s"]
    kind, payload = encode_value(tracked)
    assert len(payload) == 3 and decode_value(kind, payload).idmp.dump() == tracked.idmp.dump()


def test_config_rewrite_keeps_the_idmp_configs(tmp_path):
    from tests.test_cli import start_with_file

    proc = start_with_file(tmp_path, "stream-idmp-maxsize 50\n")
    try:
        conn = RawConn(proc.port)
        assert conn.call("CONFIG", "GET", "stream-idmp-maxsize") == [b"stream-idmp-maxsize", b"50"]
        assert conn.call("CONFIG", "SET", "stream-idmp-duration", "600") == b"OK"
        assert conn.call("CONFIG", "REWRITE") == b"OK"
        conn.close()
    finally:
        proc.stop()
    lines = (tmp_path / "millrace.conf").read_text().splitlines()
    assert "stream-idmp-maxsize 50" in lines and "stream-idmp-duration 600" in lines


def test_junk_arguments_get_error_replies_never_exceptions():
    """Random argument lists for the IDMP commands: each gets a reply or a Redis error; the server state stays sound."""
    rnd = random.Random(9)
    words = [b"IDMP", b"IDMPAUTO", b"idmp", b"*", b"1-1", b"0-0", b"", b"p", b"i", b"MAXLEN", b"~", b"=", b"0", b"-1", b"99999999999999999999",
             b"IDMP-DURATION", b"IDMP-MAXSIZE", b"IDMP-EXPIRE", b"IIDS-ADDED", b"NOMKSTREAM", b"KEEPREF", b"LIMIT", b"f", b"v", b"\x00\xff"]  # fmt: skip
    source = Server()
    client, loader = Client(source), LoadingClient(source)
    source.now = 10_000
    source.execute(client, [b"XADD", b"s", b"*", b"f", b"v"])
    source.execute(client, [b"SET", b"str", b"x"])
    errors = 0
    for _ in range(8000):
        name = rnd.choice([b"XADD", b"XCFGSET", b"XIDMPRECORD"])
        options = [b"NOMKSTREAM", b"KEEPREF", b"MAXLEN", b"0", b"IDMP", b"IDMPAUTO", b"p"]
        argv = [name, rnd.choice([b"s", b"t", b"str"]), *[rnd.choice(options if rnd.random() < 0.6 else words) for _ in range(rnd.randrange(0, 9))]]
        source.now += rnd.randrange(3) * 1000
        reply = source.execute(rnd.choice([client, client, loader]), argv)  # an exception would fail the test here
        if type(reply).__name__ == "Error":
            errors += 1
            assert reply.split(b" ", 1)[0] in (b"ERR", b"WRONGTYPE"), (argv, reply)
    assert 0 < errors < 8000
    for key in (b"s", b"t"):
        stream = source.keyspace.dbs[0].data.get(key)
        if stream is not None and stream.idmp is not None:
            idmp = stream.idmp
            assert idmp.tracked == sum(map(len, idmp.producers.values()))
            assert all(len(iids) <= idmp.maxsize and iids for iids in idmp.producers.values())
            assert all(list(iids.order) == list(iids) for iids in idmp.producers.values())
