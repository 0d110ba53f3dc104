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

from tests.rawclient import encode_command


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
