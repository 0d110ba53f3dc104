"""Start-up order: the port is bound first, and no client is answered from data not loaded yet.

The crash test met a first `XRANGE - +` after a restart that found nothing while
XLEN, asked next, found 40k entries: under load, the loop had accepted and
served the client during an await between binding and loading. The machine's
slowness is played here by a pause after each bind. A client served before the
load is done gets LOADING, as from Redis (test_diff_loading.py).
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import redis

from server.client import LoadingClient
from server.main import build_server, serve
from tests.servers import free_port, start_millrace


def test_clients_never_see_the_data_before_it_is_loaded(tmp_path):
    port = free_port()
    server = build_server(["--port", str(port), "--dir", str(tmp_path), "--bind", "127.0.0.1"])
    bound, loading = threading.Event(), threading.Event()

    def slow_load() -> None:
        loading.set()
        time.sleep(0.5)  # a long load: the loop is busy, clients wait in the backlog
        server.execute(LoadingClient(server), [b"SET", b"loaded", b"yes"])

    server.startup_hooks.append(slow_load)
    replies: dict[str, bytes | str] = {}

    def client(name: str, start: threading.Event) -> None:
        start.wait(10)
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                sock.sendall(b"*1\r\n$6\r\nDBSIZE\r\n")
                replies[name] = sock.recv(64)
        except OSError as exc:
            replies[name] = repr(exc)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        create_server = loop.create_server

        async def slow_create_server(*args, **kwargs):
            listener = await create_server(*args, **kwargs)
            bound.set()
            await asyncio.sleep(0.5)  # a busy machine: the loop runs between binding and loading
            return listener

        loop.create_server = slow_create_server
        loop.call_later(3, lambda: server.shutdown())
        await serve(server)

    threads = [threading.Thread(target=client, args=args, daemon=True) for args in (("after bind", bound), ("while loading", loading))]
    for thread in threads:
        thread.start()
    asyncio.run(main())
    for thread in threads:
        thread.join(10)
    assert replies == {"after bind": b"-LOADING Redis is loading the dataset in memory\r\n", "while loading": b":1\r\n"}


def test_redis_wildcards_bind_every_address():
    """`bind * ::*` (Redis's wildcards for every IPv4 and every IPv6 address) serves loopback on both."""
    server = start_millrace("--bind", "* ::*")
    try:
        with server.client() as client:
            assert client.config_get("bind") == {"bind": "* ::*"}
        with redis.Redis(host="::1", port=server.port) as client:
            assert client.ping()
    finally:
        server.stop()
