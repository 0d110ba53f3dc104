"""The normal class's client-output-buffer-limit binds a client before AUTH too (issue 25 review).

Redis 8.2's checkClientOutputBufferLimits first closes a client that must authenticate once more
than 1 KB of replies is held for it (CVE-2025-21605), and when that rule does not fire it goes on
to the client's class limits, as for anyone. Millrace skipped the class limits before AUTH. Where
the two rules differ (a limit under what the unauthenticated rule lets pile up) the client that
floods without reading must be dropped all the same, by either server.
"""

from __future__ import annotations

import re
import time
from collections import deque
from types import SimpleNamespace

import pytest

from server import output_limits
from tests.hostile import test_output_limits
from tests.hostile.test_output_limits import CLOSING, read_until_closed, small_buffers_socket
from tests.rawclient import RawConn, encode_command

# Redis 8.2.3 and Millrace, and the limits put back after each test: test_output_limits's fixtures.
servers = test_output_limits.servers
reset = test_output_limits.reset


class _Transport:
    def __init__(self, size: int) -> None:
        self.size = size

    def get_write_buffer_size(self) -> int:
        return self.size


@pytest.mark.parametrize("authenticated", [False, True])
def test_after_write_applies_the_normal_class_before_auth_too(authenticated, monkeypatch):
    """The decision itself, for held sizes around both rules: closed when the unauthenticated rule
    or the normal class's hard or soft limit says so, authenticated or not (the first rule only
    before AUTH)."""
    closed = []
    monkeypatch.setattr(output_limits, "close", lambda client, server: closed.append(client))
    unauth_edge = output_limits.REPLY_CHUNK_BYTES + output_limits.UNAUTH_LIMIT
    for limits in [None, (700, 0, 0), (0, 700, 0), (50_000, 0, 0)]:
        for size in [0, 699, 700, 5000, unauth_edge, unauth_edge + 1, 60_000]:
            client = SimpleNamespace(
                authenticated=authenticated, transport=_Transport(size), output=[], replica=None, channels={}, patterns={}, shard_channels={},
                obuf_soft_since=0.0, pending=deque(), close_after_reply=False,
            )
            server = SimpleNamespace(normal_output_limits=limits, stats={})
            closed.clear()
            output_limits.after_write(client, server)
            if limits is not None and limits[1]:  # a soft limit: only a second look, past its seconds, closes
                client.obuf_soft_since -= 1
                output_limits.after_write(client, server)
            hard, soft = (limits or (0, 0, 0))[:2]
            expected = (not authenticated and size > unauth_edge) or bool(hard and size >= hard) or bool(soft and size >= soft)
            assert bool(closed) == expected, (limits, size)


def _error_replies(admin: RawConn) -> int:
    stats = admin.call("INFO", "stats").decode()
    return int(stats.split("total_error_replies:")[1].split("\r\n")[0])


def _flood_until_held(sock, admin: RawConn, client_id: int, at_least: int) -> bool:
    """PINGs before AUTH, not read, until the server holds at least `at_least` bytes of replies
    for the client (its omem) or closes it: True if it was closed meanwhile. Each batch is answered
    (its NOAUTH errors counted) before the next: 100 PINGs (3.4 KB of replies) while nothing is
    held, 20 after, so what is held grows by less than the unauthenticated rule's 17 KB at a time."""
    answered = _error_replies(admin)
    for _ in range(20_000):
        line = admin.call("CLIENT", "LIST", "ID", client_id)
        if not line.strip():
            return True
        held = int(re.search(rb" omem=(\d+)", line).group(1))
        if held >= at_least:
            return False
        batch = 20 if held else 100
        try:
            sock.sendall(encode_command("PING") * batch)
        except OSError:
            return True
        answered += batch
        deadline = time.monotonic() + 5
        while _error_replies(admin) < answered:
            if not admin.call("CLIENT", "LIST", "ID", client_id).strip():
                return True
            assert time.monotonic() < deadline, "the server stopped answering"
    raise AssertionError("the replies never backed up")


def test_an_unauthenticated_flood_past_the_normal_soft_limit_is_closed(servers):
    """`normal 0 700 1`: replies pile up for a client before AUTH until more than 700 bytes (but
    less than the unauthenticated rule's 17 KB in Millrace) are held; then it stops. Redis closes
    it at once (its unauthenticated rule counts a whole 16 KB reply block); Millrace, by the soft
    limit once its second is over. Counted and logged either way."""
    for proc in servers:
        admin = RawConn(proc.port)
        assert admin.call("CONFIG", "SET", "requirepass", "pw") == b"OK"
        assert admin.call("AUTH", "pw") == b"OK"
        assert admin.call("CONFIG", "SET", "client-output-buffer-limit", "normal 0 700 1") == b"OK"
        me = admin.call("CLIENT", "ID")
        before, log_before = limit_disconnections_pw(admin), proc.read_log().count(CLOSING)
        sock = small_buffers_socket(proc.port)
        try:
            deadline = time.monotonic() + 5
            while True:  # the flooder's id: the one other client
                ids = [int(i) for i in re.findall(rb"id=(\d+)", admin.call("CLIENT", "LIST")) if int(i) != me]
                if ids or time.monotonic() > deadline:
                    break
            closed = _flood_until_held(sock, admin, ids[0], 701)
            if not closed:
                time.sleep(2.5)  # past the soft limit's second (Redis counts whole seconds)
                closed = not admin.call("CLIENT", "LIST", "ID", ids[0]).strip()
            assert closed, proc.name
            _, gone = read_until_closed(sock, 1 << 30, timeout=5)
            assert gone, proc.name
        finally:
            sock.close()
        assert limit_disconnections_pw(admin) == before + 1, proc.name
        assert proc.read_log().count(CLOSING) == log_before + 1, proc.name
        admin.close()


def limit_disconnections_pw(admin: RawConn) -> int:
    stats = admin.call("INFO", "stats").decode()
    return int(stats.split("client_output_buffer_limit_disconnections:")[1].split("\r\n")[0])


def test_an_unauthenticated_flood_with_a_normal_hard_limit_is_closed_once(servers):
    """`normal 1mb 0 0` and a password: a flood before AUTH is closed (the unauthenticated rule
    fires first), counted once and logged once, on both servers."""
    for proc in servers:
        with proc.client() as client:
            client.config_set("client-output-buffer-limit", "normal 1mb 0 0")
            client.config_set("requirepass", "pw")
        admin = RawConn(proc.port)
        admin.call("AUTH", "pw")
        before = limit_disconnections_pw(admin)
        sock = small_buffers_socket(proc.port)
        try:
            try:
                sock.sendall(encode_command("PING") * 50_000)
            except (BrokenPipeError, ConnectionResetError):
                pass
            _, closed = read_until_closed(sock, 1 << 30, timeout=5)
        finally:
            sock.close()
        assert closed, proc.name
        assert limit_disconnections_pw(admin) == before + 1, proc.name
        admin.close()
