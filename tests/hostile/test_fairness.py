"""One client's big read does not monopolize the server: its commands run in bounded slices.

The issue: a single 256 KB write of `XRANGE s - +` over a 10,000-entry stream delayed another
client's PING by 30 s. Redis reads 16 KB of a client's requests per event and serves the other
clients' events between; Millrace runs a read's commands for a few milliseconds at a time. The
check is behavioural, not timed: a batch ends with `INCR done`, and another client's PING and
`GET done` sent right behind it come back while `done` is still unset, on Millrace as on Redis.
Times are the bench's (bench/suite_hardening.py).
"""

from __future__ import annotations

import socket
import threading
import time

import pytest

from tests.rawclient import RawConn, encode_command


def _fill(proc, entries: int) -> None:
    with proc.client() as client:
        client.delete("s", "done")
        pipe = client.pipeline(transaction=False)
        for i in range(entries):
            pipe.xadd("s", {"field": f"value-{i}"}, id=f"{i + 1}-0")
        pipe.execute()


def _drain(sock: socket.socket, stop: threading.Event) -> None:
    """Read and drop the big client's replies so its output never limits the server."""
    sock.settimeout(0.2)
    while not stop.is_set():
        try:
            if not sock.recv(1 << 20):
                return
        except TimeoutError:
            continue
        except OSError:
            return


def _interleaved(proc, commands: int) -> bool:
    """Is a second client served while one read's worth of XRANGEs is still running?"""
    big = socket.create_connection(("127.0.0.1", proc.port), timeout=30)
    other = socket.create_connection(("127.0.0.1", proc.port), timeout=30)
    stop = threading.Event()
    reader = threading.Thread(target=_drain, args=(big, stop))
    try:
        reader.start()
        big.sendall(encode_command("XRANGE", "s", "-", "+") * commands + encode_command("INCR", "done"))
        other.sendall(encode_command("PING") + encode_command("GET", "done"))
        data = b""
        while not data.endswith((b"$-1\r\n", b"\r\n1\r\n")):
            chunk = other.recv(1024)
            assert chunk, "closed"
            data += chunk
        return data == b"+PONG\r\n$-1\r\n"
    finally:
        with proc.client() as client:  # wait for the batch to end before the next case
            while client.get("done") is None:
                pass
        stop.set()
        reader.join()
        big.close()
        other.close()


def test_another_client_is_served_during_a_big_pipelined_read(servers):
    """2,000 XRANGEs of 200 entries in one 56 KB write: Redis reads it in 16 KB pieces; Millrace
    runs it in 5 ms slices. Both answer the other client before the batch's last command."""
    for proc in servers:
        _fill(proc, 200)
        assert _interleaved(proc, 2000), proc.name


def test_a_slice_ends_after_the_command_that_passes_its_time(servers):
    """Millrace only (Redis runs all of one 16 KB read at once): three XRANGEs of 10,000 entries,
    each longer than a slice, then INCR; the other client is served before the INCR."""
    millrace = servers[0]
    _fill(millrace, 10_000)
    assert _interleaved(millrace, 3)


# -- FLUSHALL / FLUSHDB: the old keys are freed a slice at a time (server/lazyfree.py) ----------------
# 200,000 one-entry streams took 0.15 s to free inside FLUSHALL, a stall for every other client;
# Redis 8 frees a flushed database in a background thread (FLUSHALL SYNC too, its caller waiting).


def _lazyfree(conn: RawConn) -> tuple[int, int]:
    """INFO's (lazyfree_pending_objects, lazyfreed_objects)."""
    fields = dict(line.split(":", 1) for line in conn.call("INFO", "memory").decode().split("\r\n") if ":" in line)
    return int(fields["lazyfree_pending_objects"]), int(fields["lazyfreed_objects"])


def _settled(conn: RawConn) -> tuple[int, int]:
    """The counters once nothing is pending (Redis's background thread, Millrace's slices)."""
    deadline = time.monotonic() + 30
    while (counters := _lazyfree(conn))[0] and time.monotonic() < deadline:
        time.sleep(0.01)
    return counters


def _fill_keys(conn: RawConn, streams: int, strings: int = 0) -> None:
    requests = [encode_command("XADD", f"s{i}", "*", "f", "v") for i in range(streams)]
    requests += [encode_command("SET", f"k{i}", "v", "EX", "1000") for i in range(strings)]
    for start in range(0, len(requests), 10_000):
        batch = requests[start:start + 10_000]
        conn.send(b"".join(batch))
        for _ in batch:
            conn.read()


def test_a_flushed_database_is_freed_after_the_reply(servers):
    """Millrace only: FLUSHALL ASYNC and an INFO in one write; the INFO, run right after the FLUSHALL,
    finds the keys still waiting to be freed (it found 0 pending when FLUSHALL freed them itself);
    later turns free them all."""
    conn = RawConn(servers[0].port)
    try:
        conn.call("FLUSHALL")
        _, freed = _settled(conn)
        _fill_keys(conn, 50_000, 1000)
        conn.send(encode_command("FLUSHALL", "ASYNC") + encode_command("INFO", "memory") + encode_command("DBSIZE"))
        assert conn.read() == b"OK"
        info = conn.read().decode()
        assert conn.read() == 0
        pending = int(info.split("lazyfree_pending_objects:")[1].split()[0])
        assert pending > 0, "the keys were freed inside FLUSHALL"
        assert _settled(conn) == (0, freed + 51_000)
    finally:
        conn.close()


@pytest.mark.parametrize("flush", [("FLUSHALL",), ("FLUSHALL", "SYNC"), ("FLUSHALL", "ASYNC"), ("FLUSHDB", "ASYNC"), ("FLUSHDB",)])
def test_flushed_keys_count_as_lazyfreed_as_redis8(servers, oracle_server, flush):
    """Redis 8.2 frees a flushed database in the background whatever the mode, counting its keys in
    lazyfreed_objects; Millrace frees them in slices and counts them the same."""
    grown = []
    for proc in (servers[0], oracle_server):
        conn = RawConn(proc.port)
        try:
            conn.call("FLUSHALL")
            _, before = _settled(conn)
            _fill_keys(conn, 300, 200)
            assert conn.call(*flush) == b"OK"
            pending, after = _settled(conn)
            grown.append((pending, after - before))
        finally:
            conn.close()
    assert grown[0] == grown[1] == (0, 500)


# -- SCAN 0 on a big keyspace: the snapshot is sorted in slices (storage/scan.py's ScanBuilder) ---------
# SCAN 0 over 500,000 keys held every other client for 510 ms (Redis: 0.2 ms): it sorted every key
# by hash inside the command. Now the caller waits while the sort goes on between other events.


def _readable(conn: RawConn) -> bool:
    import select

    return bool(select.select([conn.sock], [], [], 0)[0])


@pytest.fixture(scope="module")
def big_keyspace(servers):
    """Millrace with 150,000 keys in db 9 (more than SLICED_SCAN_KEYS); the db is emptied after."""
    conn = RawConn(servers[0].port)
    conn.call("SELECT", "9")
    requests = [encode_command("SET", f"key:{i}", "v") for i in range(150_000)]
    for start in range(0, len(requests), 10_000):
        conn.send(b"".join(requests[start:start + 10_000]))
        for _ in range(10_000):
            conn.read()
    yield servers[0]
    conn.call("FLUSHDB")
    conn.close()


def _scanner(proc) -> RawConn:
    conn = RawConn(proc.port)
    conn.call("SELECT", "9")
    return conn


def test_scan_0_on_a_big_keyspace_lets_others_run(big_keyspace):
    """Another client's PING, sent right after SCAN 0, is answered while the SCAN still waits for its
    snapshot (before, SCAN 0's reply was written before the PING was even read)."""
    scanner, bystander = _scanner(big_keyspace), RawConn(big_keyspace.port)
    try:
        scanner.send(encode_command("SCAN", "0", "COUNT", "100"))
        bystander.send(encode_command("PING"))
        assert bystander.read() == b"PONG"
        assert not _readable(scanner), "SCAN 0 answered before the other client's PING"
        cursor, keys = scanner.read()
        assert cursor != b"0" and keys
    finally:
        scanner.close()
        bystander.close()


def test_a_sliced_scan_returns_every_key_present_throughout(big_keyspace):
    """The SCAN guarantee over sliced snapshots: keys present for the whole iteration all come back,
    while other keys are deleted and added between the steps."""
    scanner, writer = _scanner(big_keyspace), _scanner(big_keyspace)
    try:
        doomed = [f"key:{i}".encode() for i in range(0, 150_000, 7)]
        deleted: set[bytes] = set()
        seen: set[bytes] = set()
        cursor, step = b"0", 0
        while True:
            cursor, keys = scanner.call("SCAN", cursor, "COUNT", "5000")
            seen.update(keys)
            batch = doomed[step * 1000:(step + 1) * 1000]
            if batch:  # churn between the steps
                writer.call("DEL", *batch)
                deleted.update(batch)
                writer.call("MSET", *[x for i in range(100) for x in (f"new:{step}:{i}", "v")])
            step += 1
            if cursor == b"0":
                break
        assert step > 10 and deleted
        assert {f"key:{i}".encode() for i in range(150_000)} - deleted <= seen
        assert all(key.startswith((b"key:", b"new:")) for key in seen)
    finally:
        scanner.close()
        writer.close()


def test_a_waiting_scan_is_not_a_blocked_client(big_keyspace):
    """Redis's SCAN never blocks: while Millrace's waits for its snapshot, INFO counts no blocked
    client, CLIENT LIST shows no `b`, CLIENT UNBLOCK answers 0, and the SCAN answers as usual."""
    scanner, admin = _scanner(big_keyspace), RawConn(big_keyspace.port)
    try:
        scanner_id = scanner.call("CLIENT", "ID")
        scanner.send(encode_command("SCAN", "0"))
        blocked = admin.call("INFO", "clients").decode().split("blocked_clients:")[1].split()[0]
        listed = admin.call("CLIENT", "LIST", "ID", str(scanner_id)).decode()
        unblocked = admin.call("CLIENT", "UNBLOCK", str(scanner_id), "ERROR")
        waited = not _readable(scanner)
        cursor, keys = scanner.read()
        assert waited, "SCAN answered before the checks ran: nothing was observed while it waited"
        assert (blocked, unblocked) == ("0", 0) and " flags=N " in listed
        assert cursor != b"0" and keys
    finally:
        scanner.close()
        admin.close()
