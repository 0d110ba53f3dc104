"""syslog-enabled / syslog-ident / syslog-facility against Redis 8.2.3: both servers' lines reach the
local syslog socket in the same form (`<PRI>Mmm dd hh:mm:ss ident[pid]: message`), notice lines at
NOTICE of the facility. The test stands in for the syslog daemon: it binds /dev/log itself (and
skips where one is running)."""

from __future__ import annotations

import os
import re
import socket
import time

import pytest

from tests.servers import require_redis, start_millrace, start_redis

LINE = re.compile(r"<(\d+)>([A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d) ([^\[]+)\[(\d+)\]: (.*)", re.S)


@pytest.fixture
def syslog_socket():
    if os.path.exists("/dev/log"):
        pytest.skip("a syslog daemon owns /dev/log here")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        sock.bind("/dev/log")
    except OSError as exc:
        pytest.skip(f"cannot bind /dev/log: {exc}")
    sock.settimeout(0.2)
    try:
        yield sock
    finally:
        sock.close()
        os.unlink("/dev/log")


def lines(sock, seconds: float = 1.0) -> list[str]:
    out, deadline = [], time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            out.append(sock.recv(65536).decode(errors="replace"))
        except TimeoutError:
            pass
    return out


def test_lines_reach_syslog_as_from_redis(syslog_socket):
    require_redis()
    found = {}
    for kind, start in (("redis", start_redis), ("millrace", start_millrace)):
        server = start("--syslog-enabled", "yes", "--syslog-ident", f"{kind}-test", "--syslog-facility", "local3")
        try:
            received = lines(syslog_socket)
            # (Redis sends its first lines before reading its configuration: as `redis-server`, no pid)
            parsed = [m for m in map(LINE.fullmatch, received) if m and m.group(3) == f"{kind}-test"]
            assert parsed, received
            ready = [m for m in parsed if "eady to accept connections" in m.group(5)]
            found[kind] = {
                "every line ours": all(m and m.group(3) == f"{kind}-test" for m in map(LINE.fullmatch, received)) or kind == "redis",
                "pids": {int(m.group(4)) for m in parsed} == {server.proc.pid},
                "ready priority": {int(m.group(1)) for m in ready},
            }
        finally:
            server.stop()
            lines(syslog_socket, 0.5)  # its last lines (the shutdown's), before the next server's
    assert found["millrace"]["every line ours"]
    assert found["millrace"]["pids"] and found["redis"]["pids"]
    assert found["millrace"]["ready priority"] == found["redis"]["ready priority"] == {19 * 8 + 5}  # local3.notice


def test_a_facility_outside_redis_list_is_refused():
    require_redis()
    errors = []
    for start in (start_redis, start_millrace):
        with pytest.raises(RuntimeError) as failed:
            start("--syslog-facility", "bogus")
        errors.append("argument(s) must be one of the following: user, local0, local1, local2, local3, local4, local5, local6, local7" in str(failed.value))
    assert errors == [True, True]


def test_a_long_line_cut_as_redis_cuts_it(syslog_socket):
    """Redis writes a message's first 1023 bytes (LOG_MAX_LEN): one too long for a datagram still arrives."""
    require_redis()
    from tests.rawclient import RawConn

    found = {}
    for kind, start in (("redis", start_redis), ("millrace", start_millrace)):
        server = start("--syslog-enabled", "yes", "--syslog-ident", "long", "--enable-debug-command", "yes")
        try:
            lines(syslog_socket, 0.5)
            conn = RawConn(server.port)
            conn.call("DEBUG", "LOG", "x" * 3000)
            conn.call("DEBUG", "LOG", "y" * 300000)
            found[kind] = [len(m.group(5)) for m in map(LINE.fullmatch, lines(syslog_socket, 0.5)) if m and "DEBUG LOG" in m.group(5)]
        finally:
            server.stop()
            lines(syslog_socket, 0.5)
    assert found["millrace"] == found["redis"] == [1023, 1023]
