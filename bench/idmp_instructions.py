"""Instructions per XADD request, plain and IDMPAUTO, counted by callgrind: a figure the machine's load does not move.

On this shared 2-core machine the server's CPU time per request moves by 20-50%
with the neighbours' load (bench/r8_idmp.py's timed rows), more than a change
to the IDMP path. callgrind counts the instructions instead: the whole request
path of a built server in process (`build_server`, a Client fed 16 pipelined
requests per read, as redis-benchmark -P 16 sends them: parsing, dispatch, the
handler, effects, reply encoding), sockets and the event loop left out (they
cost both commands alike). Only the measured reads count (`--toggle-collect`
on the `sorted` call that runs them, after a warm-up); the clock is fake (a
read every 128 us, about the server's real pace) and the hash seed fixed, so
two runs agree to about 0.2%.

`python bench/idmp_instructions.py KIND WARM READS` is the measured program
(run under valgrind from a Millrace checkout, which it imports);
`instructions_per_request` runs it.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve()
PER_READ = 16
KINDS = ("plain", "auto")


def request(kind: str, value: bytes) -> list[bytes]:
    """bench/r8_idmp.py's commands, __rand_int__ replaced as redis-benchmark -r 10^9 does (12 digits)."""
    fields = [b"sensor-id", value, b"temperature", b"10.5"]
    if kind == "plain":
        return [b"XADD", b"bench:plain", b"*", *fields]
    return [b"XADD", b"bench:auto", b"IDMPAUTO", b"producer-1", b"*", *fields]


def encode(argv: list[bytes]) -> bytes:
    return b"*%d\r\n" % len(argv) + b"".join(b"$%d\r\n%s\r\n" % (len(arg), arg) for arg in argv)


def reads(kind: str, count: int, seed: int = 1) -> list[bytes]:
    rng = random.Random(seed)
    return [b"".join(encode(request(kind, b"%012d" % rng.randrange(10**9))) for _ in range(PER_READ)) for _ in range(count)]


def instructions_per_request(root: Path, kind: str, warm: int, count: int, timeout: float = 600.0) -> float | None:
    """Instructions callgrind counts per request over `count` reads after `warm` reads; None without valgrind."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return None
    env = dict(os.environ, PYTHONHASHSEED="0", PYTHONPATH=str(root))
    out = subprocess.run(
        [valgrind, "--tool=callgrind", "--collect-atstart=no", "--toggle-collect=builtin_sorted", "--callgrind-out-file=/dev/null",
         sys.executable, str(HERE), kind, str(warm), str(count)],
        cwd=root, env=env, capture_output=True, text=True, timeout=timeout, check=True,
    )  # fmt: skip
    match = re.search(r"Collected\s*:\s*(\d+)", out.stderr)
    if match is None:
        raise RuntimeError(f"callgrind gave no count: {out.stderr[-2000:]}")
    return int(match.group(1)) / (count * PER_READ)


def _measure(kind: str, warm: int, count: int) -> None:
    """The measured program (under valgrind): a built server, one client, `warm` reads, then `count` inside sorted()."""
    import server.client as client_module
    from server.client import Client
    from server.main import build_server

    clock = [1_780_000_000_000_000_000]

    def fake_ns() -> int:  # data_received reads the clock once per read
        clock[0] += 128_000
        return clock[0]

    client_module._time_ns = fake_ns
    client_module.SLICE_SECONDS = 1e9  # callgrind's slowness must not split a read into slices

    class Loop:
        def call_soon(self, *args) -> None:
            pass

    class Transport:
        def write(self, data: bytes) -> None:
            pass

        def get_extra_info(self, name: str) -> None:
            return None

    server = build_server(["--save", "", "--appendonly", "no"])
    server.loop = Loop()
    client = Client(server)
    client.transport = Transport()
    data = reads(kind, warm + count)
    pending = server.pending_writes

    def one(chunk: bytes) -> None:
        client.data_received(chunk)
        client.output = []
        pending.clear()

    for chunk in data[:warm]:
        one(chunk)
    measured = data[warm:]

    def step(index: int) -> int:
        one(measured[index])
        return index

    sorted(range(count), key=step)  # only this call is counted (--toggle-collect=builtin_sorted)
    stream = server.keyspace.dbs[0].data.get(request(kind, b"")[1])
    if getattr(stream, "length", None) != (warm + count) * PER_READ:
        raise SystemExit(f"expected {(warm + count) * PER_READ} entries, got {getattr(stream, 'length', None)}")


if __name__ == "__main__":
    _measure(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
