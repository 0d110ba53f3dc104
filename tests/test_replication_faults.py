"""Replication faults: a primary that sends nonsense, a replica that cannot keep up, a bad PSYNC.

A scripted primary (a plain socket server speaking the handshake) feeds a real
replica process a snapshot and then a command no server knows: the replica
must not apply around it, but log it and ask for a full resynchronization.
A replica whose link is stalled past `client-output-buffer-limit replica` is
disconnected by the primary (with Redis's log line) and catches up after.
"""

from __future__ import annotations

import socket
import threading

from persistence import aof as aoffile
from persistence import snapshot
from tests.proxy import Proxy
from tests.servers import free_port
from tests.test_persistence import wait_for
from tests.test_replication import caught_up, info, replica_of, same_state, start


class ScriptedPrimary:
    """Answers the handshake; each PSYNC gets a snapshot with key `k`, then `stream` bytes."""

    def __init__(self, stream: bytes, diskless: bool = False, hang_up: bool = False) -> None:
        self.stream = stream
        self.hang_up = hang_up  # close the link right after the stream
        self.diskless = diskless  # $EOF:<mark> framing, the stream in the same write as the mark
        self.port = free_port()
        self.listener = socket.create_server(("127.0.0.1", self.port))
        self.psyncs: list[list[bytes]] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._session, args=(conn,), daemon=True).start()

    def _session(self, conn: socket.socket) -> None:
        buffer = b""
        with conn:
            while True:
                data = conn.recv(65536)
                if not data:
                    return
                buffer += data
                try:
                    commands = list(aoffile.parse_commands(buffer, "replica"))
                except aoffile.AofError:
                    continue
                buffer = buffer[commands[-1][1]:] if commands else buffer
                for argv, _ in commands:
                    name = argv[0].upper()
                    if name == b"PING":
                        conn.sendall(b"+PONG\r\n")
                    elif name == b"REPLCONF" and argv[1].lower() != b"ack":
                        conn.sendall(b"+OK\r\n")
                    elif name == b"PSYNC":
                        self.psyncs.append(argv[1:])
                        header = snapshot.Header("a" * 40, 0, -1, "test")
                        body = b"".join(snapshot.iter_chunks([(0, {b"k": b"v"}, {})], header))
                        framed = b"$EOF:" + b"m" * 40 + b"\r\n" + body + b"m" * 40 if self.diskless else b"$%d\r\n" % len(body) + body
                        conn.sendall(b"+FULLRESYNC " + b"a" * 40 + b" 0\r\n" + framed + self.stream)
                        if self.hang_up:
                            return

    def close(self) -> None:
        self.listener.close()


def test_an_unknown_command_from_the_primary_means_a_full_resync(tmp_path):
    fake = ScriptedPrimary(aoffile.encode([b"SET", b"k2", b"v2"]) + aoffile.encode([b"NOSUCHCMD", b"x"]))
    replica = replica_of(tmp_path, "replica", fake.port)
    try:
        wait_for(lambda: len(fake.psyncs) >= 2)
        assert fake.psyncs[0] == [b"?", b"-1"]  # first: a new replica has no history to continue (as Redis's)
        assert fake.psyncs[1] == [b"?", b"-1"]  # then: a full resync, not a continue past the bad command
        log = replica.read_log()
        assert "Bad stream from the master" in log and "NOSUCHCMD" in log
        assert replica.client().get("k") == b"v"
    finally:
        replica.stop()
        fake.close()


def test_a_replica_that_cannot_keep_up_is_disconnected_and_resyncs(tmp_path):
    primary = start(tmp_path, "primary")
    proxy = Proxy(primary.port)
    replica = replica_of(tmp_path, "replica", proxy.port)
    try:
        p, r = primary.client(), replica.client()
        caught_up(p, r)
        p.config_set("client-output-buffer-limit", "replica 1mb 0 0")
        proxy.stall()
        pipe = p.pipeline(transaction=False)
        for i in range(4000):
            pipe.xadd("s", {"pad": "x" * 4000, "i": i})  # 16 MB: past what the kernel buffers hold
            if i % 500 == 499:
                pipe.execute()
        pipe.execute()
        wait_for(lambda: "overcoming of output buffer limits" in primary.read_log())
        wait_for(lambda: info(p)["connected_slaves"] == 0)
        proxy.stall(False)
        proxy.cut()
        same_state(p, r)
    finally:
        proxy.close()
        replica.stop()
        primary.stop()


def test_psync_from_a_client_that_is_not_a_replica_yet(tmp_path):
    """A PSYNC with a history the primary never had gets +FULLRESYNC and a complete snapshot."""
    primary = start(tmp_path, "primary")
    try:
        primary.client().set("k", "v")
        with socket.create_connection(("127.0.0.1", primary.port)) as conn:
            conn.sendall(aoffile.encode([b"PSYNC", b"f" * 40, b"100"]))
            data = b""
            while b"\r\n" not in data or data.count(b"\r\n") < 2:
                data += conn.recv(65536)
            line, rest = data.split(b"\r\n", 1)
            assert line.startswith(b"+FULLRESYNC ") and line.split()[1].decode() == info(primary.client())["master_replid"]
            assert rest.startswith(b"$") and not rest.startswith(b"$EOF:")  # no capa eof: through the disk, `$<length>`
        assert info(primary.client(), "stats")["sync_partial_err"] == 1
    finally:
        primary.stop()


def test_full_sync_framing_follows_the_replicas_capa(tmp_path):
    """`$EOF:<mark>` only for a replica that said REPLCONF capa eof; else the snapshot through the disk,
    as `$<length>` and that many bytes (Redis falls back the same way)."""
    primary = start(tmp_path, "primary")
    try:
        primary.client().set("k", "v")
        for capa in ([], [b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"]):
            with socket.create_connection(("127.0.0.1", primary.port)) as conn:
                data = b""
                if capa:
                    conn.sendall(aoffile.encode(capa))
                    while b"\r\n" not in data:
                        data += conn.recv(65536)
                    assert data == b"+OK\r\n"
                    data = b""
                conn.sendall(aoffile.encode([b"PSYNC", b"?", b"-1"]))
                while data.count(b"\r\n") < 2:
                    data += conn.recv(65536)
                _line, rest = data.split(b"\r\n", 1)
                header, body = rest.split(b"\r\n", 1)
                if capa:
                    assert header.startswith(b"$EOF:")
                    continue
                size = int(header[1:])
                while len(body) < size:
                    body += conn.recv(65536)
                assert len(body) >= size > 0
    finally:
        primary.stop()


def test_stream_bytes_in_the_same_read_as_the_snapshots_end_are_applied(tmp_path):
    """Diskless framing: what follows the EOF mark in one read is the stream, not lost."""
    set_k2 = aoffile.encode([b"SET", b"k2", b"v2"])
    fake = ScriptedPrimary(set_k2, diskless=True)
    replica = replica_of(tmp_path, "replica", fake.port)
    try:
        client = replica.client()
        wait_for(lambda: client.get("k2") == b"v2")
        assert client.get("k") == b"v" and info(client)["slave_repl_offset"] == len(set_k2)
    finally:
        replica.stop()
        fake.close()


def test_a_link_lost_inside_a_transaction_asks_for_the_transaction_again(tmp_path):
    """The replica's offset stops before an open MULTI (Redis's reploff): its next PSYNC asks from there."""
    before = aoffile.encode([b"SET", b"k2", b"v2"])
    fake = ScriptedPrimary(before + aoffile.encode([b"MULTI"]) + aoffile.encode([b"SET", b"a", b"1"]), hang_up=True)
    replica = replica_of(tmp_path, "replica", fake.port)
    try:
        wait_for(lambda: len(fake.psyncs) >= 2)
        assert fake.psyncs[1] == [b"a" * 40, b"%d" % (len(before) + 1)]
        assert replica.client().get("a") is None  # the half transaction was not applied
    finally:
        replica.stop()
        fake.close()
