"""repl-disable-tcp-nodelay against Redis 8.2.3: TCP_NODELAY of the primary's socket to its replica, read
from the running primary itself (pidfd_getfd duplicates its descriptor into the test)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import socket
import time

import pytest

from tests.servers import require_redis, start_millrace, start_redis

SYS_PIDFD_OPEN, SYS_PIDFD_GETFD = 434, 438  # x86-64


def _syscall(*args) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    result = libc.syscall(*args)
    if result < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return result


def socket_inode(pid: int, local_port: int, remote_port: int) -> int:
    """The inode of pid's TCP socket from local_port to remote_port on 127.0.0.1 (/proc/net/tcp)."""
    with open(f"/proc/{pid}/net/tcp") as handle:
        for line in list(handle)[1:]:
            fields = line.split()
            local, remote = fields[1], fields[2]
            if int(local.split(":")[1], 16) == local_port and int(remote.split(":")[1], 16) == remote_port:
                return int(fields[9])
    raise LookupError("no such socket")


def nodelay_of(pid: int, inode: int) -> int:
    """TCP_NODELAY of the process's socket with that inode, through a duplicate of its descriptor."""
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{pid}/fd/{fd}") == f"socket:[{inode}]":
                pidfd = _syscall(SYS_PIDFD_OPEN, pid, 0)
                try:
                    copy = _syscall(SYS_PIDFD_GETFD, pidfd, int(fd), 0)
                finally:
                    os.close(pidfd)
                sock = socket.socket(fileno=copy)
                try:
                    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) and 1
                finally:
                    sock.close()
    raise LookupError("descriptor not found")


def replica_link_nodelay(kind: str, disable: str, diskless: str) -> int:
    args = ("--repl-disable-tcp-nodelay", disable, "--repl-diskless-sync", diskless)
    primary = start_redis("--repl-diskless-sync-delay", "0", *args) if kind == "redis" else start_millrace(*args)
    replica = (start_redis if kind == "redis" else start_millrace)("--replicaof", "127.0.0.1", str(primary.port))
    try:
        client = primary.client()
        deadline = time.monotonic() + 30
        while "online" not in str(client.info("replication").get("slave0", "")):
            assert time.monotonic() < deadline, "link never came up"
            time.sleep(0.05)
        link = next(c for c in client.client_list() if "S" in c["flags"])
        remote_port = int(link["addr"].rsplit(":", 1)[1])
        return nodelay_of(primary.proc.pid, socket_inode(primary.proc.pid, primary.port, remote_port))
    finally:
        replica.stop()
        primary.stop()


@pytest.mark.parametrize("diskless", ["yes", "no"])
@pytest.mark.parametrize("disable", ["yes", "no"])
def test_the_replica_socket_nodelay_as_redis(disable, diskless):
    """Redis turns TCP_NODELAY off for a replica at SYNC, and its diskless transfer turns it back on."""
    require_redis()
    try:
        theirs = replica_link_nodelay("redis", disable, diskless)
    except PermissionError:
        pytest.skip("pidfd_getfd needs ptrace rights over the server")
    assert replica_link_nodelay("millrace", disable, diskless) == theirs == (0 if (disable, diskless) == ("yes", "no") else 1)
