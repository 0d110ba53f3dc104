"""Keyspace notifications against Redis 8.2.3: the same commands on both, the same messages.

A subscriber to `__key*@*__:*` on each server sees, command by command, the
messages the command produced; the sequences must be equal. Active expiry is
off on both (DEBUG SET-ACTIVE-EXPIRE 0), so `expired` comes when a command
finds the key, at the same point on both.
"""

from __future__ import annotations

import random
import time

import pytest
import redis

from tests.servers import require_redis, start_millrace, start_redis

DEBUG = ("--enable-debug-command", "yes")

# Every write Millrace has, with the cases that emit and those that do not.
SCRIPT = """
set a 1
set a 2 ex 100
set a 3 keepttl
set a 4 nx
set a 5 xx get
set nope 6 xx
incr a
decr a
incrby a 3
decrby a 3
incrbyfloat a 1.5
append a x
append b y
setrange a 0 z
setrange c 2 z
getdel a
getdel a
del a b c nope
set b 1 px 1
pause
get b
set b 1 ex 100
getex b ex 100
getex b persist
getex b
getex b px 0
xadd s maxlen 1 1-1 f v
xadd s maxlen 1 2-1 f v
xadd s maxlen 5 3-1 f v
xadd s nomkstream 4-1 f v
xadd nos nomkstream 5-1 f v
xadd s minid 4 5-1 f v
xtrim s maxlen 0
xtrim s maxlen 0
xadd s 6-1 f v
xadd s 6-1 f v
xdel s 6-1 9-9
xdel s 6-1
xadd s 7-1 f v
xgroup create s g $
xgroup create s g $
xgroup create s2 g $ mkstream
xadd s 8-1 f v
xreadgroup group g c1 streams s >
xreadgroup group g c1 streams s >
xreadgroup group g c4 streams s 0
xgroup createconsumer s g c1
xgroup createconsumer s g c9
xclaim s g c2 0 8-1
xclaim s g c2 0 8-1
xautoclaim s g c3 0 0
xautoclaim s g c3 0 0
xack s g 8-1
xgroup delconsumer s g c9
xgroup delconsumer s g nope
xgroup setid s g 0
xgroup setid s g $ entriesread 1
xsetid s 99-9
xgroup destroy s g
xgroup destroy s g
rename s s3
rename s2 s3
renamenx s3 s3b
renamenx s3b s3b
copy s3b s4
copy s3b s4
copy s3b s4 replace
copy s3b s5 db 1
copy s4 s5 db 1 replace
set s3b x
xadd x1 1-1 f v
copy x1 s3b replace
rename s3b x1
expire s4 100
expire s4 100 nx
expire s4 200 gt
pexpire s4 50000 lt
expireat s4 99999999999
pexpireat s4 99999999999000
persist s4
persist s4
expire s4 0
expire s4 0
set k v
pexpireat k 1
set k v
mset k1 1 k2 2
setnx k1 3
setnx k3 3
msetnx x1 1 x2 2
msetnx x1 1 x3 2
getset k1 5
setex k9 100 v
psetex k9 100 v
set k9 v keepttl
move k9 1
move k1 1
move nope 1
unlink k1 k2 x1 nope
select 1
set k9 v
del k9 s5
flushdb
""".strip().splitlines()

# Reads (and the writes that read) on missing, expired and present keys: `keymiss` (class m).
READS = """
get m
mget m m m2
strlen m
getrange m 0 1
substr m 0 1
lcs m m2
exists m m
type m
ttl m
pttl m
expiretime m
pexpiretime m
touch m m2
object encoding m
object freq m
xrange m - +
xrevrange m + -
xlen m
xread streams m 0
xread streams m m2 0 0
xread count 1 streams m $
xinfo stream m
xinfo groups m
xinfo consumers m g
xpending m g
xreadgroup group g c streams m >
xack m g 1-1
xclaim m g c 0 1-1
xautoclaim m g c 0 0
xrange m x +
getdel m
getex m
getex m ex 10
set m v get
getset m4 x
copy m2 m3
rename m2 m3
move m2 1
xadd m2 nomkstream * f v
xtrim m2 maxlen 0
expire m2 10
persist m2
incr m9
set e 1 px 1
pause
get e
set s x
get s
type s
xlen s
xrange s - +
xadd x 1-1 f v
xread streams x s 0 0
xackdel nokey g ids 1 1-1
watch w1 w2
unwatch
memory usage nokey
set e2 v px 1
pause
memory usage e2
watch e2
unwatch
xackdel e2 g ids 1 1-1
""".strip().splitlines()


def until_marker(r, listener, command) -> list[tuple]:
    """The (channel, message) pairs published before a marker sent now: all a command's, as the marker
    is published after them."""
    r.publish("__keyevent@99__:marker", "end")
    messages = []
    while True:
        message = listener.get_message(timeout=5)
        assert message is not None, command
        if message["type"] != "pmessage":
            continue
        if message["channel"] == b"__keyevent@99__:marker":
            return messages
        messages.append((message["channel"], message["data"]))


def run(port: int, flags: str, commands: list[list[str]]) -> list[tuple]:
    """Each command with the messages its execution published (a subscriber on another connection)."""
    r = redis.Redis(port=port, socket_timeout=10)
    r.flushall()
    r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    r.config_set("notify-keyspace-events", flags)
    listener = r.pubsub()
    listener.psubscribe("__key*@*__:*")
    assert listener.get_message(timeout=2)["type"] == "psubscribe"
    out = []
    try:
        for command in commands:
            if command == ["pause"]:  # past a 1 ms TTL on both, before the next command looks
                time.sleep(0.01)
                continue
            try:
                r.execute_command(*command)
            except redis.ResponseError:
                pass
            out.append((command, until_marker(r, listener, command)))
    finally:
        r.config_set("notify-keyspace-events", "")
        r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "1")
        listener.close()
        r.close()
    return out


@pytest.fixture(scope="module")
def ports():
    """Millrace and Redis 8.2.3 with DEBUG enabled (for SET-ACTIVE-EXPIRE), one pair per module."""
    require_redis()
    ours, theirs = start_millrace(*DEBUG), start_redis(*DEBUG)
    yield ours.port, theirs.port
    ours.stop()
    theirs.stop()


@pytest.mark.parametrize("flags", ["KEA", "Kg$txn", "Et", "Ex$", "KEgn", "Kt", "KEAm", "KEAnoc", "Eoc"])
def test_every_write_emits_redis_events(ports, flags):
    commands = [line.split() for line in SCRIPT]
    ours, theirs = (run(port, flags, commands) for port in ports)
    assert ours == theirs
    if flags == "KEA":  # the script does emit: a run where nothing is published would pass too
        assert sum(len(messages) for _, messages in ours) > 100


@pytest.mark.parametrize("flags", ["KEm", "KEAm"])
def test_reads_that_miss_emit_keymiss(ports, flags):
    commands = [line.split() for line in READS]
    ours, theirs = (run(port, flags, commands) for port in ports)
    assert ours == theirs
    assert sum(len(messages) for _, messages in ours) > 50


def random_commands(seed: int, count: int) -> list[list[str]]:
    """A random workload over a few keys: streams, groups, strings and the generic commands."""
    rng = random.Random(seed)
    keys = ["s1", "s2", "k1", "k2"]
    commands: list[list[str]] = []
    next_ms = 1
    for _ in range(count):
        key, other = rng.sample(keys, 2)
        group = rng.choice(["g1", "g2"])
        consumer = rng.choice(["c1", "c2", "c3"])
        next_ms += rng.randint(0, 2)
        entry = f"{next_ms}-{rng.randint(0, 3)}"
        commands.append(rng.choice([
            ["XADD", key, entry, "f", "v"],
            ["XADD", key, "MAXLEN", str(rng.randint(0, 3)), entry, "f", "v"],
            ["XADD", key, "NOMKSTREAM", "MINID", str(next_ms - 1), entry, "f", "v"],
            ["XTRIM", key, "MAXLEN", str(rng.randint(0, 3))],
            ["XDEL", key, f"{rng.randint(1, next_ms)}-{rng.randint(0, 3)}"],
            ["XGROUP", "CREATE", key, group, rng.choice(["0", "$"]), *rng.choice([[], ["MKSTREAM"]])],
            ["XGROUP", "DESTROY", key, group],
            ["XGROUP", "SETID", key, group, "0"],
            ["XGROUP", "CREATECONSUMER", key, group, consumer],
            ["XGROUP", "DELCONSUMER", key, group, consumer],
            ["XREADGROUP", "GROUP", group, consumer, "COUNT", "2", "STREAMS", key, ">"],
            ["XCLAIM", key, group, consumer, "0", f"{rng.randint(1, next_ms)}-{rng.randint(0, 3)}"],
            ["XAUTOCLAIM", key, group, consumer, "0", "0", "COUNT", "2"],
            ["XACK", key, group, f"{rng.randint(1, next_ms)}-{rng.randint(0, 3)}"],
            ["XSETID", key, f"{next_ms + 5}-0"],
            ["SET", key, "v", *rng.choice([[], ["NX"], ["XX"], ["EX", "100"], ["KEEPTTL"]])],
            ["INCR", key],
            ["APPEND", key, "x"],
            ["DEL", key, other],
            ["RENAME", key, other],
            ["COPY", key, other, *rng.choice([[], ["REPLACE"]])],
            ["EXPIRE", key, rng.choice(["100", "0"])],
            ["PERSIST", key],
            ["MSET", key, "1", other, "2"],
            ["GET", key],
            ["XRANGE", key, "-", "+", "COUNT", "1"],
            ["XREAD", "COUNT", "1", "STREAMS", key, other, "0", "0"],
            ["EXISTS", key, other, key],
            ["TTL", key],
            ["XINFO", "STREAM", key],
            ["XPENDING", key, group],
            ["GETDEL", key],
        ]))
    return commands


@pytest.mark.parametrize("seed", range(3))
def test_random_workload_emits_the_same_messages(ports, seed):
    commands = random_commands(seed, 150)
    ours, theirs = (run(port, "KEAnmoc", commands) for port in ports)
    for (command, got), (_, want) in zip(ours, theirs, strict=True):
        assert got == want, command


def test_events_follow_config_set(ports):
    """Turning notifications off stops them at once; on again, they flow (and only the classes set)."""
    r = redis.Redis(port=ports[0])
    listener = r.pubsub()
    listener.psubscribe("__key*@*__:*")
    listener.get_message(timeout=2)
    r.config_set("notify-keyspace-events", "")
    r.set("quiet", 1)
    r.config_set("notify-keyspace-events", "Kt")
    r.set("quiet", 2)
    r.xadd("loud", {"f": "v"})
    time.sleep(0.1)
    messages = []
    while (message := listener.get_message(timeout=0.2)) is not None:
        messages.append((message["channel"], message["data"]))
    assert messages == [(b"__keyspace@0__:loud", b"xadd")]
    r.config_set("notify-keyspace-events", "")
    listener.close()


def woken_reads(port: int) -> list:
    """The events around blocked reads woken by a write: Redis re-runs the command, whose lookups miss again."""
    r = redis.Redis(port=port, socket_timeout=10)
    r.flushall()
    r.config_set("notify-keyspace-events", "KEm")
    listener = r.pubsub()
    listener.psubscribe("__key*@*__:*")
    assert listener.get_message(timeout=2)["type"] == "psubscribe"
    reader = redis.Redis(port=port, socket_timeout=10)
    writer = redis.Redis(port=port, socket_timeout=10)
    seen = []
    try:
        r.xadd("s", {"f": "v"}, id="1-1")
        r.xgroup_create("s", "g", "$")
        for blocked, wake in ((["XREAD", "BLOCK", "3000", "STREAMS", "nokey", "nokey2", "$", "$"], ["XADD", "nokey2", "1-1", "f", "v"]),
                              (["XREADGROUP", "GROUP", "g", "c", "BLOCK", "3000", "STREAMS", "s", ">"], ["DEL", "s"])):  # fmt: skip
            conn = reader.connection_pool.get_connection()
            conn.send_command(*blocked)
            time.sleep(0.3)
            writer.execute_command(*wake)
            try:
                reply = conn.read_response()
            except redis.ResponseError as exc:
                reply = str(exc)
            reader.connection_pool.release(conn)
            seen.append((blocked[0], reply is not None, until_marker(r, listener, blocked)))
    finally:
        r.config_set("notify-keyspace-events", "")
        listener.close()
        for client in (r, reader, writer):
            client.close()
    return seen


def test_a_woken_blocked_read_misses_again_as_its_rerun_does(ports):
    ours, theirs = (woken_reads(port) for port in ports)
    assert ours == theirs
    assert sum(channel.endswith(b"keymiss") for _, _, messages in ours for channel, _ in messages) >= 4
