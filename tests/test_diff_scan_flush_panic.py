"""What a review of the sliced SCAN, the lazy FLUSHALL and propagation-error-behavior found, each
failing on the first versions: an older sliced snapshot installed over a newer one (a key skipped),
keys a waiting SCAN expired left unpropagated, a waiting SCAN shown and unblockable as a blocked
client, lazyfreed_objects counting a synchronous flush and surviving CONFIG RESETSTAT, and a failed
command inside an AOF's MULTI/EXEC not panicking. Differential with Redis 8.2.3 where it applies."""

from __future__ import annotations

import glob
import os
import time

import pytest

from tests.rawclient import RawConn, encode_command
from tests.servers import on_each, require_redis, start_millrace, start_redis

BIG = 100_000  # more keys than SLICED_SCAN_KEYS (65,536): SCAN 0 waits for a sliced snapshot


def _fill(conn: RawConn, n: int, prefix: str = "k") -> None:
    requests = []
    for start in range(0, n, 1000):
        args = ["MSET"]
        for i in range(start, min(n, start + 1000)):
            args += [f"{prefix}{i}", "v"]
        requests.append(encode_command(*args))
    for start in range(0, len(requests), 50):
        batch = requests[start:start + 50]
        conn.send(b"".join(batch))
        for _ in batch:
            assert conn.read() == b"OK"


def _field(conn: RawConn, section: str, name: str) -> str:
    text = conn.call("INFO", section).decode()
    return text.split(f"\r\n{name}:", 1)[1].split("\r\n", 1)[0]


def _settled_lazyfreed(conn: RawConn) -> int:
    deadline = time.monotonic() + 10
    while int(_field(conn, "memory", "lazyfree_pending_objects")) and time.monotonic() < deadline:
        time.sleep(0.01)
    return int(_field(conn, "memory", "lazyfreed_objects"))


def test_an_older_sliced_snapshot_does_not_replace_a_newer_one():
    """A's SCAN 0 waits for its sliced snapshot (taken at tA). Then a key is added, and B's SCAN 0 runs
    in MULTI/EXEC (a synchronous snapshot at tB, with the key). A's snapshot, finished later, replaces
    B's as the database's scan_index, and B's later steps walk it: B never returns the key, although
    it existed for B's whole iteration (the SCAN guarantee). Millrace only (Redis has no snapshot)."""
    proc = start_millrace("--save", "")
    conns = []
    try:
        filler, a, b, writer = (RawConn(proc.port, timeout=60) for _ in range(4))
        conns = [filler, a, b, writer]
        _fill(filler, 300_000)
        a.send(encode_command("SCAN", "0", "COUNT", "10"))
        time.sleep(0.005)
        assert writer.call("SET", "brand-new-key", "v") == b"OK"
        assert b.call("MULTI") == b"OK" and b.call("SCAN", "0", "COUNT", "10") == b"QUEUED"
        cursor, keys = b.call("EXEC")[0]
        a.read()  # A's reply: its (older) snapshot is now the database's
        seen = set(keys)
        while cursor != b"0":
            cursor, keys = b.call("SCAN", cursor, "COUNT", "1000")
            seen.update(keys)
        assert b"brand-new-key" in seen
    finally:
        for conn in conns:
            conn.close()
        proc.stop()


def _expired_by_a_big_scan(proc) -> tuple[int, int]:
    """2,000 of BIG keys past their TTL (active expiry off), one SCAN over all: (expired_keys read
    from a client in db 1, `expired` events received) shortly after the SCAN's reply."""
    conn = RawConn(proc.port, timeout=60)
    sub = RawConn(proc.port)
    other = RawConn(proc.port)
    try:
        conn.call("DEBUG", "SET-ACTIVE-EXPIRE", "0")
        conn.call("CONFIG", "SET", "notify-keyspace-events", "Ex")
        _fill(conn, BIG)
        requests = [encode_command("PEXPIRE", f"k{i}", "1") for i in range(2000)]
        conn.send(b"".join(requests))
        for _ in requests:
            conn.read()
        time.sleep(0.05)
        sub.call("SUBSCRIBE", "__keyevent@0__:expired")
        other.call("SELECT", "1")
        cursor, keys = conn.call("SCAN", "0", "COUNT", str(BIG))  # (Redis may need a second step)
        found = set(keys)
        while cursor != b"0":
            cursor, keys = conn.call("SCAN", cursor, "COUNT", str(BIG))
            found.update(keys)
        assert len(found) == BIG - 2000
        time.sleep(0.3)
        expired = int(_field(other, "stats", "expired_keys"))
        events = 0
        sub.sock.settimeout(0.5)
        try:
            while True:
                sub.read()
                events += 1
        except OSError:
            pass
        return expired, events
    finally:
        for c in (conn, sub, other):
            c.close()


def test_keys_a_sliced_scan_expires_are_propagated_at_once():
    """The waiting SCAN's reply is computed in serve_ready (from the builder's callback), where no one
    calls propagate_expired: the keys its lookups removed get no DEL, no `expired` event and no
    expired_keys count until some later command runs in that database. Redis: all at once."""
    seen = on_each(_expired_by_a_big_scan, "--save", "", "--enable-debug-command", "yes")
    assert seen == {"millrace": (2000, 2000), "redis": (2000, 2000)}


def _scan_unblocked_with_error(proc):
    conn = RawConn(proc.port, timeout=60)
    scanner = RawConn(proc.port, timeout=60)
    try:
        _fill(conn, 300_000)
        scanner_id = scanner.call("CLIENT", "ID")
        scanner.send(encode_command("SCAN", "0", "COUNT", "10"))
        time.sleep(0.002)
        unblocked = conn.call("CLIENT", "UNBLOCK", str(scanner_id), "ERROR")
        reply = scanner.read()
        return unblocked, type(reply).__name__
    finally:
        conn.close()
        scanner.close()


def test_client_unblock_error_does_not_turn_a_scan_into_an_error():
    """SCAN never blocks in Redis: CLIENT UNBLOCK <id> ERROR answers 0 and the SCAN its keys. Millrace
    answers 1 and the SCAN gets `-UNBLOCKED client unblocked via CLIENT UNBLOCK`."""
    seen = on_each(_scan_unblocked_with_error, "--save", "")
    assert seen["millrace"][1] == "list"
    assert seen["millrace"] == seen["redis"] == (0, "list")


def _lazyfree_story(proc) -> list[int]:
    conn = RawConn(proc.port)
    try:
        story = []
        _fill(conn, 1000)
        conn.call("FLUSHALL")
        story.append(_settled_lazyfreed(conn))
        _fill(conn, 1000)
        conn.call("MULTI")
        conn.call("FLUSHALL")
        conn.call("EXEC")
        story.append(_settled_lazyfreed(conn))
        conn.call("CONFIG", "RESETSTAT")
        story.append(_settled_lazyfreed(conn))
        return story
    finally:
        conn.close()


def test_lazyfreed_objects_as_redis_in_multi_and_after_resetstat():
    """Redis 8.2.3 frees a FLUSHALL inside MULTI (a client that cannot block) synchronously, so
    lazyfreed_objects does not count it, and CONFIG RESETSTAT zeroes lazyfreed_objects
    (lazyfreeResetStats). Millrace: [1000, 2000, 2000]; Redis: [1000, 1000, 0]."""
    seen = on_each(_lazyfree_story, "--save", "")
    assert seen["redis"] == [1000, 1000, 0]
    assert seen["millrace"] == seen["redis"]


def _aof_with(start, commands):
    """Write `k` (a string), then append `commands` to the AOF; restart under propagation-error-behavior
    panic: 'panicked' or 'ran'."""
    proc = start("--appendonly", "yes", "--appendfsync", "always")
    directory = proc.dir
    conn = RawConn(proc.port)
    conn.call("SET", "k", "v")
    conn.close()
    proc.stop()
    incr = sorted(glob.glob(os.path.join(directory, "appendonlydir", "*incr*")))[-1]
    with open(incr, "ab") as handle:
        for command in commands:
            handle.write(encode_command(*command))
    args = ("--appendonly", "yes", "--propagation-error-behavior", "panic")
    try:
        again = start_millrace(*args, workdir=directory) if start is start_millrace else start_redis(*args, "--dir", directory)
    except RuntimeError as exc:
        assert "panicked" in str(exc)
        return "panicked"
    again.stop()
    return "ran"


@pytest.mark.parametrize("wrapped", [False, True], ids=["plain", "in-multi"])
def test_propagation_error_panic_covers_a_failed_command_inside_exec(wrapped):
    """An AOF whose MULTI/EXEC holds a failing command (XADD on a string): Redis's afterErrorReply runs
    for the inner error and panics ('after processing the command exec'); Millrace checks only the
    EXEC's own reply (an array) and loads on. The replica path (replica_link._apply) has the same gap."""
    require_redis()
    commands = [("XADD", "k", "*", "f", "v")]
    if wrapped:
        commands = [("MULTI",), *commands, ("SET", "z", "1"), ("EXEC",)]
    seen = {name: _aof_with(start, commands) for name, start in (("millrace", start_millrace), ("redis", start_redis))}
    assert seen == {"millrace": "panicked", "redis": "panicked"}
