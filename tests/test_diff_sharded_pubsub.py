"""Sharded Pub/Sub (SSUBSCRIBE, SUNSUBSCRIBE, SPUBLISH, PUBSUB SHARDCHANNELS / SHARDNUMSUB) against
Redis 8.2.3 in standalone mode, on the raw wire in RESP2 and RESP3.

Shard channels are a namespace of their own: PUBLISH and patterns never reach them, SPUBLISH reaches
only them, keyspace events never go there, and each family's confirmations count only its own
subscriptions. A standalone Redis checks no slots: channels of different slots go in one SSUBSCRIBE.
Where Redis's order is its hash table's (SUNSUBSCRIBE with no arguments, PUBSUB SHARDCHANNELS) the
replies are compared as multisets.
"""

from __future__ import annotations

import glob
import os
import socket
import time

import hiredis
import pytest

from tests.rawclient import RawConn, encode_command
from tests.servers import millrace_and_redis, start_millrace, start_redis
from tests.test_pubsub import compare, run_script


@pytest.fixture(scope="module")
def pair():
    """Millrace and Redis 8.2.3, in that order."""
    yield from millrace_and_redis()


@pytest.fixture(scope="module")
def both(pair):
    return pair[0].port, pair[1].port


def _replies(data: bytes) -> list:
    reader = hiredis.Reader(notEnoughData=Ellipsis)
    reader.feed(data)
    out = []
    while (item := reader.gets()) is not Ellipsis:
        out.append(item)
    return out


def _pipelined(port: int, resp: int, commands: list[tuple]) -> bytes:
    """What one connection receives for commands sent in one write (up to the final ECHO done)."""
    conn = RawConn(port)
    try:
        if resp == 3:
            conn.call("HELLO", "3")
        conn.send(b"".join(encode_command(*cmd) for cmd in [*commands, ("ECHO", "done")]))
        return conn.read_raw(until=b"$4\r\ndone\r\n")
    finally:
        conn.close()


def _field(line: str, name: str) -> str:
    return dict(part.split("=", 1) for part in line.split(" "))[name]


def _info(conn: RawConn) -> dict[str, str]:
    text = conn.call("INFO", "everything").decode()
    return dict(item.split(":", 1) for item in text.splitlines() if item and ":" in item and item[0] != "#")


SCRIPT2 = [
    ("a", "SSUBSCRIBE", "s1", "s2", "s1"),  # a repeat is confirmed again, its count unchanged
    ("a", "SSUBSCRIBE", "{x}a", "{y}b"),  # different slots in one call: no CROSSSLOT in standalone mode
    ("a", "GET", "x"),  # the RESP2 subscribed context, its error text unchanged
    ("a", "SPUBLISH", "s1", "not here"),
    ("a", "PING"),
    ("a", "PING", "hi"),
    ("a", "UNSUBSCRIBE"),  # only shard channels: nil and a count of 0 (channels and patterns)
    ("a", "PUNSUBSCRIBE"),
    ("a", "UNSUBSCRIBE", "s1"),  # no such channel subscription: the shard one stays
    ("b", "SPUBLISH", "s1", "m1"),
    ("b", "PUBLISH", "s1", "plain"),  # PUBLISH does not reach shard subscribers
    ("c", "PSUBSCRIBE", "*"),
    ("c", "SUBSCRIBE", "s2"),
    ("b", "SPUBLISH", "s2", "m2"),  # nor does SPUBLISH reach patterns or channels
    ("b", "PUBLISH", "s2", "plain2"),
    ("b", "SPUBLISH", "nobody", "m"),
    ("b", "PUBSUB", "SHARDNUMSUB", "s1", "zz", "{x}a", "s1"),
    ("b", "PUBSUB", "SHARDNUMSUB"),
    ("b", "PUBSUB", "SHARDCHANNELS", "s1"),
    ("b", "PUBSUB", "SHARDCHANNELS", "{y}*"),
    ("b", "PUBSUB", "SHARDCHANNELS", "nope*"),
    ("b", "PUBSUB", "SHARDCHANNELS", "s1", "x"),
    ("b", "PUBSUB", "NUMSUB", "s1", "s2"),
    ("b", "PUBSUB", "CHANNELS"),
    ("a", "SUBSCRIBE", "ch"),  # its count is channels and patterns: 1
    ("a", "SSUBSCRIBE", "s3"),  # its count is shard channels: 5
    ("a", "SUNSUBSCRIBE", "s2", "nope"),
    ("a", "UNSUBSCRIBE"),
    ("a", "GET", "x"),  # still shard channels: still in the context
    ("a", "SUNSUBSCRIBE"),
    ("a", "SUNSUBSCRIBE"),
    ("a", "GET", "x"),  # no subscription left: an ordinary client
    ("a", "SSUBSCRIBE", "r"),
    ("a", "RESET"),
    ("a", "GET", "x"),
    ("b", "SPUBLISH", "r", "after reset"),
    ("b", "PUBSUB", "SHARDNUMSUB", "r"),
    ("a", "SSUBSCRIBE", "q"),
    ("a", "QUIT"),
    ("b", "PUBSUB", "SHARDNUMSUB", "q"),
    ("b", "SSUBSCRIBE"),
    ("b", "SPUBLISH", "x"),
    ("b", "SPUBLISH", "x", "y", "z"),
    ("b", "MULTI"),
    ("b", "SSUBSCRIBE", "x"),  # unlike SUBSCRIBE, refused inside EXEC (a DENY BLOCKING client)
    ("b", "SUNSUBSCRIBE", "x"),
    ("b", "SPUBLISH", "x", "in multi"),
    ("b", "EXEC"),
    ("b", "GET", "x"),
]


def test_resp2_shard_subscriptions_context_and_introspection(both):
    ours, theirs = (run_script(port, SCRIPT2) for port in both)
    compare(ours, theirs, unordered={("SUNSUBSCRIBE",)})
    assert b"smessage" in b"".join(got for _, _, got in theirs)


SCRIPT3 = [
    ("b", "SSUBSCRIBE", "q", "q2"),
    ("b", "GET", "x"),  # RESP3: any command runs beside the subscriptions
    ("b", "SET", "x", "1"),
    ("b", "PING"),
    ("a", "SPUBLISH", "q", "z"),
    ("b", "SPUBLISH", "q2", "own"),  # its own message: a push after the reply
    ("b", "UNSUBSCRIBE"),
    ("b", "SUBSCRIBE", "q"),
    ("a", "PUBLISH", "q", "plain"),
    ("b", "SUNSUBSCRIBE"),
    ("b", "SUNSUBSCRIBE"),
    ("b", "UNSUBSCRIBE", "q"),
    ("b", "MULTI"),
    ("b", "SSUBSCRIBE", "x"),
    ("b", "SPUBLISH", "x", "m"),
    ("b", "EXEC"),
    ("b", "SSUBSCRIBE", "y"),
    ("a", "PUBSUB", "SHARDCHANNELS"),
    ("a", "SPUBLISH", "y", ""),
    ("b", "PUBSUB", "SHARDNUMSUB", "y"),
    ("b", "SUNSUBSCRIBE", "y"),
]


def test_resp3_shard_pushes_beside_replies(both):
    ours, theirs = (run_script(port, SCRIPT3, proto3=("b",)) for port in both)
    compare(ours, theirs, unordered={("SUNSUBSCRIBE",)})
    assert b">3\r\n$8\r\nsmessage" in b"".join(got for _, _, got in theirs)


def test_pubsub_shardchannels_lists_every_active_channel(both):
    seen = []
    for port in both:
        sub, other = RawConn(port), RawConn(port)
        sub.send(encode_command("SSUBSCRIBE", "news.a", "news.b", "{t}x", "sports"))
        other.send(encode_command("SSUBSCRIBE", "news.b", "solo"))
        assert len(_replies(sub.read_raw(until=b"sports\r\n:4\r\n"))) == 4
        assert len(_replies(other.read_raw(until=b"solo\r\n:2\r\n"))) == 2
        admin = RawConn(port)
        seen.append([sorted(admin.call("PUBSUB", "SHARDCHANNELS", *pattern)) for pattern in ((), ("news.*",), ("*x",))]
                    + [admin.call("PUBSUB", "SHARDNUMSUB", "news.b", "solo", "news.a")])
        for conn in (sub, other, admin):
            conn.close()
    assert seen[0] == seen[1]
    assert seen[1][0] == [b"news.a", b"news.b", b"solo", b"sports", b"{t}x"]


SHARD_REPLY_MODES = [
    ("CLIENT", "REPLY", "OFF"),
    ("SSUBSCRIBE", "c"),  # confirmations are pushes: REPLY OFF does not silence them
    ("SUNSUBSCRIBE", "c"),
    ("SUNSUBSCRIBE",),
    ("PING",),
    ("CLIENT", "REPLY", "ON"),
    ("CLIENT", "REPLY", "SKIP"),
    ("SSUBSCRIBE", "d"),  # SKIP is spent on it, the confirmation still sent
    ("PING",),
    ("SUNSUBSCRIBE", "d"),
]


@pytest.mark.parametrize("resp", [2, 3])
def test_client_reply_off_and_skip_keep_shard_confirmations(both, resp):
    ours, theirs = (_pipelined(port, resp, SHARD_REPLY_MODES) for port in both)
    assert ours == theirs
    assert ours.count(b"subscribe\r\n") == 5


def test_client_list_and_info_count_shard_subscriptions(both):
    """A client with shard channels only is a Pub/Sub client: flags=P, ssub=, pubsub_clients."""
    seen = []
    for port in both:
        a, b = RawConn(port), RawConn(port)
        a.call("CLIENT", "SETNAME", "shardsub")
        a.send(encode_command("SSUBSCRIBE", "c1", "c2", "c3"))
        assert len(_replies(a.read_raw(until=b"c3\r\n:3\r\n"))) == 3
        line = next(line for line in b.call("CLIENT", "LIST").decode().splitlines() if "name=shardsub " in line)
        info = _info(b)
        seen.append(([_field(line, name) for name in ("flags", "sub", "psub", "ssub")],
                     [info[name] for name in ("pubsub_channels", "pubsub_patterns", "pubsubshard_channels", "pubsub_clients")]))
        a.close()
        time.sleep(0.1)
        info = _info(b)
        seen.append((b.call("PUBSUB", "SHARDNUMSUB", "c1"), info["pubsubshard_channels"], info["pubsub_clients"]))
        b.close()
    assert seen[0] == seen[2]
    assert seen[1] == seen[3] == ([b"c1", 0], "0", "0")  # a dropped subscriber leaves nothing behind
    assert seen[2] == (["P", "0", "0", "3"], ["0", "0", "3", "1"])


def test_client_kill_and_list_by_type_pubsub_with_shard_channels_only(both):
    """A shard subscriber (RESP2 or RESP3) is of type pubsub: CLIENT KILL TYPE normal spares it."""
    seen = []
    for port in both:
        admin, sub2, sub3 = RawConn(port), RawConn(port), RawConn(port)
        sub3.call("HELLO", "3")
        for conn, name in ((sub2, "sub2"), (sub3, "sub3")):
            conn.call("CLIENT", "SETNAME", name)
            conn.send(encode_command("SSUBSCRIBE", "k"))
            conn.read()
        names = [admin.call("CLIENT", "LIST", "TYPE", kind).decode().count("name=sub") for kind in ("pubsub", "normal")]
        killed_normal = admin.call("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
        alive = admin.call("SPUBLISH", "k", "still here")
        killed_pubsub = admin.call("CLIENT", "KILL", "TYPE", "pubsub")
        seen.append((names, killed_normal, alive, killed_pubsub, sub2.is_closed(), sub3.is_closed()))
        admin.close()
    assert seen[0] == seen[1] == ([2, 0], 0, 2, 2, True, True)


NOTIFY = [
    ("a", "CONFIG", "SET", "notify-keyspace-events", "KEAm"),  # every class, keymiss among them
    ("b", "SSUBSCRIBE", "__keyspace@0__:nk", "__keyevent@0__:set", "__keyevent@0__:keymiss"),
    ("c", "PSUBSCRIBE", "__key*"),
    ("a", "SET", "nk", "v"),  # events for the pattern, none for the shard subscriber
    ("a", "SPUBLISH", "missing-key", "m"),  # a channel is never looked up as a key: no keymiss
    ("a", "SPUBLISH", "__keyevent@0__:set", "by hand"),
    ("a", "GET", "missing-key"),  # a real keymiss, to the pattern only
    ("a", "CONFIG", "SET", "notify-keyspace-events", ""),
    ("b", "SUNSUBSCRIBE"),
]


def test_keyspace_notifications_do_not_reach_shard_channels(both):
    ours, theirs = (run_script(port, NOTIFY) for port in both)
    compare(ours, theirs, unordered={("SUNSUBSCRIBE",)})
    pushed = [(who, got) for who, cmd, got in theirs if cmd == "(pushed)"]
    assert any(who == "c" and b"keymiss" in got for who, got in pushed)
    assert [got for who, got in pushed if who == "b"] == [b"*3\r\n$8\r\nsmessage\r\n$18\r\n__keyevent@0__:set\r\n$7\r\nby hand\r\n"]


def _paused_spublish(port: int) -> tuple:
    """SPUBLISH under CLIENT PAUSE WRITE: held (no reply) until CLIENT UNPAUSE, then delivered."""
    admin, pub, sub = RawConn(port), RawConn(port), RawConn(port)
    try:
        sub.call("SSUBSCRIBE", "held")
        assert admin.call("CLIENT", "PAUSE", 10000, "WRITE") == b"OK"
        pub.send(encode_command("SPUBLISH", "held", "m"))
        during = pub.read_raw(timeout=0.3), sub.read_raw(timeout=0.1)
        blocked = _info(admin)["blocked_clients"]
        admin.call("CLIENT", "UNPAUSE")
        after = pub.read(), sub.read()
        return during, blocked, after
    finally:
        admin.call("CLIENT", "UNPAUSE")
        for conn in (admin, pub, sub):
            conn.close()


def test_client_pause_write_holds_spublish(both):
    ours, theirs = (_paused_spublish(port) for port in both)
    assert ours == theirs
    assert theirs[0] == (b"", b"") and theirs[1] == "1" and theirs[2] == (1, [b"smessage", b"held", b"m"])


def _flood(port: int, limits: str, payload: int, count: int) -> tuple[bool, int]:
    """A shard subscriber that never reads while SPUBLISH sends count payloads: is it dropped?"""
    admin = RawConn(port)
    old = admin.call("CONFIG", "GET", "client-output-buffer-limit")[1]
    admin.call("CONFIG", "SET", "client-output-buffer-limit", limits)
    before = int(_info(admin)["client_output_buffer_limit_disconnections"])
    sub = socket.create_connection(("127.0.0.1", port))
    sub.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sub.sendall(encode_command("CLIENT", "SETNAME", "slowshard") + encode_command("SSUBSCRIBE", "flood"))
    time.sleep(0.2)
    pub = RawConn(port)
    message = b"x" * payload
    for _ in range(count):
        pub.send(encode_command("SPUBLISH", "flood", message))
    for _ in range(count):
        pub.read()
    time.sleep(0.3)
    present = any("name=slowshard " in line for line in admin.call("CLIENT", "LIST").decode().splitlines())
    after = int(_info(admin)["client_output_buffer_limit_disconnections"])
    admin.call("CONFIG", "SET", "client-output-buffer-limit", old)
    for conn in (sub, pub, admin):
        conn.close()
    return not present, after - before


def test_client_output_buffer_limit_pubsub_class_binds_shard_subscribers(both):
    """A shard subscriber is of the pubsub class: its limit drops it, the normal class's does not."""
    pubsub_limited = [_flood(port, "pubsub 1mb 0 0 normal 0 0 0", 64 << 10, 200) for port in both]
    normal_limited = [_flood(port, "normal 1mb 0 0 pubsub 0 0 0", 64 << 10, 200) for port in both]
    assert pubsub_limited[0] == pubsub_limited[1] == (True, 1)
    assert normal_limited[0] == normal_limited[1] == (False, 0)


def test_command_info_docs_and_acl_categories(both):
    names = ("ssubscribe", "sunsubscribe", "spublish", "pubsub|shardchannels", "pubsub|shardnumsub")
    seen = []
    for port in both:
        conn = RawConn(port)
        info = _pipelined(port, 2, [("COMMAND", "INFO", *names)])
        docs = [_pipelined(port, resp, [("COMMAND", "DOCS", *names)]) for resp in (2, 3)]
        cats = sorted(conn.call("ACL", "CAT", "pubsub"))
        listed = sorted(conn.call("COMMAND", "LIST", "FILTERBY", "ACLCAT", "pubsub"))
        seen.append((info, docs, cats, listed))
        conn.close()
    assert seen[0] == seen[1]
    assert b"spublish" in seen[1][2] and b"ssubscribe" in seen[1][2] and b"sunsubscribe" in seen[1][2]


def _stream_and_aof(primary, replica) -> tuple[list, list, bytes]:
    """SPUBLISH on a primary: what a replica's shard subscriber gets, the commands of the replication
    stream (PINGs and REPLCONFs left out) and the primary's AOF."""
    p, r = RawConn(primary.port), RawConn(replica.port)
    deadline = time.monotonic() + 15
    while b"master_link_status:up" not in r.call("INFO", "replication"):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    sub = RawConn(replica.port)
    assert sub.call("SSUBSCRIBE", "shard") == [b"ssubscribe", b"shard", 1]
    p.call("XADD", "s", "*", "f", "v")
    fields = dict(line.split(":", 1) for line in p.call("INFO", "replication").decode().splitlines() if ":" in line)
    link = RawConn(primary.port)
    link.call("REPLCONF", "listening-port", "1")
    link.send(encode_command("PSYNC", fields["master_replid"], int(fields["master_repl_offset"]) + 1))
    assert link.read_raw(until=b"\r\n").startswith(b"+CONTINUE")
    p.send(b"".join(encode_command(*argv) for argv in [("MULTI",), ("XADD", "s", "*", "f", "w"), ("SPUBLISH", "shard", "in exec"), ("EXEC",)]))
    for _ in range(4):
        p.read()
    sent = p.call("SPUBLISH", "shard", "from the primary")  # no subscriber on the primary
    got = [sub.read() for _ in range(2)]
    local = r.call("SPUBLISH", "shard", "local"), sub.read()  # the replica's own subscribers as well
    p.call("WAIT", 1, 2000)
    stream = link.read_raw(until=b"from the primary")
    commands = [argv[0].upper() for argv in _replies(stream) if argv[0].upper() not in (b"PING", b"REPLCONF", b"SELECT")]
    for conn in (p, r, sub, link):
        conn.close()
    aof = b"".join(open(path, "rb").read() for path in glob.glob(os.path.join(primary.dir, "**", "*.aof*"), recursive=True))
    return [sent, got, local], commands, aof


def test_spublish_reaches_a_replicas_shard_subscribers_but_not_the_aof(tmp_path):
    """Redis sends SPUBLISH to replicas as PUBLISH (PROPAGATE_REPL: inside EXEC in its place), never to the AOF."""
    seen = []
    for kind in ("millrace", "redis"):
        (tmp_path / kind / "p").mkdir(parents=True)
        (tmp_path / kind / "r").mkdir()
        if kind == "millrace":
            primary = start_millrace("--appendonly", "yes", workdir=str(tmp_path / kind / "p"))
            replica = start_millrace("--replicaof", "127.0.0.1", str(primary.port), workdir=str(tmp_path / kind / "r"))
        else:
            primary = start_redis("--appendonly", "yes")
            replica = start_redis("--replicaof", "127.0.0.1", str(primary.port))
        try:
            seen.append(_stream_and_aof(primary, replica))
        finally:
            replica.stop()
            primary.stop()
    (ours, our_commands, our_aof), (theirs, their_commands, their_aof) = seen
    assert ours == theirs == [0, [[b"smessage", b"shard", b"in exec"], [b"smessage", b"shard", b"from the primary"]],
                              (1, [b"smessage", b"shard", b"local"])]
    assert our_commands == their_commands == [b"MULTI", b"XADD", b"SPUBLISH", b"EXEC", b"SPUBLISH"]
    for aof in (our_aof, their_aof):
        assert b"XADD" in aof and b"SPUBLISH" not in aof.upper()


def test_command_getkeys_finds_no_key_in_a_shard_command(both):
    """SPUBLISH's channel is declared as a key spec flagged NOT_KEY: COMMAND GETKEYS has no key to give."""
    seen = []
    for port in both:
        conn = RawConn(port)
        try:
            seen.append([repr(conn.call("COMMAND", "GETKEYS", *cmd)) for cmd in (("SPUBLISH", "ch", "m"), ("SSUBSCRIBE", "a", "b"), ("GET", "k"))])
        finally:
            conn.close()
    assert seen[0] == seen[1]
    assert "has no key arguments" in seen[0][0] and seen[0][2] == "[b'k']"


def _idle_shard_subscriber_survives(port: int) -> tuple:
    admin, subscriber, idle = RawConn(port), RawConn(port), RawConn(port)
    try:
        admin.call("CONFIG", "SET", "timeout", "1")
        subscriber.call("SSUBSCRIBE", "quiet")
        idle.call("PING")
        time.sleep(2.5)  # Redis's clientsCron looks at each client over a second or so
        return subscriber.is_closed(timeout=0.2), idle.is_closed(timeout=2)
    finally:
        reset = RawConn(port)  # admin has been idle too
        reset.call("CONFIG", "SET", "timeout", "0")
        for conn in (reset, admin, subscriber, idle):
            conn.close()


def test_the_idle_timeout_spares_a_shard_subscriber(both):
    millrace, redis = (_idle_shard_subscriber_survives(port) for port in both)
    assert millrace == redis == (False, True)


def _invalidation_to_a_shard_subscriber(port: int) -> bytes:
    """A RESP2 tracking client redirects to a client subscribed to a shard channel only: Redis sends it the
    __redis__:invalidate message (any subscription makes it a Pub/Sub client)."""
    target, tracker, writer = RawConn(port), RawConn(port), RawConn(port)
    try:
        target.call("SSUBSCRIBE", "x")
        tracker.call("CLIENT", "TRACKING", "ON", "REDIRECT", str(target_id(port, target)))
        tracker.call("GET", "tracked")
        writer.call("SET", "tracked", "1")
        return target.read_raw(until=b"tracked\r\n", timeout=2)
    finally:
        for conn in (target, tracker, writer):
            conn.close()


def target_id(port: int, conn: RawConn) -> int:
    """The client ID of a connection already subscribed (CLIENT ID is refused in the RESP2 subscribed context)."""
    admin = RawConn(port)
    try:
        lines = admin.call("CLIENT", "LIST", "TYPE", "pubsub").decode().splitlines()
        return int(_field(lines[-1], "id"))
    finally:
        admin.close()


def test_a_tracking_redirect_reaches_a_shard_only_subscriber(both):
    millrace, redis = (_invalidation_to_a_shard_subscriber(port) for port in both)
    assert millrace == redis
    assert b"__redis__:invalidate" in millrace
