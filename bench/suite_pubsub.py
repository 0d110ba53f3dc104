"""Pub/Sub: PUBLISH throughput with 1 and with 50 subscribers reading every message.

redis-benchmark (50 clients, -P 16) sends `PUBLISH ch <16 bytes>` while the
subscribers, connected to each server for the whole row, read and drop what
arrives (one thread each: recv releases the GIL). Each message goes to every
subscriber, so with 50 of them a server writes 50 messages per request.
"""

from __future__ import annotations

import contextlib
import socket
import threading

from .harness import Env, Row, Target

SUITE = "pubsub"
CHANNEL = "bench:ch"


class Subscribers:
    """`count` connections SUBSCRIBEd to the channel, each drained by its own thread."""

    def __init__(self, port: int, count: int) -> None:
        self.socks = []
        self.received = [0] * count
        for index in range(count):
            sock = socket.create_connection(("127.0.0.1", port))
            sock.sendall(b"SUBSCRIBE %s\r\n" % CHANNEL.encode())
            self.socks.append(sock)
            threading.Thread(target=self._drain, args=(index, sock), daemon=True).start()

    def _drain(self, index: int, sock: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := sock.recv(1 << 20):
                self.received[index] += len(data)

    def close(self) -> None:
        for sock in self.socks:
            sock.close()


def run(env: Env) -> list[Row]:
    rows: list[Row] = []
    requests = env.pick(500_000, 40_000)
    with contextlib.ExitStack() as stack:
        servers = {kind: stack.enter_context(env.server(kind)) for kind in env.kinds("redis", "millrace")}
        for count in (1, 50):
            subscribers = {kind: Subscribers(server.port, count) for kind, server in servers.items()}
            try:
                row = Row(SUITE, f"PUBLISH to {count} subscriber{'s' if count > 1 else ''} -c 50 -P 16", "req/s",
                          target=Target("ratio_min", 0.3))
                env.benchmark_row(row, servers, ("PUBLISH", CHANNEL, "0123456789abcdef"), pipeline=16, requests=requests)
                for kind, subs in subscribers.items():
                    row.extra.setdefault(kind, {})["bytes_read_by_subscribers"] = sum(subs.received)
                rows.append(row)
            finally:
                for subs in subscribers.values():
                    subs.close()
    return rows
