"""XREADGROUP ... CLAIM (Redis 8.4) beside the two-command way it replaces, XAUTOCLAIM + XREADGROUP.

Set-up, on a fresh server per run: `bench:claim` gets `length` entries
(pipelined XADD), a group at 0, and a consumer `dead` is handed the first
`backlog` of them (pipelined XREADGROUP) and never acknowledges them; the
run waits until they are more than `MIN_IDLE` ms idle. Then `clients`
consumers, unpipelined, each loop on one of

- claim: `XREADGROUP GROUP g cN COUNT 10 CLAIM 1000 STREAMS bench:claim >`,
  then `XACK` of the IDs delivered;
- two commands: `XAUTOCLAIM bench:claim g cN 1000 0-0 COUNT 10` (with the
  entries, not JUSTID: a consumer needs them, and CLAIM sends them), then, if
  it claimed fewer than 10, `XREADGROUP ... COUNT <the rest> ... >`, then
  `XACK` of everything delivered,

so both take the dead consumer's backlog first and then new entries, ten per
round. The figure is entries delivered and acknowledged per second over the
window. Redis 8.2.3 (the oracle) has no CLAIM: it runs the two-command way
only. One asyncio (uvloop) client process drives both servers, the same code
for each, so its own cost is in every figure (noisy on this shared machine).
"""

from __future__ import annotations

import asyncio
import time

import hiredis

from .harness import Env, Row, Server, Target, load_pipelined, pack

KEY = b"bench:claim"
MIN_IDLE = 1000
BATCH = 10


async def _consumer(port: int, name: bytes, group: bytes, mode: str, stop_at: float, tally: list[int]) -> None:
    reader_, writer = await asyncio.open_connection("127.0.0.1", port)
    parser = hiredis.Reader()

    async def call(*args: bytes):
        writer.write(hiredis.pack_command(args))
        while True:
            reply = parser.gets()
            if reply is not False:
                if isinstance(reply, hiredis.ReplyError):
                    raise RuntimeError(f"{args[0]!r}: {reply}")
                return reply
            parser.feed(await reader_.read(65536))

    claim_read = (b"XREADGROUP", b"GROUP", group, name, b"COUNT", b"%d" % BATCH, b"CLAIM", b"%d" % MIN_IDLE, b"STREAMS", KEY, b">")
    autoclaim = (b"XAUTOCLAIM", KEY, group, name, b"%d" % MIN_IDLE, b"0-0", b"COUNT", b"%d" % BATCH)
    try:
        while time.monotonic() < stop_at:
            if mode == "claim":
                reply = await call(*claim_read)
                ids = [entry[0] for entry in reply[0][1]] if reply else []
            else:
                ids = [entry[0] for entry in (await call(*autoclaim))[1]]
                if len(ids) < BATCH:
                    read = (b"XREADGROUP", b"GROUP", group, name, b"COUNT", b"%d" % (BATCH - len(ids)), b"STREAMS", KEY, b">")
                    reply = await call(*read)
                    ids += [entry[0] for entry in reply[0][1]] if reply else []
            if not ids:
                tally[2] = 1  # ran out of entries before the window ended
                break
            await call(b"XACK", KEY, group, *ids)
            tally[0] += 1
            tally[1] += len(ids)
    finally:
        writer.close()


def drive(port: int, group: str, mode: str, clients: int, seconds: float) -> tuple[float, bool]:
    """Run the consumers for `seconds`; entries acknowledged per second, and whether the entries ran out."""
    try:
        import uvloop

        runner = uvloop.run
    except ImportError:  # pragma: no cover - the dev extra has uvloop
        runner = asyncio.run
    tally = [0, 0, 0]  # rounds, entries, exhausted

    async def main() -> float:
        started = time.monotonic()
        stop_at = started + seconds
        names = [b"c%d" % i for i in range(clients)]
        await asyncio.gather(*(_consumer(port, name, group.encode(), mode, stop_at, tally) for name in names))
        return time.monotonic() - started

    elapsed = runner(main())
    return tally[1] / elapsed, bool(tally[2])


def prepare(server: Server, group: str, length: int, backlog: int) -> None:
    """A fresh stream, the group, and `backlog` entries pending on a consumer that never acks, idle long enough."""
    server.call("DEL", KEY)
    load_pipelined(server, (pack("XADD", KEY, "*", "sensor-id", "1234", "temperature", "10.5") for _ in range(length)))
    server.call("XGROUP", "CREATE", KEY, group, "0")
    reads = (pack("XREADGROUP", "GROUP", group, "dead", "COUNT", "1000", "STREAMS", KEY, ">") for _ in range(backlog // 1000))
    load_pipelined(server, reads, window=8)
    time.sleep(MIN_IDLE / 1000 + 0.2)


def claim_rows(env: Env, suite: str) -> list[Row]:
    length = env.pick(400_000, 40_000)
    backlog = env.pick(100_000, 10_000)
    clients = env.pick(20, 10)
    seconds = env.pick(4.0, 1.0)
    label = f"{backlog // 1000}k idle pending + new, -c {clients}"
    claim = Row(suite, f"XREADGROUP CLAIM + XACK ({label})", "entries/s")
    two = Row(suite, f"XAUTOCLAIM + XREADGROUP + XACK ({label})", "entries/s")
    gain = Row(suite, "CLAIM over XAUTOCLAIM + XREADGROUP (Millrace)", "x")
    two.target = Target("ratio_min", 0.3)
    gain.target = Target("min", 1.0)
    claim.note = "Redis 8.2.3 has no CLAIM: compare with its XAUTOCLAIM + XREADGROUP row"
    gain.note = "Millrace's CLAIM row over its two-command row: one command per round instead of two"
    if not env.millrace_supports(("XREADGROUP", "GROUP", "g", "c", "CLAIM", "0", "STREAMS", "k", ">")):
        return env.unsupported(suite, [(claim.name, claim.unit), (two.name, two.unit), (gain.name, gain.unit)], "XREADGROUP ... CLAIM")
    for kind in env.kinds("redis", "millrace"):
        modes = ["two", "claim"] if kind == "millrace" else ["two"]
        with env.server(kind) as server:
            for mode in modes:
                runs = []
                for index in range(env.rounds):
                    group = f"{mode}{index}"
                    env.log(f"r8: {mode} load on {kind} (run {index + 1}): {length} entries, {backlog} idle pending")
                    prepare(server, group, length, backlog)
                    runs.append(drive(server.port, group, mode, clients, seconds))
                row = claim if mode == "claim" else two
                setattr(row, kind, max(rate for rate, _exhausted in runs))
                row.extra[kind] = {"entries_per_second": [round(rate) for rate, _ in runs], "exhausted": any(e for _, e in runs)}
    if claim.millrace and two.millrace:
        gain.millrace = claim.millrace / two.millrace
    return [claim, two, gain]
