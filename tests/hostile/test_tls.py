"""TLS is not built in, so its switches are refused, never accepted and ignored.

Before, `tls-port 6380` was accepted and nothing listened there: a client configured for TLS
found no server, or an operator believed traffic was encrypted. Now each parameter that would turn
TLS on (tls-port, tls-replication, tls-cluster) stops the start-up with a fatal config error and is
refused by CONFIG SET; the other tls-* parameters stay inert while these are off, as in Redis.
`unixsocket` was the same kind of switch (accepted, no socket created): it is refused likewise.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile

import pytest
import redis

from tests.servers import ROOT, free_port, start_millrace

REFUSED = "TLS is not supported by Millrace: {} cannot be enabled (put a TLS terminating proxy in front of the plain port)"


@pytest.mark.parametrize(("name", "value"), [("tls-port", "6380"), ("tls-replication", "yes"), ("tls-cluster", "yes")])
def test_enabling_tls_at_start_up_is_a_fatal_config_error(name, value):
    argv = [sys.executable, "-m", "server", "--port", str(free_port()), "--dir", tempfile.mkdtemp(), f"--{name}", value]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, cwd=ROOT)
    assert done.returncode == 1
    assert "*** FATAL CONFIG FILE ERROR" in done.stderr
    assert done.stderr.splitlines()[-1] == REFUSED.format(name)


def test_config_set_refuses_tls_and_keeps_the_rest():
    proc = start_millrace()
    try:
        with proc.client() as client:
            for name, value in (("tls-port", "6380"), ("tls-replication", "yes"), ("tls-cluster", "yes")):
                with pytest.raises(redis.ResponseError) as error:
                    client.config_set(name, value)
                assert str(error.value) == f"CONFIG SET failed (possibly related to argument '{name}') - " + REFUSED.format(name)
            assert client.config_get("tls-*")["tls-port"] == "0"
            assert client.config_get("tls-replication")["tls-replication"] == "no"
            assert client.config_set("tls-port", "0") and client.config_set("tls-replication", "no")
    finally:
        proc.stop()


def test_a_unix_socket_path_is_a_fatal_config_error_not_ignored(tmp_path):
    """`unixsocket /path` was accepted and no socket was created, so a client of that path found no
    server; now it stops the start-up (the empty default still loads, as a stock redis.conf has it)."""
    argv = [sys.executable, "-m", "server", "--port", str(free_port()), "--dir", str(tmp_path), "--unixsocket", str(tmp_path / "s.sock")]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, cwd=ROOT)
    assert done.returncode == 1 and "*** FATAL CONFIG FILE ERROR" in done.stderr
    assert done.stderr.splitlines()[-1] == (
        "Unix sockets are not supported by Millrace: unixsocket cannot be set (clients connect over TCP: port and bind)")
    assert not (tmp_path / "s.sock").exists()
    proc = start_millrace("--unixsocket", "")
    try:
        with proc.client() as client:
            assert client.config_get("unixsocket") == {"unixsocket": ""}
    finally:
        proc.stop()
