"""A big argument is held once (issue 25): its payload is read outside hiredis into one buffer.

`protocol.bigarg`: once a read ends inside a bulk of `BIG_ARG` bytes or more, the rest of its
request goes straight into bytes objects of their declared sizes. Checked here:

- in-process, against the hiredis path it stands in for: random pipelines (big and small
  arguments, inline lines, wide requests, RESP3 types, corrupted bytes, limits before AUTH,
  client-query-buffer-limit) split at random bytes give the same commands and errors read by
  read, with the threshold lowered so that most requests take the new path;
- on the real server: clients at once, pipelined, cut at random bytes, every reply exact;
- the server's peak RSS over a 64 MB SET (VmHWM, not a timing), and declared bulks of 500 MB
  that cost nothing until they arrive.
"""

from __future__ import annotations

import random
import socket
import threading
import time

import hiredis
import pytest

from protocol import bigarg as bigarg_module
from protocol import reader as reader_module
from protocol.bigarg import BIG_ARG, BigRequest, args_before
from protocol.reader import RequestReader
from tests.rawclient import RawConn
from tests.servers import start_millrace

SMALL_BIG = 48  # the threshold in the in-process tests: short requests take the new path


def pack(*args: bytes) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(arg), arg) for arg in args)


def payload(rnd: random.Random, size: int) -> bytes:
    """Bytes that look like RESP to a careless parser (headers, CRLFs, counts) as well as plain ones."""
    if rnd.random() < 0.5:
        return bytes(rnd.choice(b"ab$*\r\n0123456789:+~") for _ in range(size))
    return rnd.randbytes(size)


def item(rnd: random.Random) -> bytes:
    roll = rnd.random()
    if roll < 0.55:
        args = [rnd.choice([b"SET", b"ECHO", b"XADD", b"MSET"])]
        for _ in range(rnd.choice([0, 1, 2, 2, 3, 5, 8])):
            size = rnd.choice([0, 1, 5, SMALL_BIG - 1, SMALL_BIG, SMALL_BIG + 1, 100, 300, 1000])
            args.append(payload(rnd, size))
        return pack(*args)
    if roll < 0.65:
        return rnd.choice([b"PING\r\n", b"ECHO 'a b'\r\n", b"\r\n", b"*0\r\n", b"*-1\r\n", b"GET k\r\n"])
    if roll < 0.72:  # a wide request (100+ arguments: the held path)
        return pack(b"DEL", *[payload(rnd, rnd.choice([1, 60])) for _ in range(rnd.choice([99, 120, 150]))])
    if roll < 0.78:  # RESP3 types where Redis wants bulk strings, and a set header
        return rnd.choice([b"~2\r\n$1\r\na\r\n$1\r\nb\r\n", b"*2\r\n$4\r\nECHO\r\n:5\r\n", b"*2\r\n$4\r\nECHO\r\n+ab\r\n"])
    args = [b"SET", b"k", payload(rnd, rnd.choice([60, 200, 700])), b"EX", b"100"]
    return pack(*args)


def corrupt(rnd: random.Random, data: bytes) -> bytes:
    at = rnd.randrange(len(data))
    bad = rnd.choice([b"$03", b"$-1", b"*5", b"$99999999999\r\n", b"+x", b"\r\n", b"$", b":7\r\n", b"$100\r\n", b"*"])
    return data[:at] + bad + data[at + rnd.randrange(4) :]


def reads(data: bytes, cuts: list[int], lane: bool, unauthenticated: bool, max_bulk: int, max_query: int) -> list:
    """Each read's (commands, error), as Client.data_received takes them (the one-request lane first)."""
    reader = RequestReader(max_bulk_len=max_bulk, max_query_buffer=max_query)
    reader.unauthenticated = unauthenticated
    out = []
    edges = [0, *cuts, len(data)]
    for begin, end in zip(edges, edges[1:], strict=False):
        argv = reader.request(data[begin:end]) if lane else None
        got = ([argv], None) if argv is not None else reader.feed(data[begin:end])
        assert all(type(a) is bytes for argv in got[0] for a in argv)
        out.append(got)
        if got[1] is not None:
            break
    return out


@pytest.mark.parametrize("seed", range(10))
def test_big_path_reads_as_hiredis_path(seed, monkeypatch):
    rnd = random.Random(seed)
    engaged = 0
    original = BigRequest.__init__

    def counting(self, *args, **kw):
        nonlocal engaged
        engaged += 1
        original(self, *args, **kw)

    monkeypatch.setattr(BigRequest, "__init__", counting)
    for _ in range(150):
        data = b"".join(item(rnd) for _ in range(rnd.randrange(1, 6)))
        if rnd.random() < 0.3:
            data = corrupt(rnd, data)
        if len(data) < 2:
            continue
        if rnd.random() < 0.15:
            cuts = list(range(1, len(data)))  # a byte at a time
        else:
            cuts = sorted(rnd.sample(range(1, len(data)), min(len(data) - 1, rnd.randrange(1, 40))))
        setting = dict(
            lane=rnd.random() < 0.5,
            unauthenticated=rnd.random() < 0.1,
            max_bulk=rnd.choice([512 << 20, 500]),
            max_query=1 << 30,  # client-query-buffer-limit: `test_query_buffer_limit_as_a_model_says`
        )
        if setting["max_bulk"] == 500:
            # A read never holds a whole bulk over proto-max-bulk-len (the server reads 256 KB at most,
            # the limit is 1 MB at least): only then are the headers of every such bulk walked.
            cuts = sorted(set(cuts) | set(range(500, len(data), 500)))
        monkeypatch.setattr(reader_module, "BIG_ARG", SMALL_BIG)
        big = reads(data, cuts, **setting)
        monkeypatch.setattr(reader_module, "BIG_ARG", 1 << 60)
        hiredis_only = reads(data, cuts, **setting)
        assert big == hiredis_only, (data, cuts, setting)
    assert engaged > 50  # the new path did most of the work


def hiredis_parse(request: bytes) -> list[bytes]:
    reader = hiredis.Reader()
    reader.feed(request)
    return reader.gets()


def _refused(start: int, end: int, unfitting: bool, stop: int, previous: int, limit: int) -> bool:
    """The model's verdict on the request at data[start:end] once the read data[previous:stop] is in."""
    if start < stop < end and stop - start > limit:
        return True  # cut by the read, with more bytes read than the limit
    return unfitting and previous < end <= stop  # completed by the read, with a bulk that cannot fit


@pytest.mark.parametrize("seed", range(4))
def test_query_buffer_limit_as_a_model_says(seed, monkeypatch):
    """client-query-buffer-limit against a model: the link closes (no reply, "") at the end of the
    first read after which the request cut by it has more bytes read than the limit, or which
    completes a request with a bulk that cannot fit (its length and CRLF over the limit: Redis reads
    such a bulk alone into its query buffer, which passes the limit before the command can run).
    The hiredis path's own checks are part of it (they run until the big bulk's header is read);
    payloads hold no RESP counts, which that path reads apart."""
    monkeypatch.setattr(reader_module, "BIG_ARG", SMALL_BIG)
    rnd = random.Random(seed)
    for _ in range(300):
        echoes = [pack(b"ECHO", b"x" * rnd.randrange(30)) for _ in range(rnd.randrange(3))]
        before = b"".join(echoes)
        value = bytes(rnd.choice(b"abc") for _ in range(rnd.choice([SMALL_BIG, 200, 2000])))
        argv = [b"SET", b"k", value, b"EX", b"100"] if rnd.random() < 0.5 else [b"MSET", b"k", value, b"k2", b"v" * rnd.randrange(100)]
        request = pack(*argv)
        data = before + request + b"PING\r\n"
        cuts = sorted(rnd.sample(range(1, len(data)), min(len(data) - 1, rnd.randrange(1, 30))))
        limit = rnd.randrange(20, 2 * len(request))
        spans, at = [], 0  # where each multibulk request starts and ends, and where its unfitting bulk headers end
        for one in [*echoes, request]:
            unfitting = any(len(arg) + 2 > limit for arg in hiredis_parse(one))
            spans.append((at, at + len(one), unfitting))
            at += len(one)
        expected, edges = [], [0, *cuts, len(data)]
        for previous, stop in zip(edges, edges[1:], strict=False):
            if any(_refused(*span, stop, previous, limit) for span in spans):
                expected.append("refused")
                break
            expected.append("ok")
        reader = RequestReader(max_query_buffer=limit)
        got, commands = [], []
        for begin, stop in zip(edges, edges[1:], strict=False):
            done, error = reader.feed(data[begin:stop])
            commands += done
            got.append("refused" if error == "" else "ok" if error is None else error)
            if error is not None:
                break
        assert got == expected, (data, cuts, limit)
        if got[-1] == "ok":
            assert commands[-2:] == [argv, [b"PING"]]


def test_args_before_and_a_request_read_byte_by_byte():
    value = bytes(range(256)) * 20
    data = pack(b"MSET", b"a", value, b"b", b"", b"c", value[:7])
    end = data.index(b"$5120\r\n") + len(b"$5120\r\n")
    assert args_before(data, end, 5120, 2) == [b"MSET", b"a"]
    assert args_before(data, end, 5120, 3) is None
    assert args_before(pack(b"x" * 20), len(b"*1\r\n$20\r\n"), 20, 0) == []
    request = BigRequest([b"MSET", b"a"], 5120, 4, 0, reader_module._HeaderCheck(1 << 20).bulk_length, 65536)
    rest = data[end:] + b"PING\r\n"
    for at in range(len(rest)):
        done = request.feed(rest[at : at + 1])
        if done >= 0:
            break
    assert rest[at + 1 :] == b"PING\r\n" and done == 1
    assert request.argv == [b"MSET", b"a", value, b"b", b"", b"c", value[:7]]
    assert type(request.argv[2]) is bytes and hash(request.argv[2]) == hash(bytes(value))


def test_no_memory_for_a_big_argument(monkeypatch):
    """When the address space for an argument cannot be had: the first big one stays with hiredis
    (the same commands), one after it closes the link without a reply, as the query buffer limit."""
    monkeypatch.setattr(reader_module, "BIG_ARG", SMALL_BIG)
    real = bigarg_module.blank
    data = pack(b"MSET", b"a", b"x" * 500, b"b", b"y" * 300) + pack(b"PING")
    cuts = [30, 200, 600, 700]

    def refused(size):
        raise MemoryError

    monkeypatch.setattr(bigarg_module, "blank", refused)
    assert sum((commands for commands, _ in reads(data, cuts, False, False, 512 << 20, 1 << 30)), []) == [
        [b"MSET", b"a", b"x" * 500, b"b", b"y" * 300], [b"PING"]
    ]
    calls = []

    def second_refused(size):
        calls.append(size)
        if len(calls) > 1:
            raise MemoryError
        return real(size)

    monkeypatch.setattr(bigarg_module, "blank", second_refused)
    out = reads(data, cuts, False, False, 512 << 20, 1 << 30)
    assert calls == [500, 300] and out[-1] == ([], "") and all(commands == [] for commands, _ in out)


def test_the_real_threshold_is_big():
    """Requests of ordinary size stay with hiredis (its C speed); BIG_ARG is Redis's order of size for this."""
    assert BIG_ARG >= 1 << 20


# -- the real server ------------------------------------------------------------------------


def resp(reply) -> bytes:
    if reply is None:
        return b"$-1\r\n"
    if isinstance(reply, int):
        return b":%d\r\n" % reply
    if isinstance(reply, str):
        return b"+%s\r\n" % reply.encode()
    return b"$%d\r\n%s\r\n" % (len(reply), reply)


def workload(rnd: random.Random, name: bytes, count: int) -> tuple[bytes, bytes, int]:
    """A pipeline of string commands over this client's own keys, the replies a model expects, and
    how many big arguments it holds."""
    model: dict[bytes, bytes] = {}
    requests, replies, bigs = [], [], 0
    for _ in range(count):
        key = name + b":%d" % rnd.randrange(3)
        big = rnd.random() < 0.3
        value = rnd.randbytes(rnd.randrange(1 << 20, (2 << 20) + 100) if big else rnd.randrange(0, 300))
        bigs += big
        roll = rnd.randrange(8)
        if roll == 0:
            requests.append(pack(b"SET", key, value))
            model[key] = value
            replies.append(resp("OK"))
        elif roll == 1:
            requests.append(pack(b"SET", key, value, b"EX", b"1000"))
            model[key] = value
            replies.append(resp("OK"))
        elif roll == 2:
            other = name + b":x"
            requests.append(pack(b"MSET", key, value, other, value[::-1]))
            model[key], model[other] = value, value[::-1]
            replies.append(resp("OK"))
        elif roll == 3:
            requests.append(pack(b"ECHO", value))
            replies.append(resp(value))
        elif roll == 4:
            requests.append(pack(b"APPEND", key, value))
            model[key] = model.get(key, b"") + value
            replies.append(resp(len(model[key])))
        elif roll == 5:
            requests.append(b"PING\r\n")
            replies.append(resp("PONG"))
        elif roll == 6:
            requests.append(pack(b"STRLEN", key))
            replies.append(resp(len(model.get(key, b""))))
        else:
            requests.append(pack(b"GET", key))
            replies.append(resp(model.get(key)))
    return b"".join(requests), b"".join(replies), bigs


def converse(port: int, data: bytes, seed: int, got: dict, name: bytes) -> None:
    """Send data in pieces cut at random bytes (some a byte long, some with a pause between), and
    read every reply byte meanwhile."""
    rnd = random.Random(seed)
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    received = bytearray()

    def receive():
        while True:
            try:
                chunk = sock.recv(1 << 20)
            except OSError:
                return
            if not chunk:
                return
            received.extend(chunk)

    thread = threading.Thread(target=receive, daemon=True)
    thread.start()
    pos = 0
    while pos < len(data):
        size = rnd.choice([1, 2, 7, 100, 4096, 65536, 300_000, 1_000_000])
        sock.sendall(data[pos : pos + size])
        pos += size
        if rnd.random() < 0.3:
            time.sleep(rnd.choice([0.0005, 0.002]))
    got[name] = (sock, thread, received)


def test_clients_at_once_cut_anywhere_every_reply_exact(server):
    rnd = random.Random(25)
    work = {}
    for index in range(3):
        name = b"c%d" % index
        work[name] = workload(rnd, name, 24)
    assert sum(bigs for _, _, bigs in work.values()) >= 10
    got: dict = {}
    senders = [threading.Thread(target=converse, args=(server.port, work[name][0], 100 + i, got, name)) for i, name in enumerate(work)]
    for sender in senders:
        sender.start()
    for sender in senders:
        sender.join(120)
    for name, (sock, thread, received) in got.items():
        expected = work[name][1]
        deadline = time.monotonic() + 60
        while len(received) < len(expected) and time.monotonic() < deadline:
            time.sleep(0.01)
        sock.shutdown(socket.SHUT_RDWR)  # wakes the receiving thread (a close would not)
        thread.join(5)
        sock.close()
        assert bytes(received) == expected, name
    admin = RawConn(server.port)
    assert admin.call("PING") == b"PONG"


def vm(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field)


def test_a_64mb_set_peaks_at_most_1_3x_its_size():
    """Peak RSS (the kernel's high-water mark, VmHWM) of a fresh server over one 64 MB SET."""
    proc = start_millrace()
    try:
        size = 64 << 20
        value = random.Random(1).randbytes(1 << 20) * 64
        conn = RawConn(proc.port, timeout=60)
        assert conn.call("PING") == b"PONG"
        time.sleep(0.2)
        before = vm(proc.proc.pid, "VmHWM")
        request = pack(b"SET", b"big", value)
        for start in range(0, len(request), 1 << 20):
            conn.send(request[start : start + (1 << 20)])
        assert conn.read() == b"OK"
        growth = vm(proc.proc.pid, "VmHWM") - before
        assert growth <= 1.3 * size, f"peak RSS grew {growth / size:.2f}x the argument"
        assert conn.call("STRLEN", b"big") == size
        assert conn.call("GETRANGE", b"big", (1 << 20) * 37, (1 << 20) * 37 + 9) == value[:10]
    finally:
        proc.stop()


def test_declared_500mb_bulks_cost_nothing_until_they_arrive(server):
    """Five clients each announce a 500 MB argument and send a few bytes of it: the server's RSS
    barely moves, other clients are served, and the memory goes when they leave."""
    pid = server.proc.pid
    admin = RawConn(server.port)
    assert admin.call("PING") == b"PONG"
    before = vm(pid, "VmRSS")
    socks = []
    for index in range(5):
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        sock.sendall(b"*3\r\n$3\r\nSET\r\n$2\r\nh%d\r\n$500000000\r\n" % index + b"x" * 100_000)
        socks.append(sock)
    time.sleep(0.3)
    assert admin.call("PING") == b"PONG"
    assert admin.call("SET", "other", "v") == b"OK"
    grown = vm(pid, "VmRSS") - before
    assert grown < 40 << 20, f"RSS grew {grown >> 20} MB"
    for sock in socks:
        sock.close()
    time.sleep(0.3)
    assert admin.call("EXISTS", "h0", "h1") == 0
    assert admin.call("PING") == b"PONG"


def test_a_replica_holds_a_big_argument_once_and_passes_it_on(tmp_path):
    """A replica reads its primary's stream as a client's requests are read (one buffer per big
    argument, the reads passed on to its own replicas as they came): a 32 MB SET peaks under 2.6x
    its size in the replica's RSS (Redis 8.2.3's replica: 2.0x; before, 6x, and seconds of copying
    that grew with the square of the size), and big values in a transaction, an MSET, an APPEND
    and an XADD reach the replica and a replica of that replica exactly."""
    from tests.test_replication import caught_up, replica_of, start

    primary = start(tmp_path, "primary")
    replica = replica_of(tmp_path, "replica", primary.port)
    sub = None
    try:
        p, r = primary.client(socket_timeout=120), replica.client(socket_timeout=120)
        caught_up(p, r)
        size = 32 << 20
        value = random.Random(5).randbytes(1 << 20) * 32
        before = vm(replica.proc.pid, "VmHWM")
        p.set("big", value)
        caught_up(p, r)
        growth = vm(replica.proc.pid, "VmHWM") - before
        assert growth <= 2.6 * size, f"the replica's peak RSS grew {growth / size:.2f}x the argument"
        sub = replica_of(tmp_path, "sub", replica.port)  # from here what the replica reads is passed on
        s = sub.client(socket_timeout=120)
        caught_up(p, r, s)
        with p.pipeline(transaction=True) as transaction:
            transaction.set("a", value[: 3 << 20]).append("a", value[-(2 << 20) :]).set("small", "1")
            transaction.execute()
        p.mset({"m1": value[: 2 << 20], "m2": value[1 << 20 : 5 << 20]})
        p.xadd("s", {"f": value[7:1_500_007], "g": "v"})
        p.set("after", "1")
        caught_up(p, r, s)
        for client in (r, s):
            assert client.strlen("big") == size and client.getrange("big", size - 100, -1) == value[-100:]
            assert [client.get(key) for key in ("a", "small", "m1", "m2", "after")] == [p.get(key) for key in ("a", "small", "m1", "m2", "after")]
            assert client.xrange("s") == p.xrange("s")
    finally:
        for proc in (sub, replica, primary):
            if proc is not None:
                proc.stop()
