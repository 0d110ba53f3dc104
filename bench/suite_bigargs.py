"""Big arguments (issue 25): one huge value, one entry of a million fields.

- large argument: one SET of a 64 MB value (the issue's 512 MB scaled down): peak RSS growth over
  the argument (target <= 1.3), and the worst PING latency of another client meanwhile.
- wide XADD: one XADD with 1,000,000 field-value pairs: time to the reply (target <= 4x Redis) and
  peak RSS growth (target <= 2x Redis).
- replicated argument: the large argument applied by a replica: time until its offset catches up
  with the primary's, and its peak RSS growth (VmHWM) over the argument.

Split from the `hardening` suite, whose fairness run takes minutes, so these run on their own
(`python -m bench bigargs`, `--millrace-root` to compare a checkout from before a change). RSS is
sampled every 5 ms from /proc and the machine is shared: compare figures within one run.
"""

from __future__ import annotations

import contextlib
import socket
import time

from .harness import Env, Row, Target, pack
from .suite_hardening import Pinger, Sampler

SUITE = "bigargs"


def large_argument(env: Env, servers: dict) -> list[Row]:
    size = env.pick(64, 16) << 20
    growth = Row(SUITE, f"SET of {size >> 20} MB: peak RSS growth / argument", "x", target=Target("max", 1.3))
    stall = Row(SUITE, f"PING max delay during the {size >> 20} MB SET", "ms")
    value = b"v" * size
    for kind, server in servers.items():
        server.flushall()
        sampler, pinger = Sampler(server, 0.005), Pinger(server.port, 0.002)
        time.sleep(0.1)
        with socket.create_connection(("127.0.0.1", server.port), timeout=120) as sock:
            sock.sendall(pack("SET", "big", value))
            assert sock.recv(16) == b"+OK\r\n"
        time.sleep(0.1)
        latencies = pinger.stop()
        top = sampler.stop()
        setattr(growth, kind, (top - sampler.start) / size)
        setattr(stall, kind, max(latencies) * 1000)
        server.flushall()
    return [growth, stall]


def wide_xadd(env: Env, servers: dict) -> list[Row]:
    fields = env.pick(1_000_000, 100_000)
    took = Row(SUITE, f"XADD with {fields} fields", "s", target=Target("ratio_max", 4.0))
    growth = Row(SUITE, f"peak RSS growth during the {fields}-field XADD", "MB", target=Target("ratio_max", 2.0))
    args = ["XADD", "wide", "*"]
    for i in range(fields):
        args += [f"f{i}", f"v{i}"]
    request = pack(*args)
    for kind, server in servers.items():
        server.flushall()
        sampler = Sampler(server, 0.005)
        with socket.create_connection(("127.0.0.1", server.port), timeout=600) as sock:
            start = time.perf_counter()
            sock.sendall(request)
            reply = sock.recv(64)
            elapsed = time.perf_counter() - start
        assert reply.startswith(b"$"), reply
        top = sampler.stop()
        setattr(took, kind, elapsed)
        setattr(growth, kind, (top - sampler.start) / 1e6)
        server.flushall()
    return [took, growth]


def _vm_hwm(server) -> int:
    """The process's peak RSS so far (VmHWM): a replica's peak needs no sampling thread."""
    with open(f"/proc/{server.pid}/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM")


def _caught_up(primary, replica, timeout: float = 600.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        theirs = replica.info("replication")
        if theirs.get("master_link_status") == "up" and theirs.get("slave_repl_offset") == primary.info("replication").get("master_repl_offset"):
            return
        time.sleep(0.01)
    raise RuntimeError("the replica did not catch up")


def replicated_argument(env: Env, servers: dict) -> list[Row]:
    """The large argument on a replica: the time from the primary's reply to the replica's offset
    catching up, and the replica's peak RSS growth (VmHWM) over the argument."""
    size = env.pick(64, 16) << 20
    took = Row(SUITE, f"{size >> 20} MB SET applied by a replica", "s")
    growth = Row(SUITE, f"replica's peak RSS growth / the {size >> 20} MB argument", "x")
    value = b"v" * size
    for kind, primary in servers.items():
        primary.flushall()
        with env.server(kind, "--replicaof", "127.0.0.1", str(primary.port)) as replica:
            _caught_up(primary, replica)
            before = _vm_hwm(replica)
            with socket.create_connection(("127.0.0.1", primary.port), timeout=300) as sock:
                sock.sendall(pack("SET", "big", value))
                assert sock.recv(16) == b"+OK\r\n"
            start = time.perf_counter()
            _caught_up(primary, replica)
            setattr(took, kind, time.perf_counter() - start)
            setattr(growth, kind, (_vm_hwm(replica) - before) / size)
        primary.flushall()
    return [took, growth]


def run(env: Env) -> list[Row]:
    rows: list[Row] = []
    with contextlib.ExitStack() as stack:
        servers = {kind: stack.enter_context(env.server(kind)) for kind in env.kinds("redis", "millrace")}
        for part in (large_argument, wide_xadd, replicated_argument):
            rows += part(env, servers)
    return rows
