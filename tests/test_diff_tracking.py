"""Differential: client-side caching (CLIENT TRACKING and its kin), Redis 8.2.3 vs Millrace.

Each scenario drives both servers alike over raw connections and records every byte each
connection receives (replies and invalidation pushes in their wire order), so the order of an
invalidation relative to the reply of the command that caused it is compared too. A connection's
transcript step ends at a sentinel (`CLIENT GETNAME` of a named connection: it leaves a one-shot
CLIENT CACHING in force, as any CLIENT subcommand does), so no step waits on a timer. Client IDs
differ between the servers and are replaced by names before comparing.
"""

from __future__ import annotations

import re
import time

import pytest
import redis
from redis.cache import CacheConfig

from tests.rawclient import RawConn, encode_command
from tests.servers import require_redis, start_millrace, start_redis

SENTINEL = encode_command("CLIENT", "GETNAME")


@pytest.fixture(scope="module")
def pair():
    """One Millrace and one Redis for the module, DEBUG enabled (SET-ACTIVE-EXPIRE)."""
    require_redis()
    procs = []
    try:
        procs.append(start_millrace("--enable-debug-command", "yes"))
        procs.append(start_redis("--enable-debug-command", "yes"))
        yield procs
    finally:
        for proc in procs:
            proc.stop()


class Session:
    """Named raw connections to one server; `talk` returns what a connection received, IDs named."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.conns: dict[str, RawConn] = {}
        self.ids: dict[int, str] = {}
        self.leftover: dict[str, bytes] = {}
        self.talk(self.open("admin", 2), ("FLUSHALL",))
        self.talk("admin", ("CONFIG", "SET", "tracking-table-max-keys", "1000000"))

    def open(self, name: str, resp: int = 3) -> str:
        conn = self.conns[name] = RawConn(self.port)
        conn.call("CLIENT", "SETNAME", name)
        self.ids[conn.call("CLIENT", "ID")] = name
        if resp == 3:
            conn.send(encode_command("HELLO", "3"))
            conn.read()
        return name

    def id_of(self, name: str) -> str:
        return str(next(cid for cid, n in self.ids.items() if n == name))

    def talk(self, name: str, *commands: tuple) -> bytes:
        """Send commands (pipelined), then the sentinel; all bytes up to its reply, IDs named."""
        conn = self.conns[name]
        conn.send(b"".join(encode_command(*c) for c in commands) + SENTINEL)
        end = b"$%d\r\n%s\r\n" % (len(name), name.encode())
        data = self.leftover.pop(name, b"")
        while end not in data:
            chunk = conn.sock.recv(65536)
            assert chunk, f"{name} closed"
            data += chunk
        data, _, rest = data.partition(end)
        if rest:  # what followed the sentinel (a BCAST push of that loop turn) opens the next step
            self.leftover[name] = rest
        return self.named(data)

    def listen(self, name: str, timeout: float = 0.3) -> bytes:
        """What arrived unasked (a RESP2 subscriber's messages, invalidations of expiries)."""
        return self.named(self.conns[name].read_raw(timeout=timeout))

    def named(self, data: bytes) -> bytes:
        """Client IDs where a reply shows one: redir=, TRACKINGINFO's redirect, tracking-redir-broken."""
        def name(match: re.Match) -> bytes:
            return match[1] + self.ids.get(int(match[2]), match[2].decode()).encode()

        return re.sub(rb"(redir=|redirect\r\n:|tracking-redir-broken\r\n:)(\d+)", name, data)

    def getredir(self, name: str):
        """CLIENT GETREDIR, the ID named."""
        value = self.conns[name].call("CLIENT", "GETREDIR")
        return self.ids.get(value, value)

    def info(self, *fields: str) -> dict[str, str]:
        text = self.conns["admin"].call("INFO", "everything").decode()
        return {f: re.search(rf"^{f}:(.*)\r$", text, re.M).group(1) for f in fields}

    def close(self) -> None:
        for conn in self.conns.values():
            conn.close()


TRACKING_INFO = ("tracking_clients", "tracking_total_keys", "tracking_total_items", "tracking_total_prefixes")


def both(pair, scenario) -> None:
    """Run scenario(session, log) on each server; the logs must be equal."""
    logs = []
    for proc in pair:
        session = Session(proc.port)
        log: list = []
        try:
            scenario(session, log)
        finally:
            session.close()
        logs.append(log)
        time.sleep(0.05)  # the closed connections leave before the next scenario's INFO
    for step, (mine, theirs) in enumerate(zip(*logs, strict=False)):  # the lengths are compared after
        assert mine == theirs, f"step {step}: Millrace {mine!r} != Redis {theirs!r}"
    assert len(logs[0]) == len(logs[1])


def test_tracking_option_errors(pair):
    def scenario(s: Session, log: list) -> None:
        a = s.open("a")
        before = s.info("total_error_replies")["total_error_replies"]
        for cmd in [
            ("CLIENT", "TRACKING", "ON", "PREFIX", "a"),
            ("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "ab", "PREFIX", "a"),
            ("CLIENT", "TRACKING", "ON", "BCAST", "OPTIN"),
            ("CLIENT", "TRACKING", "ON", "BCAST", "OPTOUT"),
            ("CLIENT", "TRACKING", "ON", "OPTIN", "OPTOUT"),
            ("CLIENT", "TRACKING", "ON", "REDIRECT", "999999"),
            ("CLIENT", "TRACKING", "ON", "REDIRECT", "x"),
            ("CLIENT", "TRACKING", "ON", "REDIRECT", s.id_of("admin"), "REDIRECT", s.id_of("admin")),
            ("CLIENT", "TRACKING", "ON", "FOO"),
            ("CLIENT", "TRACKING", "MAYBE"),
            ("CLIENT", "TRACKING", "ON", "REDIRECT"),
            ("CLIENT", "TRACKING"),
            ("CLIENT", "CACHING", "YES"),
            ("CLIENT", "CACHING", "maybe"),
            ("CLIENT", "CACHING"),
            ("CLIENT", "GETREDIR", "x"),
            ("CLIENT", "TRACKINGINFO", "x"),
            ("CLIENT", "TRACKING", "ON", "OPTIN"),
            ("CLIENT", "TRACKING", "ON", "OPTOUT"),
            ("CLIENT", "CACHING", "NO"),
            ("CLIENT", "TRACKING", "ON", "BCAST"),
            ("CLIENT", "TRACKING", "OFF"),
            ("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "a", "PREFIX", "b"),
            ("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "ax"),
            ("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "b"),
            ("CLIENT", "TRACKING", "ON"),
            ("CLIENT", "TRACKING", "OFF", "BCAST", "OPTIN", "OPTOUT", "PREFIX", "x"),
            # a later prefix overlapping a later one: Redis replies the error, then OK (and tracks)
            ("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "p", "PREFIX", "q", "PREFIX", "qr"),
            ("CLIENT", "TRACKINGINFO"),
        ]:
            log.append(s.talk(a, cmd))
        log.append(int(s.info("total_error_replies")["total_error_replies"]) - int(before))

    both(pair, scenario)


def test_trackinginfo_getredir_client_list(pair):
    def scenario(s: Session, log: list) -> None:
        a, b = s.open("a"), s.open("b", 2)
        flags = re.compile(rb"flags=(\S+) .* redir=(\S+) ")
        steps = [
            [("CLIENT", "TRACKINGINFO")],
            [("CLIENT", "TRACKING", "ON", "OPTIN", "NOLOOP", "REDIRECT", s.id_of("b")), ("CLIENT", "TRACKINGINFO")],
            [("CLIENT", "CACHING", "YES"), ("CLIENT", "TRACKINGINFO")],
            [("CLIENT", "TRACKING", "OFF"), ("CLIENT", "TRACKING", "ON", "OPTOUT"), ("CLIENT", "CACHING", "NO"), ("CLIENT", "TRACKINGINFO")],
            [("CLIENT", "TRACKING", "OFF"), ("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "z", "PREFIX", "c"), ("CLIENT", "TRACKINGINFO")],
            [("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "b"), ("CLIENT", "TRACKINGINFO")],
            [("CLIENT", "TRACKING", "OFF"), ("CLIENT", "TRACKING", "ON", "BCAST"), ("CLIENT", "TRACKINGINFO")],
        ]
        for step in steps:
            log.append(s.talk(a, *step))
            log.append(s.getredir(a))
            info = s.named(s.conns["admin"].call("CLIENT", "LIST", "ID", s.id_of("a")))
            log.append(b" ".join(flags.search(info).groups()))
            log.append(s.info(*TRACKING_INFO))
        log.append(s.talk(b, ("CLIENT", "TRACKINGINFO")))  # RESP2: an array

    both(pair, scenario)


def test_default_mode_invalidations(pair):
    def scenario(s: Session, log: list) -> None:
        a, w = s.open("a"), s.open("w", 2)
        log.append(s.talk(a, ("CLIENT", "TRACKING", "ON"), ("GET", "k"), ("MGET", "k", "k2")))
        log.append(s.info(*TRACKING_INFO))
        log.append((s.talk(w, ("SET", "k", "1")), s.talk(a)))  # another's write: once
        log.append((s.talk(w, ("SET", "k", "2")), s.talk(a)))  # forgotten until read again
        log.append(s.talk(a, ("GET", "k"), ("SET", "k", "3"), ("PING",)))  # own write: after its reply
        log.append(s.talk(a, ("GET", "k"), ("GET", "k2"), ("MULTI",), ("SET", "k", "5"), ("SET", "k2", "5"), ("EXEC",)))
        log.append(s.talk(a, ("GET", "r1"), ("GET", "r2"), ("DEL", "d")))
        log.append((s.talk(w, ("SET", "r1", "x"), ("RENAME", "r1", "r2"), ("DEL", "d"), ("SET", "k", "z", "NX")), s.talk(a)))
        log.append(s.talk(a, ("EXISTS", "q1", "q2"), ("TTL", "q3"), ("TYPE", "q4"), ("STRLEN", "q5"), ("XRANGE", "s", "-", "+")))
        log.append((s.talk(w, ("MSET", "q1", "1", "q2", "1", "q3", "1", "q4", "1", "q5", "1"), ("XADD", "s", "1-1", "f", "v")), s.talk(a)))
        log.append(s.talk(a, ("GET", "s"), ("GET", "other-db")))  # an error still remembers its key
        log.append((s.talk(w, ("DEL", "s"), ("SELECT", "1"), ("SET", "other-db", "1"), ("SELECT", "0")), s.talk(a)))  # the table knows no db
        s.talk(s.open("b"), ("CLIENT", "TRACKING", "ON"))  # another tracking client: the table stays (see below)
        log.append(s.talk(a, ("GET", "kept"), ("CLIENT", "TRACKING", "OFF")))
        log.append(s.info(*TRACKING_INFO))  # tracking off: its keys stay until modified
        log.append((s.talk(w, ("SET", "kept", "1")), s.talk(a), s.info(*TRACKING_INFO)))

    both(pair, scenario)


def test_the_last_tracking_client_takes_the_table_with_it(pair):
    """Millrace's one difference: when no client tracks, its table goes (and every hook's cost with it);
    Redis keeps the keys it remembered until they change, so its tracking_total_keys stays above 0."""
    session = Session(pair[0].port)
    try:
        session.talk(session.open("a"), ("CLIENT", "TRACKING", "ON"), ("GET", "k1"), ("GET", "k2"))
        assert session.info("tracking_clients", "tracking_total_keys") == {"tracking_clients": "1", "tracking_total_keys": "2"}
        session.talk("a", ("CLIENT", "TRACKING", "OFF"))
        assert session.info("tracking_clients", "tracking_total_keys") == {"tracking_clients": "0", "tracking_total_keys": "0"}
        session.talk("a", ("CLIENT", "TRACKING", "ON"), ("GET", "k1"))  # and it comes back on the next one
        session.talk(session.open("w", 2), ("SET", "k1", "x"))
        assert b"invalidate" in session.talk("a", ("PING",))
    finally:
        session.close()


def _tracked_then_emptied(proc, primary_port: int | None) -> bytes:
    """A RESP3 tracking client's view when the whole dataset is replaced: by a full sync from a primary
    (REPLICAOF) or by DEBUG RELOAD (Redis's emptyData: a null invalidation)."""
    session = Session(proc.port)
    try:
        session.talk(session.open("a"), ("CLIENT", "TRACKING", "ON"), ("GET", "k"))
        if primary_port is None:
            session.talk("admin", ("DEBUG", "RELOAD"))
        else:
            session.talk("admin", ("REPLICAOF", "127.0.0.1", str(primary_port)))
        deadline = time.monotonic() + 10
        seen = b""
        while b"invalidate" not in seen and time.monotonic() < deadline:
            seen += session.listen("a", timeout=0.2)
        return seen
    finally:
        session.talk("admin", ("REPLICAOF", "NO", "ONE"))
        session.close()


def test_a_full_sync_or_reload_invalidates_every_cache(pair):
    assert [_tracked_then_emptied(proc, None) for proc in pair] == [b">2\r\n$10\r\ninvalidate\r\n_\r\n"] * 2
    primaries = [start_millrace(), start_redis()]
    try:
        seen = [_tracked_then_emptied(proc, primary.port) for proc, primary in zip(pair, primaries, strict=True)]
    finally:
        for primary in primaries:
            primary.stop()
    assert seen == [b">2\r\n$10\r\ninvalidate\r\n_\r\n"] * 2


def test_flush_and_swapdb(pair):
    def scenario(s: Session, log: list) -> None:
        a, w = s.open("a"), s.open("w", 2)
        log.append(s.talk(a, ("CLIENT", "TRACKING", "ON", "NOLOOP"), ("GET", "k")))
        log.append((s.talk(w, ("SWAPDB", "0", "1")), s.talk(a), s.info(*TRACKING_INFO)))  # SWAPDB: nothing
        log.append((s.talk(w, ("FLUSHDB",)), s.talk(a), s.info(*TRACKING_INFO)))  # null to all, table emptied
        log.append((s.talk(w, ("FLUSHALL",)), s.talk(a)))  # even when nothing was tracked
        log.append(s.talk(a, ("FLUSHDB",)))  # own synchronous flush (NOLOOP or not): before its reply
        log.append(s.talk(a, ("FLUSHALL", "SYNC")))
        log.append(s.talk(a, ("FLUSHDB", "ASYNC"), ("FLUSHALL", "ASYNC")))  # asynchronous: after
        log.append(s.talk(a, ("CLIENT", "TRACKING", "ON"), ("GET", "d"), ("MULTI",), ("SET", "d", "1"), ("FLUSHDB",), ("PING",), ("EXEC",)))

    both(pair, scenario)


def test_expiry_invalidates(pair):
    def scenario(s: Session, log: list) -> None:
        a, w = s.open("a"), s.open("w", 2)
        s.talk(a, ("CLIENT", "TRACKING", "ON"))
        log.append(s.talk(w, ("SET", "e", "x", "PX", "200")) + s.talk(a, ("GET", "e")))
        time.sleep(0.6)  # expired by the server's own expiry cycle
        log.append((s.listen("a"), s.info("tracking_total_keys")))
        s.talk(w, ("DEBUG", "SET-ACTIVE-EXPIRE", "0"))
        try:
            for reader in ("a", "w"):  # found expired by the tracking client itself, then by another
                s.talk(w, ("SET", "e", "x", "PX", "100"))
                s.talk(a, ("GET", "e"))
                time.sleep(0.3)
                log.append((s.talk(reader, ("GET", "e")), s.talk(a)))
            s.talk(w, ("SET", "e", "x", "PX", "100"))
            s.talk(a, ("GET", "e"))
            time.sleep(0.3)
            log.append(s.talk(a, ("SET", "e", "y")))  # own write over an expired key: one invalidation
        finally:
            s.talk(w, ("DEBUG", "SET-ACTIVE-EXPIRE", "1"))

    both(pair, scenario)


def test_optin_optout_caching(pair):
    def scenario(s: Session, log: list) -> None:
        a, w = s.open("a"), s.open("w", 2)

        def changed(*keys: str) -> None:
            log.append((s.talk(w, ("MSET", *(x for k in keys for x in (k, "1")))), s.talk(a)))

        log.append(s.talk(a, ("CLIENT", "TRACKING", "ON", "OPTIN"), ("GET", "o1"), ("CLIENT", "CACHING", "YES"), ("CLIENT", "GETNAME"), ("GET", "o2"), ("GET", "o3")))
        changed("o1", "o2", "o3")
        log.append(s.talk(a, ("CLIENT", "CACHING", "YES"), ("PING",), ("CLIENT", "TRACKINGINFO"), ("GET", "o4")))
        changed("o4")
        log.append(s.talk(a, ("CLIENT", "CACHING", "YES"), ("MULTI",), ("GET", "o5"), ("GET", "o6"), ("EXEC",), ("GET", "o7")))
        changed("o5", "o6", "o7")
        log.append(s.talk(a, ("MULTI",), ("CLIENT", "CACHING", "YES"), ("GET", "o8"), ("EXEC",), ("GET", "o9")))
        changed("o8", "o9")
        log.append(s.talk(a, ("CLIENT", "CACHING", "YES"), ("NOSUCH",), ("CLIENT", "TRACKINGINFO")))
        log.append(s.talk(a, ("CLIENT", "CACHING", "YES"), ("CLIENT", "NOSUCH"), ("CLIENT", "TRACKINGINFO")))
        log.append(s.talk(a, ("CLIENT", "CACHING", "YES"), ("GET",), ("CLIENT", "TRACKINGINFO")))
        log.append(s.talk(a, ("CLIENT", "TRACKING", "OFF"), ("CLIENT", "TRACKING", "ON", "OPTOUT"), ("GET", "p1"), ("CLIENT", "CACHING", "NO"), ("GET", "p2"), ("GET", "p3")))
        changed("p1", "p2", "p3")
        log.append(s.info(*TRACKING_INFO))

    both(pair, scenario)


def test_noloop(pair):
    def scenario(s: Session, log: list) -> None:
        a, w = s.open("a"), s.open("w", 2)
        log.append(s.talk(a, ("CLIENT", "TRACKING", "ON", "NOLOOP"), ("GET", "n"), ("SET", "n", "1"), ("GET", "n")))
        log.append(s.info(*TRACKING_INFO))  # its own write forgot the key without telling it
        log.append((s.talk(w, ("SET", "n", "2")), s.talk(a)))

    both(pair, scenario)


def test_bcast(pair):
    def scenario(s: Session, log: list) -> None:
        b, w = s.open("b"), s.open("w", 2)
        log.append(s.talk(b, ("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "u:", "PREFIX", "v:"), ("GET", "u:x")))
        log.append(s.info(*TRACKING_INFO))  # BCAST remembers nothing
        # one message per prefix and loop turn, its keys in order, each once
        log.append((s.talk(w, ("MSET", "u:2", "1", "u:1", "1", "v:1", "1", "x", "1"), ("SET", "u:1", "2"), ("SET", "u:0", "2")), s.talk(b)))
        log.append(s.talk(b, ("SET", "u:9", "1"), ("PING",)) + s.talk(b))  # its own change, after the replies of that turn
        log.append(s.talk(b, ("CLIENT", "TRACKING", "ON", "BCAST", "NOLOOP", "PREFIX", "z:"), ("SET", "u:9", "1"), ("MSET", "z:1", "1", "z:2", "2")))
        log.append((s.talk(w, ("SET", "z:1", "x")), s.talk(b)))
        log.append(s.talk(b, ("CLIENT", "TRACKING", "OFF"), ("CLIENT", "TRACKING", "ON", "BCAST")))  # every key
        log.append((s.talk(w, ("SET", "anything", "1"), ("FLUSHDB",)), s.talk(b), s.info(*TRACKING_INFO)))
        s.talk(b, ("CLIENT", "TRACKING", "OFF"))
        log.append(s.info(*TRACKING_INFO))

    both(pair, scenario)


def test_redirect(pair):
    def scenario(s: Session, log: list) -> None:
        r3, r2, c, d, w = s.open("r3"), s.open("r2", 2), s.open("c", 2), s.open("d"), s.open("w", 2)
        log.append(s.talk(c, ("CLIENT", "TRACKING", "ON", "REDIRECT", s.id_of("r3")), ("GET", "rk")))
        log.append(s.getredir(c))
        log.append((s.talk(w, ("SET", "rk", "1")), s.talk(r3), s.talk(c)))  # a RESP3 target: the push
        log.append((s.talk(w, ("FLUSHDB",)), s.talk(r3)))  # a RESP2 tracker's null, in the push
        log.append(s.talk(c, ("CLIENT", "TRACKING", "ON", "REDIRECT", s.id_of("r2")), ("GET", "rk")))
        log.append((s.talk(w, ("SET", "rk", "1")), s.talk(r2)))  # RESP2, not subscribed: nothing
        r2conn = s.conns["r2"]
        r2conn.send(encode_command("SUBSCRIBE", "__redis__:invalidate"))
        log.append(s.named(r2conn.read_raw(until=b":1\r\n")))
        s.talk(c, ("GET", "rk"))
        log.append((s.talk(w, ("SET", "rk", "2")), s.listen("r2")))  # a subscriber: a message
        log.append((s.talk(w, ("FLUSHDB",)), s.listen("r2")))
        log.append(s.talk(d, ("CLIENT", "TRACKING", "ON", "REDIRECT", s.id_of("d")), ("GET", "sk"), ("SET", "sk", "1"), ("GET", "sk")))
        log.append(s.getredir(d))
        log.append((s.talk(w, ("SET", "sk", "2")), s.talk(d)))

    both(pair, scenario)


def test_broken_redirect(pair):
    def scenario(s: Session, log: list) -> None:
        d, g, w = s.open("d"), s.open("g"), s.open("w", 2)
        flags = re.compile(rb"flags=(\S+) .* redir=(\S+) ")
        log.append(s.talk(d, ("CLIENT", "TRACKING", "ON", "REDIRECT", s.id_of("g")), ("GET", "bk")))
        s.conns.pop("g").close()
        time.sleep(0.2)
        log.append(s.named(b" ".join(flags.search(s.talk(d, ("CLIENT", "INFO"))).groups())))  # not yet known
        log.append(s.talk(d, ("CLIENT", "TRACKINGINFO")))
        log.append((s.talk(w, ("SET", "bk", "1")), s.talk(d)))  # the push, and the flag from now on
        log.append(s.named(b" ".join(flags.search(s.talk(d, ("CLIENT", "INFO"))).groups())))
        log.append(s.talk(d, ("CLIENT", "TRACKINGINFO"), ("GET", "bk"), ("SET", "bk", "2")))
        log.append((s.talk(w, ("FLUSHDB",)), s.talk(d)))
        del g

    both(pair, scenario)


def test_reset_and_disconnect(pair):
    def scenario(s: Session, log: list) -> None:
        a, b, w = s.open("a"), s.open("b"), s.open("w", 2)
        s.talk(a, ("CLIENT", "TRACKING", "ON"), ("GET", "x"))
        s.talk(b, ("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "y"))
        log.append(s.info(*TRACKING_INFO))
        conn = s.conns["a"]
        conn.send(encode_command("RESET"))
        log.append(conn.read_raw(until=b"RESET\r\n"))
        conn.call("CLIENT", "SETNAME", "a")  # RESET cleared the sentinel's name
        log.append(s.talk(a, ("CLIENT", "TRACKINGINFO"), ("CLIENT", "GETREDIR")))
        log.append(s.info(*TRACKING_INFO))
        log.append((s.talk(w, ("SET", "x", "1")), s.talk(a)))
        s.conns.pop("b").close()
        time.sleep(0.2)
        log.append(s.info(*TRACKING_INFO))

    both(pair, scenario)


def test_tracking_table_max_keys(pair):
    """Over tracking-table-max-keys, random tracked keys are invalidated until the table fits."""

    def scenario(s: Session, log: list) -> None:
        a = s.open("a")
        s.talk("admin", ("CONFIG", "SET", "tracking-table-max-keys", "2"))
        try:
            s.talk(a, ("CLIENT", "TRACKING", "ON"), ("MGET", "m1", "m2"))
            got = s.talk(a, ("GET", "m3")) + s.talk(a, ("PING",))
            log.append(got.count(b"invalidate"))
            log.append(re.sub(rb"\$2\r\nm\d", b"KEY", got[got.index(b">"):] if b">" in got else got))
            log.append(s.info("tracking_total_keys", "tracking_total_items"))
        finally:
            s.talk("admin", ("CONFIG", "SET", "tracking-table-max-keys", "1000000"))

    both(pair, scenario)


def test_a_lowered_tracking_table_max_keys_binds_on_an_idle_server(pair):
    """CONFIG SET lowering the limit: Redis's cron invalidates the excess without another tracked read."""

    def scenario(s: Session, log: list) -> None:
        a = s.open("a")
        try:
            s.talk(a, ("CLIENT", "TRACKING", "ON"), ("MGET", "n1", "n2", "n3", "n4", "n5"))
            s.talk("admin", ("CONFIG", "SET", "tracking-table-max-keys", "2"))
            time.sleep(0.5)
            log.append(s.talk(a, ("PING",)).count(b"invalidate"))
            log.append(s.info("tracking_total_keys"))
        finally:
            s.talk("admin", ("CONFIG", "SET", "tracking-table-max-keys", "1000000"))

    both(pair, scenario)


def test_redis_py_client_side_cache(pair):
    """redis-py's RESP3 client-side cache against Millrace: a cached read, another client's write, a fresh read
    (redis-py refuses to connect with a cache where CLIENT TRACKING fails)."""
    port = pair[0].port
    cached = redis.Redis(port=port, protocol=3, cache_config=CacheConfig(), socket_timeout=10)
    other = redis.Redis(port=port, socket_timeout=10)
    try:
        other.set("cached", "v1")
        assert cached.get("cached") == b"v1"
        assert cached.get("cached") == b"v1"
        assert cached.get_cache().size == 1
        other.set("cached", "v2")
        deadline = time.monotonic() + 5
        while cached.get("cached") != b"v2":
            assert time.monotonic() < deadline, "the cached value was never invalidated"
            time.sleep(0.02)
        assert int(other.info("clients")["tracking_clients"]) >= 1
    finally:
        cached.close()
        other.close()
