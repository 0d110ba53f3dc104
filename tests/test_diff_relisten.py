"""CONFIG SET port / bind against Redis 8.2.3: the server listens anew at once (connections already made
stay), refuses an address it cannot bind with Redis's error and goes on listening where it did, and
with port 0 listens on no TCP port."""

from __future__ import annotations

import socket

from tests.rawclient import RawConn
from tests.servers import free_port, on_each


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
    found = on_each(story)
    assert found["millrace"] == found["redis"]
    assert dict(found["millrace"])["new port"] == "b'PONG'" and dict(found["millrace"])["old port"] == "refused"


def rebinds(server) -> list:
    """Redis closes every listener before it binds anew: `*` over 127.0.0.1, port and bind in one SET;
    an address given twice cannot be bound twice."""
    admin = RawConn(server.port)
    moved = free_port()
    out = [
        ("star", admin.call("CONFIG", "SET", "bind", "*")),
        ("star answers", answers(server.port)),
        ("twice", str(admin.call("CONFIG", "SET", "bind", "127.0.0.1 127.0.0.1"))),
        ("twice, one optional", str(admin.call("CONFIG", "SET", "bind", "127.0.0.1 -127.0.0.1"))),
        ("bind", admin.call("CONFIG", "GET", "bind")),
        ("port and bind", admin.call("CONFIG", "SET", "port", str(moved), "bind", "127.0.0.1")),
        ("moved answers", answers(moved)),
    ]
    server.port = moved  # (stop() talks to it there)
    return out


def test_listeners_closed_before_binding_anew_as_redis():
    found = on_each(rebinds)
    assert found["millrace"] == found["redis"]
    assert dict(found["millrace"])["moved answers"] == "b'PONG'"


def together(server) -> list:
    """Redis sets every value of a CONFIG SET before it applies any: the port is bound at the new addresses."""
    admin = RawConn(server.port)
    busy = socket.socket(socket.AF_INET6)  # the new port, taken on ::1 only (one of the old addresses)
    busy.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    busy.bind(("::1", 0))
    busy.listen()
    try:
        taken = busy.getsockname()[1]
        out = [("unbindable", str(admin.call("CONFIG", "SET", "port", str(free_port()), "bind", "10.255.255.1")))]
        out.append(("port taken on ::1 only", admin.call("CONFIG", "SET", "port", str(taken), "bind", "127.0.0.1")))
        if out[-1][1] == b"OK":
            server.port = taken
        out.append(("answers", answers(server.port)))
    finally:
        busy.close()
    return out


def test_port_and_bind_applied_together_as_redis():
    found = on_each(together)
    assert found["millrace"] == found["redis"]
