"""Consumer groups through redis-py, RESP2 and RESP3: replies, errors, lag, blocking.

Expected values are Redis 7.4's (t_stream.c and its test suite) and the newest
Redis's where it fixed a rule since; the places where that differs from the
Redis 8.2.3 oracle are here and listed as excluded in
tests/test_groups_differential.py and tests/test_streams_wide_diff.py.
"""

from __future__ import annotations

import threading
import time

import pytest
import redis

RAW = ("XREADGROUP", "XINFO GROUPS", "XINFO CONSUMERS", "XINFO STREAM", "XPENDING", "XCLAIM", "XAUTOCLAIM", "XGROUP HELP")


def raw(client: redis.Redis) -> redis.Redis:
    """Turn off redis-py's reply parsing for the stream commands: compare what the server sent."""
    for name in RAW:
        client.response_callbacks.pop(name, None)
        client.response_callbacks.pop(name.split()[0], None)
    return client


def as_map(reply) -> dict:
    """A RESP3 map, or the flat key/value array RESP2 sends for it."""
    if isinstance(reply, dict):
        return reply
    return dict(zip(reply[0::2], reply[1::2], strict=True))


def streams(reply) -> list:
    """XREADGROUP's per-stream reply as [[key, entries], ...] in both protocols."""
    if reply is None:
        return None
    if isinstance(reply, dict):
        return [[key, value] for key, value in reply.items()]
    return reply


def groups_info(r, key) -> dict:
    return {g[b"name"]: g for g in map(as_map, r.execute_command("XINFO", "GROUPS", key))}


@pytest.fixture
def x(r):
    return raw(r)


@pytest.fixture
def other(server, request):
    client = raw(server.client(protocol=2))
    yield client
    client.close()


def fill(x, key=b"s", n=5):
    for i in range(1, n + 1):
        x.execute_command("XADD", key, f"{i}-0", "f", i)


# -- XGROUP ------------------------------------------------------------------------


def test_create_and_errors(x):
    with pytest.raises(redis.ResponseError, match="^The XGROUP subcommand requires the key to exist"):
        x.execute_command("XGROUP", "CREATE", "s", "g", "$")
    assert x.execute_command("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM") == b"OK"
    assert x.type("s") == b"stream"
    with pytest.raises(redis.ResponseError, match="^BUSYGROUP Consumer Group name already exists"):
        x.execute_command("XGROUP", "CREATE", "s", "g", "$")
    with pytest.raises(redis.ResponseError, match="value for ENTRIESREAD must be positive or -1"):
        x.execute_command("XGROUP", "CREATE", "s", "g2", "$", "ENTRIESREAD", "-3")
    with pytest.raises(redis.ResponseError, match=r"unknown subcommand or wrong number of arguments for 'CREATE'. Try XGROUP HELP."):
        x.execute_command("XGROUP", "CREATE", "s", "g2", "$", "FOO")
    with pytest.raises(redis.ResponseError, match="Invalid stream ID"):
        x.execute_command("XGROUP", "CREATE", "s", "g2", "-")
    with pytest.raises(redis.ResponseError, match="^NOGROUP No such consumer group 'nog' for key name 's'"):
        x.execute_command("XGROUP", "SETID", "s", "nog", "0")
    with pytest.raises(redis.ResponseError, match=r"wrong number of arguments for 'xgroup\|destroy' command"):
        x.execute_command("XGROUP", "DESTROY", "s", "g", "extra")
    with pytest.raises(redis.ResponseError, match=r"wrong number of arguments for 'xgroup\|createconsumer' command"):
        x.execute_command("XGROUP", "CREATECONSUMER", "s", "g", "c", "SEENTIME", "1", "ACTIVETIME", "2")
    with pytest.raises(redis.ResponseError, match="unknown subcommand 'FOO'. Try XGROUP HELP."):
        x.execute_command("XGROUP", "FOO", "s", "g")
    x.set("str", "v")
    with pytest.raises(redis.ResponseError, match="^WRONGTYPE"):
        x.execute_command("XGROUP", "CREATE", "str", "g", "0")
    help_lines = x.execute_command("XGROUP", "HELP")
    assert help_lines[0] == b"XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    assert help_lines[-2:] == [b"HELP", b"    Print this help."]  # Redis 7.2+ (7.0: "Prints")


def test_consumers_destroy_delconsumer(x):
    fill(x)
    x.execute_command("XGROUP", "CREATE", "s", "g", "0")
    assert x.execute_command("XGROUP", "CREATECONSUMER", "s", "g", "alice") == 1
    assert x.execute_command("XGROUP", "CREATECONSUMER", "s", "g", "alice") == 0
    x.execute_command("XREADGROUP", "GROUP", "g", "bob", "COUNT", "3", "STREAMS", "s", ">")
    assert x.execute_command("XGROUP", "DELCONSUMER", "s", "g", "bob") == 3
    assert x.execute_command("XGROUP", "DELCONSUMER", "s", "g", "bob") == 0
    assert x.execute_command("XPENDING", "s", "g")[0] == 0
    assert x.execute_command("XGROUP", "DESTROY", "s", "g") == 1
    assert x.execute_command("XGROUP", "DESTROY", "s", "g") == 0
    assert x.execute_command("XINFO", "GROUPS", "s") == []


# -- XREADGROUP ----------------------------------------------------------------------


def test_readgroup_new_history_and_deleted(x):
    fill(x, n=3)
    x.execute_command("XGROUP", "CREATE", "s", "g", "0")
    got = streams(x.execute_command("XREADGROUP", "GROUP", "g", "c", "COUNT", "2", "STREAMS", "s", ">"))
    assert got == [[b"s", [[b"1-0", [b"f", b"1"]], [b"2-0", [b"f", b"2"]]]]]
    # History: only this consumer's own pending entries, after the given ID.
    assert streams(x.execute_command("XREADGROUP", "GROUP", "g", "other", "STREAMS", "s", "0")) == [[b"s", []]]
    got = streams(x.execute_command("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "1"))
    assert got == [[b"s", [[b"2-0", [b"f", b"2"]]]]]
    x.execute_command("XDEL", "s", "1-0")
    got = streams(x.execute_command("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "0"))
    assert got == [[b"s", [[b"1-0", None], [b"2-0", [b"f", b"2"]]]]]
    # 2-0 was delivered three times now; the deleted 1-0 was not re-delivered.
    pending = {p[0]: p[3] for p in x.execute_command("XPENDING", "s", "g", "-", "+", "10")}
    assert pending == {b"1-0": 1, b"2-0": 3}
    # Nothing new: nil, not an empty list.
    x.execute_command("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")
    assert x.execute_command("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">") is None


def test_readgroup_noack_and_multiple_streams(x):
    fill(x, b"a", 2)
    fill(x, b"b", 1)
    x.execute_command("XGROUP", "CREATE", "a", "g", "0")
    x.execute_command("XGROUP", "CREATE", "b", "g", "$")
    got = streams(x.execute_command("XREADGROUP", "GROUP", "g", "c", "NOACK", "STREAMS", "a", "b", ">", ">"))
    assert got == [[b"a", [[b"1-0", [b"f", b"1"]], [b"2-0", [b"f", b"2"]]]]]
    assert x.execute_command("XPENDING", "a", "g")[0] == 0
    assert groups_info(x, "a")[b"g"][b"last-delivered-id"] == b"2-0"
    consumers = [as_map(c) for c in x.execute_command("XINFO", "CONSUMERS", "b", "g")]
    assert [c[b"name"] for c in consumers] == [b"c"]  # created on the stream it read nothing from
    assert consumers[0][b"inactive"] == -1


def test_readgroup_errors(x):
    fill(x, n=1)
    x.execute_command("XGROUP", "CREATE", "s", "g", "0")
    cases = [
        (["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "$"], r"The \$ ID is meaningless in the context of XREADGROUP"),
        (["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "+"], r"The \+ ID is meaningless in the context of XREADGROUP"),
        (["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "-"], "Invalid stream ID"),
        (["XREADGROUP", "GROUP", "nog", "c", "STREAMS", "s", ">"], "^NOGROUP No such key 's' or consumer group 'nog' in XREADGROUP with GROUP option"),
        (["XREADGROUP", "GROUP", "g", "c", "STREAMS", "missing", ">"], "^NOGROUP No such key 'missing'"),
        (["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">", "s"], "^Unbalanced 'xreadgroup' list of streams: for each stream key an ID or '>' must be specified."),
        (["XREADGROUP", "COUNT", "1", "NOACK", "NOACK", "STREAMS", "s", ">"], "^Missing GROUP option for XREADGROUP"),
        (["XREADGROUP", "GROUP", "g", "c", "BLOCK", "x", "STREAMS", "s", ">"], "^timeout is not an integer or out of range"),
        (["XREADGROUP", "GROUP", "g", "c", "BLOCK", "-1", "STREAMS", "s", ">"], "^timeout is negative"),
        (["XREADGROUP", "GROUP", "g", "c", "COUNT", "x", "STREAMS", "s", ">"], "^value is not an integer or out of range"),
        (["XREADGROUP", "GROUPS", "g", "c", "STREAMS", "s", ">"], "^syntax error"),
        (["XREADGROUP", "GROUP", "g", "c", "STREAMS"], "wrong number of arguments for 'xreadgroup' command"),
    ]
    for argv, message in cases:
        with pytest.raises(redis.ResponseError, match=message):
            x.execute_command(*argv)
    x.set("str", "v")
    with pytest.raises(redis.ResponseError, match="^WRONGTYPE"):
        x.execute_command("XREADGROUP", "GROUP", "g", "c", "STREAMS", "str", ">")


def test_setid_back_reassigns_pending(x):
    fill(x, n=2)
    x.execute_command("XGROUP", "CREATE", "s", "g", "0")
    x.execute_command("XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", ">")
    x.execute_command("XGROUP", "SETID", "s", "g", "-")
    x.execute_command("XREADGROUP", "GROUP", "g", "c2", "COUNT", "1", "STREAMS", "s", ">")
    owners = {p[0]: (p[1], p[3]) for p in x.execute_command("XPENDING", "s", "g", "-", "+", "10")}
    assert owners == {b"1-0": (b"c2", 1), b"2-0": (b"c1", 1)}


# -- XACK / XPENDING -------------------------------------------------------------------


def test_ack_and_pending(x):
    fill(x, n=4)
    x.execute_command("XGROUP", "CREATE", "s", "g", "0")
    x.execute_command("XREADGROUP", "GROUP", "g", "b", "COUNT", "2", "STREAMS", "s", ">")
    x.execute_command("XREADGROUP", "GROUP", "g", "a", "STREAMS", "s", ">")
    assert x.execute_command("XPENDING", "s", "g") == [4, b"1-0", b"4-0", [[b"a", b"2"], [b"b", b"2"]]]
    with pytest.raises(redis.ResponseError, match="Invalid stream ID"):
        x.execute_command("XACK", "s", "g", "1-0", "bad")
    assert x.execute_command("XACK", "s", "g", "1-0", "1-0", "9-0") == 1
    assert x.execute_command("XACK", "s", "nog", "bad") == 0
    assert [p[0] for p in x.execute_command("XPENDING", "s", "g", "(2-0", "+", "10")] == [b"3-0", b"4-0"]
    assert [p[0] for p in x.execute_command("XPENDING", "s", "g", "-", "+", "10", "b")] == [b"2-0"]
    assert x.execute_command("XPENDING", "s", "g", "-", "+", "10", "nobody") == []
    assert x.execute_command("XPENDING", "s", "g", "IDLE", "99999999", "-", "+", "10") == []
    assert len(x.execute_command("XPENDING", "s", "g", "IDLE", "0", "-", "+", "2")) == 2
    with pytest.raises(redis.ResponseError, match="^syntax error"):
        x.execute_command("XPENDING", "s", "g", "-", "+")
    with pytest.raises(redis.ResponseError, match="^invalid start ID for the interval"):
        x.execute_command("XPENDING", "s", "g", "(18446744073709551615-18446744073709551615", "+", "10")
    with pytest.raises(redis.ResponseError, match="^NOGROUP No such key 's' or consumer group 'nog'$"):
        x.execute_command("XPENDING", "s", "nog")
    x.execute_command("XACK", "s", "g", "2-0", "3-0", "4-0")
    assert x.execute_command("XPENDING", "s", "g") == [0, None, None, None]


# -- XCLAIM / XAUTOCLAIM ---------------------------------------------------------------


def test_claim(x):
    fill(x, n=3)
    x.execute_command("XGROUP", "CREATE", "s", "g", "0")
    x.execute_command("XREADGROUP", "GROUP", "g", "a", "STREAMS", "s", ">")
    assert x.execute_command("XCLAIM", "s", "g", "b", "3600000", "1-0") == []  # not idle long enough
    assert x.execute_command("XCLAIM", "s", "g", "b", "0", "1-0") == [[b"1-0", [b"f", b"1"]]]
    assert x.execute_command("XCLAIM", "s", "g", "b", "0", "2-0", "JUSTID", "RETRYCOUNT", "7", "IDLE", "5000") == [b"2-0"]
    p = {e[0]: e for e in x.execute_command("XPENDING", "s", "g", "-", "+", "10")}
    assert p[b"1-0"][1:] == [b"b", p[b"1-0"][2], 2]
    assert p[b"2-0"][1] == b"b" and p[b"2-0"][2] >= 5000 and p[b"2-0"][3] == 7
    # FORCE creates a PEL entry for an entry never delivered; deleted entries are dropped from the PEL.
    x.execute_command("XADD", "s", "4-0", "f", "4")
    assert x.execute_command("XCLAIM", "s", "g", "c", "0", "4-0") == []
    assert x.execute_command("XCLAIM", "s", "g", "c", "0", "4-0", "FORCE", "JUSTID") == [b"4-0"]
    x.execute_command("XDEL", "s", "3-0")
    assert x.execute_command("XCLAIM", "s", "g", "c", "0", "3-0") == []
    assert [e[0] for e in x.execute_command("XPENDING", "s", "g", "-", "+", "10")] == [b"1-0", b"2-0", b"4-0"]
    x.execute_command("XCLAIM", "s", "g", "c", "0", "1-0", "LASTID", "9-0")
    assert groups_info(x, "s")[b"g"][b"last-delivered-id"] == b"9-0"
    errors = [
        (["XCLAIM", "s", "g", "c", "x", "1-0"], "^Invalid min-idle-time argument for XCLAIM"),
        (["XCLAIM", "s", "g", "c", "0", "1-0", "IDLE", "x"], "^Invalid IDLE option argument for XCLAIM"),
        (["XCLAIM", "s", "g", "c", "0", "1-0", "TIME", "x"], "^Invalid TIME option argument for XCLAIM"),
        (["XCLAIM", "s", "g", "c", "0", "1-0", "RETRYCOUNT", "x"], "^Invalid RETRYCOUNT option argument for XCLAIM"),
        (["XCLAIM", "s", "g", "c", "0", "1-0", "BOGUS"], "^Unrecognized XCLAIM option 'BOGUS'"),
        (["XCLAIM", "s", "nog", "c", "x", "1-0"], "^NOGROUP No such key 's' or consumer group 'nog'"),
    ]
    for argv, message in errors:
        with pytest.raises(redis.ResponseError, match=message):
            x.execute_command(*argv)


def test_autoclaim(x):
    fill(x, n=5)
    x.execute_command("XGROUP", "CREATE", "s", "g", "0")
    x.execute_command("XREADGROUP", "GROUP", "g", "a", "STREAMS", "s", ">")
    x.execute_command("XDEL", "s", "2-0", "3-0")
    reply = x.execute_command("XAUTOCLAIM", "s", "g", "b", "0", "0", "COUNT", "2")
    assert reply == [b"3-0", [[b"1-0", [b"f", b"1"]]], [b"2-0"]]  # a deleted entry counts against COUNT
    reply = x.execute_command("XAUTOCLAIM", "s", "g", "b", "0", "(1-0", "JUSTID")
    assert reply == [b"0-0", [b"4-0", b"5-0"], [b"3-0"]]
    assert x.execute_command("XPENDING", "s", "g") == [3, b"1-0", b"5-0", [[b"b", b"3"]]]
    counts = {e[0]: e[3] for e in x.execute_command("XPENDING", "s", "g", "-", "+", "10")}
    assert counts == {b"1-0": 2, b"4-0": 1, b"5-0": 1}  # JUSTID does not count a delivery
    for argv, message in [
        (["XAUTOCLAIM", "s", "g", "b", "x", "0"], "^Invalid min-idle-time argument for XAUTOCLAIM"),
        (["XAUTOCLAIM", "s", "g", "b", "0", "0", "COUNT", "0"], "^COUNT must be > 0"),
        (["XAUTOCLAIM", "s", "g", "b", "0", "0", "FOO"], "^syntax error"),
        (["XAUTOCLAIM", "s", "nog", "b", "0", "0"], "^NOGROUP No such key 's' or consumer group 'nog'"),
    ]:
        with pytest.raises(redis.ResponseError, match=message):
            x.execute_command(*argv)


# -- XINFO -----------------------------------------------------------------------------


def test_xinfo_groups_consumers_and_full(x):
    fill(x, n=3)
    x.execute_command("XGROUP", "CREATE", "s", "zeta", "0")
    x.execute_command("XGROUP", "CREATE", "s", "alpha", "$")
    x.execute_command("XREADGROUP", "GROUP", "zeta", "c2", "COUNT", "1", "STREAMS", "s", ">")
    x.execute_command("XGROUP", "CREATECONSUMER", "s", "zeta", "c1")
    info = [as_map(g) for g in x.execute_command("XINFO", "GROUPS", "s")]
    assert [g[b"name"] for g in info] == [b"alpha", b"zeta"]  # by name, as Redis's rax orders them
    assert info[1] == {b"name": b"zeta", b"consumers": 2, b"pending": 1, b"last-delivered-id": b"1-0", b"entries-read": 1, b"lag": 2}
    assert info[0][b"entries-read"] is None and info[0][b"lag"] == 0
    consumers = [as_map(c) for c in x.execute_command("XINFO", "CONSUMERS", "s", "zeta")]
    assert [(c[b"name"], c[b"pending"], c[b"inactive"] >= 0) for c in consumers] == [(b"c1", 0, False), (b"c2", 1, True)]
    assert set(consumers[0]) == {b"name", b"pending", b"idle", b"inactive"}
    with pytest.raises(redis.ResponseError, match="^NOGROUP No such consumer group 'nog' for key name 's'"):
        x.execute_command("XINFO", "CONSUMERS", "s", "nog")
    with pytest.raises(redis.ResponseError, match="^no such key"):
        x.execute_command("XINFO", "GROUPS", "missing")
    full = as_map(x.execute_command("XINFO", "STREAM", "s", "FULL"))
    groups = [as_map(g) for g in full[b"groups"]]
    assert [g[b"name"] for g in groups] == [b"alpha", b"zeta"]
    zeta = groups[1]
    assert (zeta[b"entries-read"], zeta[b"lag"], zeta[b"pel-count"]) == (1, 2, 1)
    assert zeta[b"pending"][0][:2] == [b"1-0", b"c2"] and zeta[b"pending"][0][3] == 1
    c2 = as_map(zeta[b"consumers"][1])
    assert c2[b"name"] == b"c2" and c2[b"pel-count"] == 1 and c2[b"active-time"] >= c2[b"seen-time"] - 1000
    assert c2[b"pending"][0][0] == b"1-0" and c2[b"pending"][0][2] == 1


# -- lag: Redis 7.4's rules ---------------------------------------------------------------


def test_lag_examples(x):
    fill(x, n=5)
    x.execute_command("XGROUP", "CREATE", "s", "g", "0")
    assert groups_info(x, "s")[b"g"][b"lag"] == 5
    x.execute_command("XREADGROUP", "GROUP", "g", "c", "COUNT", "2", "STREAMS", "s", ">")
    assert (groups_info(x, "s")[b"g"][b"entries-read"], groups_info(x, "s")[b"g"][b"lag"]) == (2, 3)
    x.execute_command("XDEL", "s", "4-0")  # a tombstone ahead of the group: unknown
    assert groups_info(x, "s")[b"g"][b"lag"] is None
    x.execute_command("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")  # read past it: known again
    assert (groups_info(x, "s")[b"g"][b"entries-read"], groups_info(x, "s")[b"g"][b"lag"]) == (5, 0)
    x.execute_command("XADD", "s", "6-0", "f", "6")
    assert groups_info(x, "s")[b"g"][b"lag"] == 1
    # SETID to an arbitrary ID: unknown; with ENTRIESREAD: as given (clamped to entries-added).
    x.execute_command("XGROUP", "SETID", "s", "g", "3-0")
    assert (groups_info(x, "s")[b"g"][b"entries-read"], groups_info(x, "s")[b"g"][b"lag"]) == (None, None)
    x.execute_command("XGROUP", "SETID", "s", "g", "5-0", "ENTRIESREAD", "100")
    assert (groups_info(x, "s")[b"g"][b"entries-read"], groups_info(x, "s")[b"g"][b"lag"]) == (6, 0)
    # A group behind a trimmed head: the remaining entries.
    x.execute_command("XGROUP", "CREATE", "s", "h", "0")
    x.execute_command("XREADGROUP", "GROUP", "h", "c", "COUNT", "1", "STREAMS", "s", ">")
    x.execute_command("XTRIM", "s", "MAXLEN", "1")
    assert groups_info(x, "s")[b"h"][b"lag"] == 1
    x.execute_command("XREADGROUP", "GROUP", "h", "c", "STREAMS", "s", ">")
    assert (groups_info(x, "s")[b"h"][b"entries-read"], groups_info(x, "s")[b"h"][b"lag"]) == (6, 0)
    # Everything gone: no lag.
    x.execute_command("XTRIM", "s", "MAXLEN", "0")
    assert groups_info(x, "s")[b"g"][b"lag"] == 0


def test_lag_survives_del_and_recreate(x):
    fill(x, n=3)
    x.execute_command("XGROUP", "CREATE", "s", "g", "0")
    x.execute_command("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")
    x.delete("s")
    x.execute_command("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    assert groups_info(x, "s")[b"g"] == {b"name": b"g", b"consumers": 0, b"pending": 0, b"last-delivered-id": b"0-0", b"entries-read": None, b"lag": 0}
    x.execute_command("XADD", "s", "1-0", "f", "1")
    assert groups_info(x, "s")[b"g"][b"lag"] == 1


# -- blocking --------------------------------------------------------------------------------


class Blocked:
    """A command sent on its own connection, answered later."""

    def __init__(self, server, *argv) -> None:
        self.client = raw(server.client(protocol=2, socket_timeout=10))
        self.reply = self.error = None
        self.thread = threading.Thread(target=self._run, args=(argv,), daemon=True)
        self.thread.start()

    def _run(self, argv) -> None:
        try:
            self.reply = self.client.execute_command(*argv)
        except redis.ResponseError as exc:
            self.error = str(exc)

    def wait(self):
        self.thread.join(10)
        assert not self.thread.is_alive()
        self.client.close()
        return self


def wait_blocked(x, n: int) -> None:
    """Until INFO reports n blocked clients."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        blocked = x.info("clients").get("blocked_clients")
        if blocked == n:
            return
        time.sleep(0.01)
    raise AssertionError(f"expected {n} blocked clients")


def test_blocking_consumers_and_groups(server, x):
    x.execute_command("XGROUP", "CREATE", "s", "g1", "$", "MKSTREAM")
    x.execute_command("XGROUP", "CREATE", "s", "g2", "$")
    a = Blocked(server, "XREADGROUP", "GROUP", "g1", "a", "BLOCK", "0", "STREAMS", "s", ">")
    wait_blocked(x, 1)
    b = Blocked(server, "XREADGROUP", "GROUP", "g1", "b", "BLOCK", "0", "STREAMS", "s", ">")
    wait_blocked(x, 2)
    c = Blocked(server, "XREADGROUP", "GROUP", "g2", "c", "NOACK", "BLOCK", "0", "STREAMS", "s", ">")
    wait_blocked(x, 3)
    # The blocked consumers exist already, as in Redis.
    assert [as_map(m)[b"name"] for m in x.execute_command("XINFO", "CONSUMERS", "s", "g1")] == [b"a", b"b"]
    x.execute_command("XADD", "s", "1-0", "f", "1")
    assert a.wait().reply == [[b"s", [[b"1-0", [b"f", b"1"]]]]]  # first come, first served in g1
    assert c.wait().reply == [[b"s", [[b"1-0", [b"f", b"1"]]]]]  # and g2 gets its own copy
    wait_blocked(x, 1)
    x.execute_command("XADD", "s", "2-0", "f", "2")
    assert b.wait().reply == [[b"s", [[b"2-0", [b"f", b"2"]]]]]
    assert x.execute_command("XPENDING", "s", "g1") == [2, b"1-0", b"2-0", [[b"a", b"1"], [b"b", b"1"]]]
    assert x.execute_command("XPENDING", "s", "g2")[0] == 0
    assert groups_info(x, "s")[b"g2"][b"last-delivered-id"] == b"1-0"


def test_blocking_timeout_and_history(server, x):
    x.execute_command("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    start = time.monotonic()
    assert x.execute_command("XREADGROUP", "GROUP", "g", "c", "BLOCK", "50", "STREAMS", "s", ">") is None
    assert time.monotonic() - start >= 0.04
    # A history read never blocks.
    assert streams(x.execute_command("XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", "0")) == [[b"s", []]]


@pytest.mark.parametrize("how", ["destroy", "del", "set", "flushall"])
def test_blocked_reader_released_with_error(server, x, how):
    x.execute_command("XADD", "s", "1-0", "f", "1")
    x.execute_command("XGROUP", "CREATE", "s", "g", "$")
    blocked = Blocked(server, "XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">")
    wait_blocked(x, 1)
    if how == "destroy":
        x.execute_command("XGROUP", "DESTROY", "s", "g")
    elif how == "del":
        x.delete("s")
    elif how == "set":
        x.set("s", "v")
    else:
        x.flushall()
    error = blocked.wait().error
    if how == "set":
        assert error == "WRONGTYPE Operation against a key holding the wrong kind of value"
    else:
        assert error == "NOGROUP No such key 's' or consumer group 'g' in XREADGROUP with GROUP option"


def test_other_groups_reads_do_not_release_waiters(server, x):
    fill(x, n=2)
    x.execute_command("XGROUP", "CREATE", "s", "g", "$")
    x.execute_command("XGROUP", "CREATE", "s", "h", "0")
    blocked = Blocked(server, "XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">")
    wait_blocked(x, 1)
    x.execute_command("XREADGROUP", "GROUP", "h", "c", "STREAMS", "s", ">")
    x.execute_command("XACK", "s", "h", "1-0")
    wait_blocked(x, 1)
    x.execute_command("XADD", "s", "3-0", "f", "3")
    assert blocked.wait().reply == [[b"s", [[b"3-0", [b"f", b"3"]]]]]


def test_xsetid_lowering_entries_added_clamps_entries_read(x):
    """Newest Redis (after redis#15488): a group never reports more entries read than were added."""
    fill(x, n=5)
    x.execute_command("XGROUP", "CREATE", "s", "g", "0")
    x.execute_command("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")
    x.execute_command("XTRIM", "s", "MAXLEN", "2")
    x.execute_command("XSETID", "s", "5-0", "ENTRIESADDED", "3")
    assert (groups_info(x, "s")[b"g"][b"entries-read"], groups_info(x, "s")[b"g"][b"lag"]) == (3, 0)


def test_xsetid_clamps_entries_read_only_when_it_lowers_entries_added(x):
    """redis#15489: the clamp runs only when entries-added goes down. Reads can push a counter
    past a lowered entries-added; an XSETID that repeats or raises it leaves that counter alone."""
    fill(x, n=5)
    x.execute_command("XGROUP", "CREATE", "s", "g", "0")
    x.execute_command("XREADGROUP", "GROUP", "g", "c", "COUNT", "2", "STREAMS", "s", ">")
    x.execute_command("XDEL", "s", "1-0")  # behind the group: no tombstone after its position
    x.execute_command("XSETID", "s", "5-0", "ENTRIESADDED", "4")  # lowered 5 -> 4: 2 read, nothing to clamp
    x.execute_command("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")  # counts on: 2 + 3
    assert groups_info(x, "s")[b"g"][b"entries-read"] == 5
    x.execute_command("XSETID", "s", "5-0", "ENTRIESADDED", "4")  # not lowered
    assert groups_info(x, "s")[b"g"][b"entries-read"] == 5
    x.execute_command("XSETID", "s", "6-0")
    assert groups_info(x, "s")[b"g"][b"entries-read"] == 5


def test_group_bookkeeping_does_not_touch_watched_keys(server, x, other):
    """As in Redis: reads, acks and claims by a group change no key WATCH can see; XADD does."""
    fill(x, n=3)
    x.execute_command("XGROUP", "CREATE", "s", "g", "0")
    x.execute_command("WATCH", "s")
    other.execute_command("XREADGROUP", "GROUP", "g", "c", "COUNT", "2", "STREAMS", "s", ">")
    other.execute_command("XACK", "s", "g", "1-0")
    other.execute_command("XCLAIM", "s", "g", "d", "0", "2-0")
    other.execute_command("XGROUP", "SETID", "s", "g", "0")
    other.execute_command("XGROUP", "CREATECONSUMER", "s", "g", "e")
    x.execute_command("MULTI")
    x.execute_command("XLEN", "s")
    assert x.execute_command("EXEC") == [3]
    x.execute_command("WATCH", "s")
    other.execute_command("XADD", "s", "9-0", "f", "9")
    x.execute_command("MULTI")
    x.execute_command("XLEN", "s")
    assert x.execute_command("EXEC") is None


GROUP_CHANGES = [
    ["XGROUP", "CREATE", "s", "g2", "0"],
    ["XGROUP", "DESTROY", "s", "g"],
    ["XSETID", "s", "9-0"],
    ["XGROUP", "CREATE", "fresh", "g", "$", "MKSTREAM"],
]


@pytest.mark.parametrize("change", GROUP_CHANGES, ids=lambda c: " ".join(c[:2]) + (" MKSTREAM" if "MKSTREAM" in c else ""))
def test_watch_after_group_changes_as_redis(server, oracle, change):
    """t_stream.c signals WATCH (signalModifiedKey) only when XGROUP CREATE MKSTREAM makes the key;
    XGROUP CREATE on an existing stream, DESTROY and XSETID leave it untouched."""
    outcomes = []
    for target in (server.client(), oracle):  # the oracle fixture has flushed its server
        port = target.connection_pool.connection_kwargs["port"]
        watcher = raw(redis.Redis(port=port, single_connection_client=True))
        writer = raw(redis.Redis(port=port, single_connection_client=True))
        writer.execute_command("DEL", "s", "fresh")
        fill(writer, n=2)
        writer.execute_command("XGROUP", "CREATE", "s", "g", "0")
        watcher.execute_command("WATCH", "fresh" if "MKSTREAM" in change else "s")
        writer.execute_command(*change)
        watcher.execute_command("MULTI")
        watcher.execute_command("PING")
        outcomes.append(watcher.execute_command("EXEC"))
        watcher.close()
        writer.close()
    assert outcomes[0] == outcomes[1]
    assert outcomes[0] == (None if "MKSTREAM" in change else [b"PONG"])


def test_copy_and_rename_keep_groups(x):
    fill(x, n=3)
    x.execute_command("XGROUP", "CREATE", "s", "g", "0")
    x.execute_command("XREADGROUP", "GROUP", "g", "c", "COUNT", "2", "STREAMS", "s", ">")
    assert x.execute_command("COPY", "s", "t") == 1
    x.execute_command("XACK", "s", "g", "1-0")
    x.execute_command("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")
    assert x.execute_command("XPENDING", "t", "g") == [2, b"1-0", b"2-0", [[b"c", b"2"]]]
    assert groups_info(x, "t")[b"g"][b"last-delivered-id"] == b"2-0"
    x.execute_command("RENAME", "t", "u")
    assert x.execute_command("XPENDING", "u", "g") == [2, b"1-0", b"2-0", [[b"c", b"2"]]]
    assert streams(x.execute_command("XREADGROUP", "GROUP", "g", "c", "STREAMS", "u", ">")) == [[b"u", [[b"3-0", [b"f", b"3"]]]]]


def test_blocking_on_a_stream_that_ran_dry(server, x):
    """Redis issue #5299: a deleted last entry is nothing to serve: block, then serve the next XADD."""
    x.execute_command("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    x.execute_command("XADD", "s", "666", "k", "v")
    x.execute_command("XDEL", "s", "666")
    assert x.execute_command("XREADGROUP", "GROUP", "g", "c", "BLOCK", "10", "STREAMS", "s", ">") is None
    blocked = Blocked(server, "XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">")
    wait_blocked(x, 1)
    x.execute_command("XADD", "s", "667", "k", "v")
    assert blocked.wait().reply == [[b"s", [[b"667-0", [b"k", b"v"]]]]]


@pytest.mark.parametrize("source_has_group", [True, False])
def test_rename_releases_blocked_reader(server, x, source_has_group):
    x.execute_command("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    blocked = Blocked(server, "XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">")
    wait_blocked(x, 1)
    if source_has_group:
        x.execute_command("XGROUP", "CREATE", "t", "g", "$", "MKSTREAM")
    x.execute_command("XADD", "t", "100", "f", "v")
    x.execute_command("RENAME", "t", "s")
    blocked.wait()
    if source_has_group:
        assert blocked.reply == [[b"s", [[b"100-0", [b"f", b"v"]]]]]
    else:
        assert blocked.error == "NOGROUP No such key 's' or consumer group 'g' in XREADGROUP with GROUP option"


def test_failed_blocked_reader_counts_in_commandstats(server, x):
    """Redis's test: a blocked XREADGROUP released with NOGROUP is one call, one failed call, one NOGROUP."""
    x.execute_command("CONFIG", "RESETSTAT")
    x.execute_command("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    blocked = Blocked(server, "XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">")
    wait_blocked(x, 1)
    x.execute_command("XGROUP", "DESTROY", "s", "g")
    assert blocked.wait().error.startswith("NOGROUP")
    stats = x.info("commandstats")["cmdstat_xreadgroup"]
    assert (stats["calls"], stats["rejected_calls"], stats["failed_calls"]) == (1, 0, 1)
    assert x.info("errorstats")["errorstat_NOGROUP"]["count"] == 1
