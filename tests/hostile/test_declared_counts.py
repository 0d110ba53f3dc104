"""A declared count costs nothing before its elements arrive.

hiredis allocates a list slot for every element a `*N` header announces as soon as it reads the
header, and freeing 10^8 of them blocks the whole server for a fifth of a second. Redis sizes its
argv by what arrives, so no header, however the bytes are split across reads, before or after
AUTH, stalls it. Each attack here goes to Millrace and to Debian's redis-server 7.0.15 alike: the
attacker gets the same bytes and the same close, and another client's PING, sent right behind
every read of the attack and after it, comes back within 10 ms of its latency before the attack
(the issue's requirement).
"""

from __future__ import annotations

import random
import socket
import time
import tracemalloc

import pytest

from protocol.reader import UNAUTH_MAX_ARGS, RequestReader, unauthenticated_error
from tests.rawclient import InputCounter, RawConn, drain, encode_command
from tests.servers import DEBIAN_VERSION, require_redis, start_millrace, start_redis

PASSWORD = "hostile-pw"
PING = encode_command("PING")
STALL_BOUND = 0.010  # the issue: no more than 10 ms beyond the PING's normal latency

CASES = {
    "eight-digit count": [b"*99999999\r\n"],
    "nine-digit count": [b"*999999999\r\n"],
    "400 nested counts in one 4 KB packet": [b"*9999999\r\n" * 400],
    "400 nested counts after a command": [PING + b"*2\r\n$4\r\nECHO\r\n" + b"*9999999\r\n" * 400],
    "header after a request whose last LF comes in the next read": [b"PING\r\n*1\r\n$4\r\nPING\r", b"\n*2147483647\r\n"],
    "count cut across reads": [PING + b"*21", b"47483647\r\n"],
    "count cut after its type byte": [PING + b"*", b"99999999\r\n"],
    "count past INT_MAX": [b"*2147483648\r\n"],
    "array where an argument is due": [b"*2\r\n$4\r\nECHO\r\n*99999999\r\n"],
    "array where an argument is due, cut": [b"*2\r\n$4\r\nECHO\r\n*9999", b"9999\r", b"\n"],
    "map where an argument is due": [b"*2\r\n$4\r\nECHO\r\n%99999999\r\n"],
    "set where an argument is due": [b"*2\r\n$4\r\nECHO\r\n~99999999\r\n"],
    "push where an argument is due": [b"*2\r\n$4\r\nECHO\r\n>99999999\r\n"],
    "attribute where an argument is due": [b"*2\r\n$4\r\nECHO\r\n|99999999\r\n"],
    "push where a command starts": [PING + b">99999999\r\n" + PING],
    "150 arguments arriving ten at a time": [b"*150\r\n$3\r\nDEL\r\n", *(b"$2\r\nk%d\r\n" % (i % 10) * 10 for i in range(14)), b"$1\r\nk\r\n" * 9],
    "150 arguments, then a nested count": [b"*150\r\n$3\r\nDEL\r\n", b"*99999999\r\n"],
}


@pytest.fixture(scope="module")
def servers():
    """Millrace and Redis 7.0 with requirepass: an attacker before AUTH, and after it (as any client
    of a server without a password is from the start)."""
    require_redis(DEBIAN_VERSION)
    procs = []
    try:
        procs.append(start_millrace())
        procs.append(start_redis(version=DEBIAN_VERSION))
        for proc in procs:  # set once started: the start-up check's client then needs no password
            with proc.client() as client:
                client.config_set("requirepass", PASSWORD)
        yield procs
    finally:
        for proc in procs:
            proc.stop()


class Pinger:
    """Another client, timing its PINGs; `sent` counts its bytes, which the server's input counter sees too."""

    def __init__(self, port: int, password: str) -> None:
        self.conn = RawConn(port, timeout=30)
        self.conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.conn.call("AUTH", password)
        self.sent = len(encode_command("AUTH", password))

    def ping(self) -> float:
        start = time.perf_counter()
        self.conn.send(PING)
        assert self.conn.read() == b"PONG"
        self.sent += len(PING)
        return time.perf_counter() - start

    def close(self) -> None:
        self.conn.close()


def attack(port: int, chunks: list[bytes], authenticate: bool) -> tuple[bytes, bool, float, float]:
    """Send each chunk as a read of its own (the server has read one before the next goes out).

    Returns what the attacker was answered, whether it was closed, the worst PING round trip of
    another client during the attack and the worst before it."""
    counter = InputCounter(port, PASSWORD)
    pinger = Pinger(port, PASSWORD)
    baseline = max(pinger.ping() for _ in range(10))
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sent = 0
    try:
        if authenticate:
            sock.sendall(encode_command("AUTH", PASSWORD))
            sent += len(encode_command("AUTH", PASSWORD))
            assert sock.recv(5) == b"+OK\r\n"
        out, closed, worst = b"", False, 0.0
        for chunk in chunks:
            try:
                sock.sendall(chunk)
            except (ConnectionResetError, BrokenPipeError):
                closed = True
                break
            sent += len(chunk)
            worst = max(worst, pinger.ping())  # right behind the read: it waits for whatever that read costs
            got, closed = counter.wait(sock, sent + pinger.sent)
            out += got
            if closed:
                break
        counter.round_trip()
        counter.round_trip()
        got, gone = drain(sock)
        out, closed = out + got, closed or gone
        sock.close()  # what the connection held is freed now, if it was not yet
        for _ in range(5):
            worst = max(worst, pinger.ping())
            time.sleep(0.002)
        return out, closed, worst, baseline
    finally:
        sock.close()
        pinger.close()
        counter.close()


@pytest.mark.parametrize("authenticated", [False, True], ids=["before AUTH", "after AUTH"])
@pytest.mark.parametrize("name", list(CASES))
def test_declared_count_costs_nothing_before_its_elements(servers, name, authenticated):
    chunks = CASES[name]
    ours, redis = (attack(proc.port, chunks, authenticated) for proc in servers)
    assert ours[:2] == redis[:2]
    out, closed, worst, baseline = ours
    assert worst < baseline + STALL_BOUND, f"another client's PING took {worst * 1000:.1f} ms (before the attack: {baseline * 1000:.1f} ms)"


def read_all(chunks: list[bytes], lane: bool, unauthenticated: bool) -> list:
    """The commands and the error a fresh reader makes of chunks, read as Client.data_received reads them."""
    reader = RequestReader()
    reader.unauthenticated = unauthenticated
    got: list = []
    for chunk in chunks:
        argv = reader.request(chunk) if lane and not unauthenticated else None
        if argv is not None:
            got.append(argv)
            continue
        reader.inline_ids.clear()
        commands, error = reader.feed(chunk)
        over = unauthenticated_error(commands, reader.inline_ids) if unauthenticated else -1
        if over >= 0:  # as Client._refuse: what the reader returned whole, over the pre-AUTH limits
            big = len(commands[over]) > UNAUTH_MAX_ARGS
            commands, error = commands[:over], f"ERR Protocol error: unauthenticated {'multibulk' if big else 'bulk'} length"
        got += commands
        if error is not None:
            return [*got, error]
    return got


@pytest.mark.parametrize("unauthenticated", [False, True], ids=["authenticated", "unauthenticated"])
@pytest.mark.parametrize("name", list(CASES))
def test_no_split_lets_hiredis_size_a_count(name, unauthenticated):
    """Each attack cut in two reads at every byte (at 200 bytes drawn for a long one), and in four
    reads 100 ways: the same commands and
    error as one read gives, and never a list hiredis sized by a count before its elements came
    (tracemalloc sees hiredis's lists: 10^7 slots are 80 MB)."""
    stream = b"".join(CASES[name])
    want = read_all([stream], False, unauthenticated)
    rng = random.Random(name)
    cuts = range(1, len(stream))
    splits = [[cut] for cut in (cuts if len(cuts) <= 200 else rng.sample(cuts, 200))]
    splits += [sorted(rng.sample(cuts, 3)) for _ in range(100)]
    tracemalloc.start()
    try:
        for cuts in splits:
            chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
            for lane in (False, True):
                assert read_all(chunks, lane, unauthenticated) == want, (chunks, lane)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * 1024 * 1024
