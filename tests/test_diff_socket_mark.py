"""socket-mark-id against Redis 8.2.3: SO_MARK of the listening socket, read from the running server's
own descriptor (tests/test_diff_repl_nodelay.py's pidfd_getfd helpers)."""

from __future__ import annotations

import os
import socket

import pytest

from tests.servers import require_redis, start_millrace, start_redis
from tests.test_diff_repl_nodelay import SYS_PIDFD_GETFD, SYS_PIDFD_OPEN, _syscall, socket_inode

SO_MARK = getattr(socket, "SO_MARK", 36)


def listener_mark(server) -> int:
    pid = server.proc.pid
    inode = socket_inode(pid, server.port, 0)
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") != f"socket:[{inode}]":
                continue
        except OSError:
            continue  # closed meanwhile
        pidfd = _syscall(SYS_PIDFD_OPEN, pid, 0)
        try:
            copy = _syscall(SYS_PIDFD_GETFD, pidfd, int(fd), 0)
        finally:
            os.close(pidfd)
        with socket.socket(fileno=copy) as sock:
            return sock.getsockopt(socket.SOL_SOCKET, SO_MARK)
    raise LookupError("listening socket not found")


@pytest.mark.parametrize("mark", ["0", "7"])
def test_the_listening_socket_is_marked_as_redis(mark):
    require_redis()
    found = {}
    for kind, start in (("redis", start_redis), ("millrace", start_millrace)):
        server = start("--socket-mark-id", mark)
        try:
            try:
                found[kind] = listener_mark(server)
            except PermissionError:
                pytest.skip("pidfd_getfd needs ptrace rights over the server")
        finally:
            server.stop()
    assert found["millrace"] == found["redis"] == int(mark)
