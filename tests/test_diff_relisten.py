"""CONFIG SET port / bind against Redis 8.2.3: the server listens anew at once (connections already made
stay), refuses an address it cannot bind with Redis's error and goes on listening where it did, and
with port 0 listens on no TCP port."""

from __future__ import annotations

import socket

from tests.rawclient import RawConn
from tests.servers import free_port, require_redis, start_millrace, start_redis


def answers(port: int) -> str:
    try:
        conn = RawConn(port, timeout=5)
    except ConnectionRefusedError:
        return "refused"
    try:
        return str(conn.call("PING"))
    finally:
        conn.sock.close()


def story(server) -> list:
    admin = RawConn(server.port)
    first = server.port
    bind = admin.call("CONFIG", "GET", "bind")[1]
    busy = socket.create_server(("127.0.0.1", 0))
    out = []
    try:
        out.append(("port taken", str(admin.call("CONFIG", "SET", "port", str(busy.getsockname()[1])))))
        out.append(("still on the first port", answers(first)))
        out.append(("bind unbindable", str(admin.call("CONFIG", "SET", "bind", "10.255.255.1"))))
        out.append(("bind kept", admin.call("CONFIG", "GET", "bind")[1] == bind))
        out.append(("bind optional", admin.call("CONFIG", "SET", "bind", "-10.255.255.1 127.0.0.1")))
        moved = free_port()
        out.append(("port", admin.call("CONFIG", "SET", "port", str(moved))))
        out.append(("this connection stays", admin.call("PING")))
        out.append(("old port", answers(first)))
        out.append(("new port", answers(moved)))
        out.append(("port 0", admin.call("CONFIG", "SET", "port", "0")))
        out.append(("no port", answers(moved)))
        back = free_port()
        out.append(("port again", admin.call("CONFIG", "SET", "port", str(back))))
        out.append(("listening again", answers(back)))
        server.port = back  # (stop() talks to it there)
    finally:
        busy.close()
    return out


def test_config_set_port_and_bind_as_redis():
    require_redis()
    found = {}
    for kind, start in (("redis", start_redis), ("millrace", start_millrace)):
        server = start()
        try:
            found[kind] = story(server)
        finally:
            server.stop()
    assert found["millrace"] == found["redis"]
    assert dict(found["millrace"])["new port"] == "b'PONG'" and dict(found["millrace"])["old port"] == "refused"
