"""Cross protocol scripting: a web page can make a browser send an HTTP request to the server's
port, and a server that skips what it does not understand would run the commands in its body.
Redis drops the connection at a `POST` or `Host:` where a command is due, with none of the
replies still due, before AUTH and inside MULTI too, and logs it once a minute. Each case goes
to Millrace and to Debian's redis-server 7.0.15: the same bytes back, the same close, no command
of the request run, and the same log line.
"""

from __future__ import annotations

import socket

import pytest

from tests.rawclient import RawConn, encode_command, probe

LOG_LINE = (
    "# Possible SECURITY ATTACK detected. It looks like somebody is sending POST or Host: commands to Redis. "
    "This is likely due to an attacker attempting to use Cross Protocol Scripting to compromise your Redis instance. "
    "Connection aborted."
)
HTTP = b"POST /run HTTP/1.1\r\nHost: 127.0.0.1:6379\r\nContent-Type: text/plain\r\nContent-Length: 15\r\n\r\nSET xp pwned\r\n"

CASES = {
    "HTTP POST request": [HTTP],
    "HTTP GET request with a Host header": [b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\nSET xp pwned\r\n"],
    "POST after a command in the same read": [b"PING\r\nPOST / HTTP/1.1\r\nSET xp pwned\r\n"],
    "POST after a command in an earlier read": [b"PING\r\n", b"POST / HTTP/1.1\r\nSET xp pwned\r\n"],
    "post as a multibulk request": [encode_command("PING") + encode_command("post", "/", "x") + encode_command("SET", "xp", "pwned")],
    "HOST: in capitals, alone": [b"HOST:\r\nSET xp pwned\r\n"],
    "POST as the one request of a read": [encode_command("PING"), encode_command("POST", "/"), encode_command("SET", "xp", "pwned")],
    "POST inside MULTI": [b"MULTI\r\nSET xp pwned\r\nPOST / HTTP/1.1\r\nEXEC\r\n"],
    "host:x is just an unknown command": [b"host:x\r\nPOSTx\r\n"],
}


def call(port: int, *args):
    conn = RawConn(port)
    try:
        return conn.call(*args)
    finally:
        conn.close()


@pytest.mark.parametrize("name", list(CASES))
def test_http_request_closes_the_connection_as_redis_does(servers, name):
    results = []
    for proc in servers:
        call(proc.port, "DEL", "xp")
        results.append((probe(proc.port, *CASES[name]), call(proc.port, "EXISTS", "xp")))
    assert results[0] == results[1]
    assert results[0][1] == 0  # the request's SET never ran


def test_before_auth(servers):
    """A server with a password: still dropped before any NOAUTH reply."""
    outcomes = []
    for proc in servers:
        admin = RawConn(proc.port)
        assert admin.call("CONFIG", "SET", "requirepass", "pw") == b"OK"
        try:
            with socket.create_connection(("127.0.0.1", proc.port), timeout=10) as sock:
                sock.sendall(b"PING\r\n" + HTTP)
                out = b""
                while chunk := sock.recv(65536):
                    out += chunk
            outcomes.append(out)
        finally:
            assert admin.call("AUTH", "pw") == b"OK"
            assert admin.call("CONFIG", "SET", "requirepass", "") == b"OK"
            admin.close()
    assert outcomes == [b"", b""]


def test_logged_once_a_minute(servers):
    """Every case above was an attempt (this test runs last): one warning line for them all, as Redis writes it."""
    for proc in servers:
        probe(proc.port, HTTP)
        lines = [line.split(" ", 5)[-1] for line in proc.read_log().splitlines() if "SECURITY ATTACK" in line]
        assert lines == [LOG_LINE], proc.name
