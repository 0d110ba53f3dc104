"""A raw socket client for tests that must see exact bytes on the wire."""

from __future__ import annotations

import socket
import threading
import time

import hiredis


def encode_command(*args) -> bytes:
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg if isinstance(arg, bytes) else str(arg).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(parts)


class RawConn:
    """Send bytes, read replies parsed by hiredis (errors come back as values)."""

    def __init__(self, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.reader = hiredis.Reader(notEnoughData=Ellipsis)

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def call(self, *args):
        self.send(encode_command(*args))
        return self.read()

    def read(self):
        while True:
            reply = self.reader.gets()
            if reply is not Ellipsis:
                return reply
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("closed by server")
            self.reader.feed(data)

    def read_raw(self, until: bytes | None = None, timeout: float = 5.0) -> bytes:
        """Bytes as they arrive, until `until` is seen, the peer closes or timeout passes."""
        buf = b""
        deadline = time.monotonic() + timeout
        self.sock.settimeout(0.2)
        try:
            while time.monotonic() < deadline:
                try:
                    data = self.sock.recv(65536)
                except TimeoutError:
                    if until is None and buf:
                        break
                    continue
                if not data:
                    break
                buf += data
                if until is not None and until in buf:
                    break
        finally:
            self.sock.settimeout(10.0)
        return buf

    def is_closed(self, timeout: float = 5.0) -> bool:
        """True once the server has closed the connection (EOF or reset)."""
        self.sock.settimeout(timeout)
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    return True
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        self.sock.close()


INFO_STATS = encode_command("INFO", "stats")


class InputCounter:
    """How many bytes the server has read from its other clients, from INFO's total_net_input_bytes
    on a connection of its own (Redis and Millrace count a read as it happens, so each INFO counts
    itself; those requests are subtracted).

    It makes a test's reads certain without sleeping: `wait` returns once the server has read
    every byte sent on another connection, or that connection was closed.
    """

    def __init__(self, port: int, password: str | None = None) -> None:
        self.conn = RawConn(port)
        self.asked = 0
        if password is not None:
            self.conn.call("AUTH", password)
        self.base = self.others()

    def others(self) -> int:
        """Bytes read so far from all other connections."""
        self.conn.send(INFO_STATS)
        self.asked += 1
        text = self.conn.read().decode()
        return int(text.split("total_net_input_bytes:")[1].split("\r\n")[0]) - self.asked * len(INFO_STATS)

    def round_trip(self) -> None:
        """One more command answered: whatever the server decided in the loop turns before it
        (replies written, connections closed) has happened."""
        self.others()

    def wait(self, sock: socket.socket, sent: int, timeout: float = 10.0) -> tuple[bytes, bool]:
        """Wait until the server has read `sent` bytes from others since this counter started,
        or `sock` is closed; returns what arrived on `sock` meanwhile and whether it was closed."""
        deadline = time.monotonic() + timeout
        out = b""
        while True:
            got, closed = drain(sock)
            out += got
            if closed or self.others() - self.base >= sent:
                return out, closed
            if time.monotonic() > deadline:
                raise AssertionError(f"the server read {self.others() - self.base} of {sent} bytes and kept the connection open")
            time.sleep(0.001)

    def close(self) -> None:
        self.conn.close()


def drain(sock: socket.socket) -> tuple[bytes, bool]:
    """Everything already received on sock, without waiting; and whether the peer has closed."""
    out = b""
    sock.setblocking(False)
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return out, True
            out += chunk
    except BlockingIOError:
        return out, False
    except (ConnectionResetError, BrokenPipeError):
        return out, True
    finally:
        sock.setblocking(True)


_PROBING: dict[int, threading.Lock] = {}
_PROBING_GUARD = threading.Lock()


def probe(port: int, *chunks: bytes, password: str | None = None) -> tuple[bytes, bool]:
    """Send each chunk as a read of its own, and return all the server answered and whether it closed.

    No silence is taken for the end: before each next chunk the server has read the previous one
    (an InputCounter says so), and after the last, two more round trips on the counter's connection
    pass before the answer is collected, so replies and closes decided while reading are done.
    The counter counts every client's bytes, so probes of one server (from threads) take turns.
    `password`: the counter's own AUTH, when requirepass is set.
    """
    with _PROBING_GUARD:
        turn = _PROBING.setdefault(port, threading.Lock())
    with turn:
        return _probe(port, chunks, password)


def _probe(port: int, chunks: tuple[bytes, ...], password: str | None) -> tuple[bytes, bool]:
    counter = InputCounter(port, password)
    sock = socket.create_connection(("127.0.0.1", port))
    out, closed, sent = b"", False, 0
    try:
        for chunk in chunks:
            try:
                sock.sendall(chunk)
            except (ConnectionResetError, BrokenPipeError):
                got, _ = drain(sock)
                return out + got, True
            sent += len(chunk)
            got, closed = counter.wait(sock, sent)
            out += got
            if closed:
                return out, True
        counter.round_trip()
        counter.round_trip()
        got, closed = drain(sock)
        return out + got, closed
    finally:
        sock.close()
        counter.close()


def hits_and_misses(port: int, setup: list[tuple], commands: list[tuple]) -> list[tuple[int, int]]:
    """INFO's (keyspace_hits, keyspace_misses) after each of `commands`, on a flushed server where
    `setup` ran before CONFIG RESETSTAT."""
    conn = RawConn(port)
    try:
        conn.call("FLUSHALL")
        for args in setup:
            conn.call(*args)
        conn.call("CONFIG", "RESETSTAT")
        seen = []
        for args in commands:
            conn.call(*args)
            stats = dict(line.split(":", 1) for line in conn.call("INFO", "stats").decode().split("\r\n") if ":" in line)
            seen.append((int(stats["keyspace_hits"]), int(stats["keyspace_misses"])))
        return seen
    finally:
        conn.close()


def error_stats(port: int) -> tuple[int, int]:
    """INFO's total_error_replies and errorstat_ERR count."""
    conn = RawConn(port)
    try:
        stats, errors = conn.call("INFO", "stats").decode(), conn.call("INFO", "errorstats").decode()
    finally:
        conn.close()
    total = int(stats.split("total_error_replies:")[1].split("\r\n")[0])
    err = int(errors.split("errorstat_ERR:count=")[1].split("\r\n")[0]) if "errorstat_ERR:" in errors else 0
    return total, err
