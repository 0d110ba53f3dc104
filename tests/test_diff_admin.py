"""Differential tests against Redis 8.2.3 for administration behaviour: the `timeout` idle close,
SLOWLOG's redaction and trimming, ACL LIST, and INFO's failed-authentication count. Every test
leaves both servers' configuration as it found it (the servers are shared by the module)."""

from __future__ import annotations

import re
import time

import pytest

from tests.rawclient import RawConn, encode_command
from tests.servers import millrace_and_redis


@pytest.fixture(scope="module")
def pair():
    """Millrace and Redis 8.2.3, in that order."""
    yield from millrace_and_redis()


def on_both(pair, steps) -> list[list]:
    """Each server's replies to `steps` on one connection of its own (repr: hiredis errors compare by text)."""
    out = []
    for proc in pair:
        conn = RawConn(proc.port)
        try:
            out.append([repr(conn.call(*args)) for args in steps])
        finally:
            conn.close()
    return out


# -- SLOWLOG ------------------------------------------------------------------------------------


def slowlog_after(port: int, commands: list[tuple]) -> tuple[list, list[list[bytes]]]:
    """`commands` logged from an empty slowlog (everything logged): their replies and the logged arguments, oldest first."""
    conn = RawConn(port)
    try:
        conn.call("CONFIG", "SET", "slowlog-log-slower-than", "0")
        conn.call("SLOWLOG", "RESET")
        replies = [repr(conn.call(*args)) for args in commands]
        conn.call("CONFIG", "SET", "slowlog-log-slower-than", "-1")
        return replies, [entry[3] for entry in reversed(conn.call("SLOWLOG", "GET", "-1"))]
    finally:
        conn.call("CONFIG", "SET", "slowlog-log-slower-than", "10000", "slowlog-max-len", "128", "requirepass", "")
        conn.close()


def monitored(port: int, commands: list[tuple]) -> list[bytes]:
    """MONITOR's lines for `commands`, without time and address: CONFIG is an admin command, never shown."""
    monitor, conn = RawConn(port), RawConn(port)
    try:
        monitor.call("MONITOR")
        for args in commands:
            conn.call(*args)
        conn.call("PING", "end")
        lines = []
        while not lines or b'"end"' not in lines[-1]:
            lines.append(monitor.read())
        return [re.sub(rb"^\d+\.\d+ \[(\d+) [^\]]+\]", rb"[\1]", line) for line in lines]
    finally:
        conn.call("CONFIG", "SET", "requirepass", "", "masterauth", "", "masteruser", "", "tls-key-file-pass", "", "tls-client-key-file-pass", "")
        monitor.close()
        conn.close()


def test_slowlog_redacts_sensitive_config_set_values_as_redis(pair):
    """Redis's CONFIG SET hides the value of every SENSITIVE_CONFIG pair, whatever the names' case,
    also in a call it refuses (an unknown, immutable or duplicate parameter), but not when the
    pairs are uneven (a syntax error, refused before any is looked at). MONITOR never shows CONFIG
    (an admin command), so its values need no hiding there."""
    commands = [("CONFIG", "SET", "masterauth", "topsecret"), ("CONFIG", "SET", "masteruser", "bob"),
                ("CONFIG", "SET", "maxclients", "1000", "requirepass", "pw2"), ("config", "set", "RequirePass", ""),
                ("CONFIG", "SET", "tls-key-file-pass", "k"), ("CONFIG", "SET", "TLS-CLIENT-KEY-FILE-PASS", "c"),
                ("CONFIG", "SET", "requirepass", "a", "REQUIREPASS", "b"), ("CONFIG", "SET", "nosuch", "1", "masterauth", "z"),
                ("CONFIG", "SET", "masteruser", "u", "daemonize", "yes", "requirepass", "q"),
                ("CONFIG", "SET", "requirepass", "a", "maxclients"), ("CONFIG", "GET", "requirepass"),
                ("CONFIG", "SET", "masterauth", "", "masteruser", "", "tls-key-file-pass", "", "tls-client-key-file-pass", "")]  # fmt: skip
    ours, theirs = (slowlog_after(proc.port, commands) for proc in pair)
    assert [b"CONFIG", b"SET", b"masterauth", b"(redacted)"] in theirs[1]  # the oracle does redact
    assert ours == theirs
    assert monitored(pair[0].port, commands) == monitored(pair[1].port, commands) == [b'[0] "PING" "end"']


SLOWLOG_TRIMS = {
    # the log on (threshold >= 0): the oldest entries go when CONFIG SET shortens it
    "on, shortened": [("CONFIG", "SET", "slowlog-max-len", "2")],
    # a threshold no command reaches keeps the log on: shortened at once too, the newest kept
    "on, nothing slow": [("CONFIG", "SET", "slowlog-log-slower-than", "100000000"), ("CONFIG", "SET", "slowlog-max-len", "2"),
                         ("SLOWLOG", "LEN"), ("PING",), ("SLOWLOG", "LEN")],
    # max-len 0: nothing logged, nothing dropped; then 3: trimmed to 3 as it is set
    "max-len 0": [("CONFIG", "SET", "slowlog-max-len", "0"), ("SLOWLOG", "LEN"), ("PING",), ("SLOWLOG", "LEN"),
                  ("CONFIG", "SET", "slowlog-max-len", "3"), ("SLOWLOG", "LEN")],
    # the log off (threshold -1): a shorter max-len waits until the log is on again
    "off, shortened": [("CONFIG", "SET", "slowlog-log-slower-than", "-1"), ("CONFIG", "SET", "slowlog-max-len", "2"), ("SLOWLOG", "LEN"),
                       ("CONFIG", "SET", "slowlog-max-len", "0"), ("SLOWLOG", "LEN"), ("CONFIG", "SET", "slowlog-max-len", "1"),
                       ("SLOWLOG", "LEN"), ("CONFIG", "SET", "slowlog-log-slower-than", "0"), ("SLOWLOG", "LEN")],
    # both in one CONFIG SET, the log turned on by it; and shortened inside MULTI
    "one call": [("CONFIG", "SET", "slowlog-log-slower-than", "-1"), ("CONFIG", "SET", "slowlog-max-len", "2", "slowlog-log-slower-than", "100000000"),
                 ("SLOWLOG", "LEN")],
    "multi": [("CONFIG", "SET", "slowlog-log-slower-than", "100000000"), ("MULTI",), ("CONFIG", "SET", "slowlog-max-len", "2"), ("SLOWLOG", "LEN"),
              ("EXEC",), ("SLOWLOG", "LEN")],
}  # fmt: skip


def slowlog_trimmed(port: int, steps: list[tuple]) -> tuple[list, list[list[bytes]]]:
    """Five PINGs logged, then `steps`: their replies and what the log holds, newest first."""
    conn = RawConn(port)
    try:
        conn.call("CONFIG", "SET", "slowlog-log-slower-than", "0", "slowlog-max-len", "128")
        conn.call("SLOWLOG", "RESET")
        for n in range(5):
            conn.call("PING", str(n))
        replies = [repr(conn.call(*args)) for args in steps]
        return replies, [entry[3] for entry in conn.call("SLOWLOG", "GET", "-1")]
    finally:
        conn.call("CONFIG", "SET", "slowlog-log-slower-than", "10000", "slowlog-max-len", "128")
        conn.call("SLOWLOG", "RESET")
        conn.close()


@pytest.mark.parametrize("case", SLOWLOG_TRIMS)
def test_slowlog_max_len_trims_as_redis(pair, case):
    """Redis's slowlogPushEntryIfNeeded runs after each command while the log is on (max-len > 0,
    threshold >= 0): it pushes a slow one and then drops the oldest entries past max-len. CONFIG
    SET slowlog-max-len itself cuts nothing while the log is off."""
    ours, theirs = (slowlog_trimmed(proc.port, SLOWLOG_TRIMS[case]) for proc in pair)
    assert ours == theirs


# -- ACL --------------------------------------------------------------------------------------


def test_acl_list_as_redis(pair):
    """Redis's ACLDescribeUser: flags (nopass among them, sanitize-payload after it), then the password's SHA-256."""
    steps = [("ACL", "LIST"), ("CONFIG", "SET", "requirepass", "pw"), ("ACL", "LIST"), ("CONFIG", "SET", "requirepass", "pässwörd"),
             ("ACL", "LIST"), ("CONFIG", "SET", "requirepass", ""), ("ACL", "LIST")]  # fmt: skip
    ours, theirs = on_both(pair, steps)
    assert ours == theirs


# -- INFO stats acl_access_denied_* ------------------------------------------------------------

ACL_DENIED = re.compile(r"^(acl_access_denied_\w+):(\d+)\r$", re.M)

AUTH_ATTEMPTS = [
    ("CONFIG", "SET", "requirepass", "pw"),
    ("AUTH", "bad"), ("AUTH", "default", "bad"), ("AUTH", "nobody", "pw"), ("HELLO", "3", "AUTH", "default", "bad"),
    ("HELLO", "2", "SETNAME", "x", "AUTH", "default", "bad"), ("AUTH", "a", "b", "c"), ("HELLO", "4", "AUTH", "default", "bad"),
    ("HELLO", "3", "AUTH", "default"), ("HELLO", "3", "AUTH", "default", "bad", "BOGUS"), ("AUTH", "pw"), ("AUTH", "default", "pw"),
    # (not inside MULTI: Redis 8.2.3 counts it there too, but leaves its error out of EXEC's array)
    ("CONFIG", "SET", "requirepass", ""),  # the default user is nopass: only another user name fails
    ("AUTH", "anything"), ("AUTH", "default", "anything"), ("AUTH", "nobody", "x"), ("HELLO", "3", "AUTH", "nobody", "x"),
    ("CONFIG", "RESETSTAT"),  # leaves them: Redis's resetServerStats does not touch server.acl_info
]  # fmt: skip


def denied_counts(port: int) -> list:
    """INFO's acl_access_denied_* lines, then each of AUTH_ATTEMPTS' replies and those lines after it."""
    conn, admin = RawConn(port), RawConn(port)
    try:
        seen = [ACL_DENIED.findall(admin.call("INFO", "stats").decode())]
        for args in AUTH_ATTEMPTS:
            reply = conn.call(*args)
            seen.append((args, repr(reply),
                         ACL_DENIED.findall(admin.call("INFO", "stats").decode())))
        return seen
    finally:
        admin.call("CONFIG", "SET", "requirepass", "")
        conn.close()
        admin.close()


def test_failed_authentications_are_counted_as_redis(pair):
    """Every failed AUTH (one or two arguments) and HELLO ... AUTH counts in acl_access_denied_auth; a
    syntax error, an unsupported protocol or AUTH <password> without one configured does not, and
    CONFIG RESETSTAT does not zero it. The other three stay 0: Millrace's one user may run everything."""
    ours, theirs = (denied_counts(proc.port) for proc in pair)
    first, last = dict(theirs[0]), dict(theirs[-1][2])
    assert int(last.pop("acl_access_denied_auth")) - int(first.pop("acl_access_denied_auth")) == 7
    assert first == last == {"acl_access_denied_cmd": "0", "acl_access_denied_key": "0", "acl_access_denied_channel": "0"}
    assert ours == theirs


# -- the `timeout` idle close (one wait for every case; last, as it changes the servers most) ----


def test_idle_timeout_keeps_subscribers_replicas_monitors_and_blocked_clients(pair):
    """Redis's clientsCronHandleTimeout closes an idle client unless it is a replica (or MONITOR), blocked,
    or subscribed (RESP2 or RESP3, channels or patterns): a quiet channel's subscriber stays. A client that
    unsubscribed from everything is an ordinary client again."""
    kinds = {
        "resp2 subscriber": [("SUBSCRIBE", "news")],
        "resp3 subscriber": [("HELLO", "3"), ("SUBSCRIBE", "news")],
        "pattern subscriber": [("PSUBSCRIBE", "n*")],
        "unsubscribed": [("SUBSCRIBE", "other"), ("UNSUBSCRIBE",)],
        "monitor": [("MONITOR",)],
        "blocked": [],
        "replica": [],
        "idle": [("PING",)],  # last: the others have been idle at least as long when it is closed
    }
    conns: list[dict[str, RawConn]] = []
    try:
        for proc in pair:
            mine = {}
            for kind, setup in kinds.items():
                conn = mine[kind] = RawConn(proc.port)
                for args in setup:
                    conn.call(*args)
                if kind == "blocked":
                    conn.send(encode_command("XREAD", "BLOCK", "0", "STREAMS", "idle-timeout-stream", "$"))
                elif kind == "replica":
                    conn.send(encode_command("PSYNC", "?", "-1"))
            conns.append(mine)
        for proc in pair:
            admin = RawConn(proc.port)
            assert admin.call("CONFIG", "SET", "timeout", "1") == b"OK"
            admin.close()
        deadline = time.monotonic() + 6
        for mine in conns:  # the one wait: until the idle client is closed (~2 s)
            assert mine["idle"].is_closed(timeout=max(0.1, deadline - time.monotonic()))
        closed = [{kind: conn.is_closed(timeout=0.05) for kind, conn in mine.items() if kind != "idle"} for mine in conns]
        receivers = []
        for proc in pair:
            publisher = RawConn(proc.port)
            receivers.append(publisher.call("PUBLISH", "news", "still here"))
            publisher.close()
    finally:
        for proc in pair:
            admin = RawConn(proc.port)
            admin.call("CONFIG", "SET", "timeout", "0")
            admin.close()
        for mine in conns:
            for conn in mine.values():
                conn.close()
    assert closed[1] == {"resp2 subscriber": False, "resp3 subscriber": False, "pattern subscriber": False, "unsubscribed": True,
                         "monitor": False, "blocked": False, "replica": False}  # fmt: skip
    assert closed[0] == closed[1]
    assert receivers == [3, 3]


MONITOR_SCRIPT = [
    ("SET", "k", "v"), ("MONITOR",), ("PING",), ("ECHO", "hi"), ("GET", "k"), ("SET", "k", "w"), ("XADD", "s", "*", "f", "v"),
    ("XRANGE", "s", "-", "+"), ("PUBLISH", "ch", "m"), ("MULTI",), ("GET", "k"), ("EXEC",), ("CLIENT", "GETNAME"),
    ("RESET",), ("GET", "k"), ("XLEN", "s"),
]  # fmt: skip


def monitor_session(port: int) -> list[bytes]:
    """What a client that turned MONITOR gets for its own commands, stamps and addresses masked."""
    conn = RawConn(port)
    conn.call("DEL", "k", "s")
    conn.send(b"".join(encode_command(*argv) for argv in MONITOR_SCRIPT))
    out = conn.read_raw(until=b":0\r\n", timeout=5.0)
    conn.close()
    out = re.sub(rb"\+\d+\.\d+ \[0 127\.0\.0\.1:\d+\]", b"+<ts> [0 <addr>]", out)
    return out.split(b"\r\n")


def test_a_monitor_sees_its_own_commands_and_may_not_touch_the_keyspace(pair):
    """Redis flags a monitor as a replica: reads, writes and PUBLISH get "Replica can't interact with the
    keyspace" (in MULTI too, before queueing); its other commands run and it sees their lines after their
    replies; RESET makes it an ordinary client again."""
    millrace, redis = pair
    ours, theirs = monitor_session(millrace.port), monitor_session(redis.port)
    assert ours == theirs
    assert theirs.count(b"-ERR Replica can't interact with the keyspace") == 6
    assert theirs[-4:] == [b"$1", b"v", b":0", b""]  # RESET: an ordinary client again
