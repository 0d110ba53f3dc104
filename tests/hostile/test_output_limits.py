"""Clients that do not read their replies: kept reading as Redis does, bounded as Redis bounds them.

A client may write a whole pipeline before it reads anything (redis-py's pipeline does): the
server must keep reading and running its requests while the replies back up, or each side waits
for the other for ever. What piles up is bounded by `client-output-buffer-limit` (normal, replica,
pubsub classes, hard and soft limits) and, for a client that has not authenticated, by Redis's
CVE-2025-21605 rule (1 KB beyond the 16 KB reply buffer). Each case runs on Millrace and on Redis
8.2.3 alike and expects the same outcome.
"""

from __future__ import annotations

import socket
import sys
import time

import pytest

from tests.rawclient import encode_command
from tests.servers import ServerProcess, free_port, millrace_and_redis, redis_server_path, require_redis

CLASSES_DEFAULT = "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
CLOSING = "scheduled to be closed ASAP for overcoming of output buffer limits."


@pytest.fixture(scope="module")
def servers():
    yield from millrace_and_redis()


@pytest.fixture(autouse=True)
def reset(servers):
    yield
    for proc in servers:
        with proc.client(password="pw") as client:
            try:
                client.config_set("requirepass", "")
            except Exception:  # noqa: BLE001 - no password was set
                pass
        with proc.client() as client:
            client.config_set("client-output-buffer-limit", CLASSES_DEFAULT)


def small_buffers_socket(port: int, timeout: float = 10.0) -> socket.socket:
    """A client whose kernel buffers are small, so replies it does not read back up at once."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
    sock.settimeout(timeout)
    sock.connect(("127.0.0.1", port))
    return sock


def read_until_closed(sock: socket.socket, expected: int, timeout: float = 10.0) -> tuple[bytes, bool]:
    """Bytes until `expected` of them, or the server closes (True), or timeout (False)."""
    data = bytearray()
    sock.settimeout(timeout)
    try:
        while len(data) < expected:
            chunk = sock.recv(1 << 20)
            if not chunk:
                return bytes(data), True
            data += chunk
    except ConnectionResetError:
        return bytes(data), True
    except TimeoutError:
        return bytes(data), False
    return bytes(data), False


def limit_disconnections(proc) -> int:
    with proc.client() as client:
        return client.info("stats")["client_output_buffer_limit_disconnections"]


# -- a whole pipeline before any read ---------------------------------------------------------


def test_a_pipeline_written_whole_before_reading_is_answered(servers):
    """20,000 ECHOs of 1 KB (20 MB each way) in one sendall, read only afterwards: more than the
    kernel buffers hold in either direction, so a server that stops reading while its replies
    back up never lets the sendall end (the issue's redis-py pipeline of 1,000,000 GETs hung)."""
    count, arg = 20_000, b"x" * 1000
    request = encode_command("ECHO", arg) * count
    reply = b"$1000\r\n" + arg + b"\r\n"
    for proc in servers:
        sock = small_buffers_socket(proc.port)
        try:
            sock.sendall(request)  # raises TimeoutError after 10 s without progress
            data, closed = read_until_closed(sock, len(reply) * count)
        finally:
            sock.close()
        assert not closed, proc.name
        assert data == reply * count, proc.name


# -- CONFIG GET / SET / REWRITE ----------------------------------------------------------------

CONFIG_VALUES = [
    "normal 1mb 512kb 10", "pubsub 1 2", "master 1 2 3", "foo 1 2 3", "normal 1x 2 3", "normal 1 2 -3",
    "normal 1 2 60x", "replica 1k 2k 3", "NORMAL 1 2 3", "", "normal 1 2 3 pubsub x 1 1", "normal 1 2 +3",
    "normal 1 2 03", "normal 1  2 3", "normal -1 2 3", "normal 1 2 99999999999999999999", "normal 1 2 2147483647",
    "normal 1 2 2147483648", " normal 1 2 3", "normal 1 2 3 ", "normal 1gb 2GB 4", "normal 1 2 ", "normal  2 3",
    "slave 0 0 0 pubsub 0 0 0", "Replica 5mb 1mb 30 normal 7 8 9 pubsub 1kb 1kb 1",
]


def _config_answer(proc, value: str):
    with proc.client() as client:
        try:
            answer = client.config_set("client-output-buffer-limit", value)
        except Exception as exc:  # noqa: BLE001 - the error text is what is compared
            answer = str(exc)
        return answer, client.config_get("client-output-buffer-limit")


def test_config_set_and_get_as_redis(servers):
    """Each class set alone leaves the others; all of a value is valid or nothing changes; the
    classes come back on one line in bytes with `slave`; Redis's three error texts."""
    millrace, redis_ = servers
    for value in CONFIG_VALUES:
        assert _config_answer(millrace, value) == _config_answer(redis_, value), value


def test_config_rewrite_writes_one_line_per_class_changed(tmp_path):
    """CONFIG REWRITE as Redis's: `client-output-buffer-limit <class> <hard> <soft> <seconds>` for
    each class off its default, memory in kb/mb/gb where they divide it, `replica` for slave;
    the file's own lines are replaced, and a restart reads the same value back."""
    require_redis()
    outputs = []
    for name in ("millrace", "redis"):
        workdir = tmp_path / name
        workdir.mkdir()
        conf = workdir / "server.conf"
        conf.write_text("client-output-buffer-limit normal 1mb 2mb 3\nclient-output-buffer-limit replica 10mb 2mb 3\n")
        port = free_port()
        binary = [sys.executable, "-m", "server"] if name == "millrace" else [redis_server_path(), ]
        argv = [*binary, str(conf), "--port", str(port), "--dir", str(workdir), "--save", ""]

        def start(argv=argv, port=port, workdir=workdir, name=name):
            return ServerProcess(argv, port, str(workdir), name)

        proc = start()
        try:
            with proc.client() as client:
                assert client.config_get("client-output-buffer-limit")["client-output-buffer-limit"] == (
                    "normal 1048576 2097152 3 slave 10485760 2097152 3 pubsub 33554432 8388608 60")
                client.config_set("client-output-buffer-limit", "pubsub 1kb 0 0 slave 268435456 67108864 60 normal 1000 0 0")
                client.config_rewrite()
                expected = client.config_get("client-output-buffer-limit")
        finally:
            proc.stop()
        lines = [line for line in conf.read_text().splitlines() if line.startswith("client-output-buffer-limit")]
        outputs.append(lines)
        again = start()
        try:
            with again.client() as client:
                assert client.config_get("client-output-buffer-limit") == expected
        finally:
            again.stop()
    assert outputs[0] == outputs[1] == [  # the file's second line is kept for the replica class, at its default
        "client-output-buffer-limit normal 1000 0 0", "client-output-buffer-limit replica 256mb 64mb 60", "client-output-buffer-limit pubsub 1kb 0 0"]


# -- the normal class ----------------------------------------------------------------------------


def _flood_without_reading(proc, count: int = 200, size: int = 100_000) -> tuple[bytes, bool]:
    """GETs of a 100 KB value the client does not read until it has sent them all."""
    with proc.client() as client:
        client.set("big", b"v" * size)
    sock = small_buffers_socket(proc.port)
    try:
        sock.sendall(encode_command("GET", "big") * count)
        time.sleep(0.5)
        return read_until_closed(sock, (size + 12) * count, timeout=5)
    finally:
        sock.close()


def test_normal_hard_limit_closes_a_client_that_does_not_read(servers):
    for proc in servers:
        with proc.client() as client:
            client.config_set("client-output-buffer-limit", "normal 1mb 0 0")
        before = limit_disconnections(proc)
        data, closed = _flood_without_reading(proc)
        assert closed and len(data) < 100_011 * 200, proc.name
        assert limit_disconnections(proc) == before + 1, proc.name
        assert CLOSING in proc.read_log(), proc.name


def test_normal_clients_are_unlimited_by_default(servers):
    """normal 0 0 0: 20 MB of unread replies are kept and delivered."""
    for proc in servers:
        before = limit_disconnections(proc)
        data, closed = _flood_without_reading(proc)
        assert not closed and len(data) == 100_011 * 200, proc.name
        assert limit_disconnections(proc) == before, proc.name


def test_normal_soft_limit_closes_after_its_seconds(servers):
    """Over the soft limit for longer than its seconds, with no reply arriving meanwhile: the
    periodic look (Redis's clientsCron) closes it."""
    for proc in servers:
        with proc.client() as client:
            client.config_set("client-output-buffer-limit", "normal 0 512kb 1")
            client.set("big", b"v" * 100_000)
        before = limit_disconnections(proc)
        sock = small_buffers_socket(proc.port)
        try:
            sock.sendall(encode_command("GET", "big") * 100)
            time.sleep(3)
            data, closed = read_until_closed(sock, 100_011 * 100, timeout=5)
        finally:
            sock.close()
        assert closed and len(data) < 100_011 * 100, proc.name
        assert limit_disconnections(proc) == before + 1, proc.name


# -- before AUTH ---------------------------------------------------------------------------------


NOAUTH = b"-NOAUTH Authentication required.\r\n"


def _guesses(count: int) -> bytes:
    return b"".join(encode_command("AUTH", f"guess{i}") for i in range(count))


def test_pipelined_password_guesses_are_not_all_answered(servers):
    """The issue: 50,000 pipelined AUTH guesses were all answered, at 280k guesses a second.
    Redis 8.2 answers one guess of such a pipeline; Millrace closes the client once the answers
    pass the unauthenticated limit. Either way only a few hundred guesses at most get an answer."""
    for proc in servers:
        with proc.client() as client:
            client.config_set("requirepass", "pw")
        sock = small_buffers_socket(proc.port)
        try:
            try:
                sock.sendall(_guesses(50_000))
            except (BrokenPipeError, ConnectionResetError):
                pass  # closed while the guesses were still being sent
            data, _ = read_until_closed(sock, 1 << 30, timeout=3)
        finally:
            sock.close()
        assert data.count(b"-WRONGPASS") < (17 * 1024 + 1024) // 66, proc.name


def test_unauthenticated_replies_that_pile_up_close_the_client(servers):
    """CVE-2025-21605: 200,000 pipelined requests before AUTH are not all answered: the client is
    closed once 1 KB of replies is held beyond the 16 KB reply buffer, counted and logged.

    Their 6.8 MB of replies cannot all fit in the kernel's buffers (4 MB at most on the server's side):
    with fewer, a server that happened to read the requests in small pieces could hand every reply
    to the kernel and never hold any."""
    for proc in servers:
        with proc.client() as client:
            before = client.info("stats")["client_output_buffer_limit_disconnections"]
            client.config_set("requirepass", "pw")
        log_before = proc.read_log().count(CLOSING)
        sock = small_buffers_socket(proc.port)
        try:
            try:
                sock.sendall(encode_command("PING") * 200_000)
            except (BrokenPipeError, ConnectionResetError):
                pass  # closed while the requests were still being sent
            data, closed = read_until_closed(sock, 1 << 30, timeout=5)
        finally:
            sock.close()
        assert closed and data.count(NOAUTH) < 200_000, proc.name
        with proc.client(password="pw") as client:
            assert client.info("stats")["client_output_buffer_limit_disconnections"] == before + 1, proc.name
        assert proc.read_log().count(CLOSING) == log_before + 1, proc.name


def test_a_few_unauthenticated_errors_are_all_answered(servers):
    for proc in servers:
        with proc.client() as client:
            client.config_set("requirepass", "pw")
        sock = small_buffers_socket(proc.port)
        try:
            sock.sendall(encode_command("PING") * 100)
            data, closed = read_until_closed(sock, 100 * len(NOAUTH), timeout=5)
        finally:
            sock.close()
        assert not closed and data == NOAUTH * 100, proc.name


def test_unauthenticated_replies_piling_up_over_many_reads_close_the_client(servers):
    """The same rule when the requests come one read at a time and the replies back up in the
    kernel first: the client that never reads is dropped before the server holds much for it."""
    for proc in servers:
        with proc.client() as client:
            client.config_set("requirepass", "pw")
        sock = small_buffers_socket(proc.port, timeout=2)
        closed = False
        try:
            for _ in range(2000):
                try:
                    sock.sendall(encode_command("PING") * 500)
                except (BrokenPipeError, ConnectionResetError):
                    closed = True
                    break  # (a TimeoutError is a server that stopped reading: the test fails)
            if not closed:
                _, closed = read_until_closed(sock, 1 << 30, timeout=5)
        finally:
            sock.close()
        assert closed, proc.name


def test_over_limit_boundaries_and_soft_clock_as_redis():
    """checkClientOutputBufferLimits: at the hard limit exactly is over it (used_mem >= hard); the
    soft limit likewise, closing only once over it for more than its seconds, and a look under it
    restarts that clock."""
    from types import SimpleNamespace

    from server.output_limits import over_limit

    state = SimpleNamespace(obuf_soft_since=0.0)
    assert not over_limit((1000, 0, 0), 999, state)
    assert over_limit((1000, 0, 0), 1000, state)
    assert not over_limit((0, 0, 0), 10**12, state)  # 0 turns a limit off
    limits = (0, 500, 2)
    assert not over_limit(limits, 499, state, now=100.0) and state.obuf_soft_since == 0.0
    assert not over_limit(limits, 500, state, now=100.0) and state.obuf_soft_since == 100.0
    assert not over_limit(limits, 600, state, now=102.0)  # not yet more than its seconds
    assert over_limit(limits, 600, state, now=102.5)
    assert not over_limit(limits, 10, state, now=103.0) and state.obuf_soft_since == 0.0
    assert not over_limit(limits, 600, state, now=104.0) and state.obuf_soft_since == 104.0
