"""A raw socket client for tests that must see exact bytes on the wire."""

from __future__ import annotations

import socket
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
