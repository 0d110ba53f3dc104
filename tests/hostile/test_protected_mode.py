"""Protected mode, and the switches that serve local clients only.

With `protected-mode yes` and no password, a client that reaches the server other than through the
loopback interface gets Redis's -DENIED text as it connects and is closed; `enable-debug-command
local` and `enable-protected-configs local` refuse such a client too. A client from another
address needs one on this host: the server listens on the loopback and on this host's outward
IPv4 address, and a client connecting to the latter is not local. Where the host has no such
address those cases are skipped; the decision itself is tested in process either way.
"""

from __future__ import annotations

import socket

import hiredis
import pytest

from server.config import Config
from server.default_user import DefaultUser
from server.protected import DENIED, denied, is_local
from tests.rawclient import RawConn
from tests.servers import DEBIAN_VERSION, require_redis, start_millrace, start_redis

SWITCHES = ("--protected-mode", "yes", "--enable-debug-command", "local", "--enable-protected-configs", "local")


def outside_address() -> str | None:
    """An IPv4 address of this host that is not loopback (the one its default route leaves by), if any."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # UDP: no packet is sent
        except OSError:
            return None
        address = probe.getsockname()[0]
    return None if is_local(address) or address == "0.0.0.0" else address


OUTSIDE = outside_address()


@pytest.fixture(scope="module")
def servers():
    """Millrace and Redis 7.0, listening on the loopback and, where there is one, the outward address."""
    require_redis(DEBIAN_VERSION)
    bind = ["127.0.0.1", *([OUTSIDE] if OUTSIDE else [])]
    procs = []
    try:
        procs.append(start_millrace("--bind", *bind, *SWITCHES))
        procs.append(start_redis("--bind", *bind, *SWITCHES, version=DEBIAN_VERSION))
        yield procs
    finally:
        for proc in procs:
            proc.stop()


def greeting(host: str, port: int, send: bytes = b"") -> tuple[bytes, bool]:
    """What the server says to a new connection from host (after `send`), and whether it closed it."""
    with socket.create_connection((host, port), timeout=10, source_address=(host, 0)) as sock:
        if send:
            sock.sendall(send)
        sock.settimeout(0.5)
        out = b""
        try:
            while chunk := sock.recv(65536):
                out += chunk
        except TimeoutError:
            return out, False
        except ConnectionResetError:
            pass
        return out, True


def call_from(host: str, port: int, *args):
    conn = RawConn(port)
    conn.sock.close()
    conn.sock = socket.create_connection((host, port), timeout=10, source_address=(host, 0))
    try:
        return conn.call(*args)
    finally:
        conn.close()


def both(servers, fn):
    return [fn(proc) for proc in servers]


needs_outside = pytest.mark.skipif(OUTSIDE is None, reason="this host has no address but loopback to connect from")


def test_loopback_client_is_served(servers):
    assert both(servers, lambda proc: greeting("127.0.0.1", proc.port, b"PING\r\n")) == [(b"+PONG\r\n", False)] * 2


@needs_outside
def test_outside_client_is_denied_as_redis_denies_it(servers):
    results = both(servers, lambda proc: greeting(OUTSIDE, proc.port))
    assert results == [(DENIED, True)] * 2


@needs_outside
def test_a_password_lets_outside_clients_in(servers):
    for proc in servers:
        assert call_from("127.0.0.1", proc.port, "CONFIG", "SET", "requirepass", "pw") == b"OK"
    try:
        ours, redis = both(servers, lambda proc: greeting(OUTSIDE, proc.port, b"PING\r\n"))
        assert ours == redis and ours[0].startswith(b"-NOAUTH") and not ours[1]
    finally:
        for proc in servers:
            conn = RawConn(proc.port)
            assert conn.call("AUTH", "pw") == b"OK" and conn.call("CONFIG", "SET", "requirepass", "") == b"OK"
            conn.close()


@needs_outside
def test_local_only_debug_and_protected_configs(servers):
    """protected-mode off: the outside client is served, but not DEBUG nor a protected config."""
    for proc in servers:
        assert call_from("127.0.0.1", proc.port, "CONFIG", "SET", "protected-mode", "no") == b"OK"
    try:
        for args in (("DEBUG", "HELP"), ("CONFIG", "SET", "dir", "{dir}")):
            def run(host, args=args):
                return both(servers, lambda proc: call_from(host, proc.port, *(a.format(dir=proc.dir) for a in args)))

            ours, redis = run(OUTSIDE)
            assert isinstance(ours, hiredis.ReplyError) and str(ours) == str(redis)
            assert not any(isinstance(reply, hiredis.ReplyError) for reply in run("127.0.0.1"))
    finally:
        for proc in servers:
            assert call_from("127.0.0.1", proc.port, "CONFIG", "SET", "protected-mode", "yes") == b"OK"


@pytest.mark.parametrize(
    ("host", "protected", "password", "refused"),
    [
        ("127.0.0.1", True, "", False),
        ("127.0.0.2", True, "", False),
        ("::1", True, "", False),
        (None, True, "", False),  # a Unix socket has no address
        ("192.0.2.2", True, "", True),
        ("10.0.0.1", True, "", True),
        ("::ffff:127.0.0.1", True, "", True),  # Redis reads the address as written
        ("2001:db8::1", True, "", True),
        ("192.0.2.2", False, "", False),
        ("192.0.2.2", True, "pw", False),
    ],
)
def test_decision(host, protected, password, refused):
    config = Config({"protected-mode": "yes" if protected else "no", "requirepass": password})
    user = DefaultUser()
    user.set_requirepass(password)
    assert denied(config, user, host) is refused
