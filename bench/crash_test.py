"""`python -m bench.crash_test` (`make crash-test`): kill -9 under a write load, restart, check (issue 18).

Millrace runs with `appendonly yes`, `appendfsync always` in a temporary
directory. Each round several client threads write at once, each on its own
blocking connection, sending small pipelines and recording every reply:

- writers: XADD to `crash:log` (append-only: nothing ever removes an entry,
  so it carries the loss check) and to `crash:work`; every entry carries a
  unique tag `t`, recorded before it is sent, and the ID of each
  acknowledged XADD is recorded;
- group workers: XREADGROUP (group `audit` on crash:log, `g` on crash:work),
  XACK of part of what they were handed, XCLAIM of pending entries (min-idle
  0) and XAUTOCLAIM;
- a trimmer: XTRIM crash:work MAXLEN (exact and `~`) and MINID, XDEL.

At a random moment the server gets SIGKILL (its background child, if a
BGSAVE or BGREWRITEAOF the test started is running, too: a machine that
dies takes every process), the threads see their connections drop, and
the server is started again on the same directory. Then:

- lost: an acknowledged XADD whose entry is not in crash:log (at its ID,
  with its fields); an acknowledged XACK on `audit` whose ID is pending
  again; an entry handed out by an acknowledged XREADGROUP on `audit`, never
  acked by anyone, that is no longer pending; `audit`'s last-delivered-id or
  crash:log's last-generated-id behind an acknowledged reply;
- invented: an entry of either stream whose tag no client sent, or a tag
  present twice;
- inconsistent: XINFO STREAM FULL / GROUPS / CONSUMERS that do not parse, a
  PEL ID above the group's last-delivered-id, entries-read above
  entries-added, pending counts that disagree between XINFO GROUPS,
  XINFO CONSUMERS, XPENDING and the PEL listing.

What survives a SIGKILL is what the server wrote (the page cache outlives
the process), so this checks that no reply precedes its write and that
loading is right; a power cut, which only fsync guards against, is beyond it.

`CRASH_KILLS=n` (default 100) sets the number of kills, `CRASH_SEED` the
random seed, `CRASH_MILLRACE_ROOT` another checkout to run the server from;
`CRASH_STOP_ON_FAIL=1` stops at the first failed check and leaves that
server running. Prints the counts; exits 1 if anything was lost, invented or
inconsistent, 2 if the server failed to start or died by itself.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import hiredis

from .harness import RawConnection, Server, pack, start_server

LOG, WORK = "crash:log", "crash:work"
WRITERS, GROUP_WORKERS = 4, 3
ARGS = ("--appendonly", "yes", "--appendfsync", "always")


def parse_id(raw: bytes) -> tuple[int, int]:
    ms, _, seq = raw.partition(b"-")
    return int(ms), int(seq)


# -- what the clients were told ---------------------------------------------------------


@dataclass
class Ledger:
    """Every client's record, kept across rounds (threads append only to their own lists, merged after)."""

    sent_tags: set[bytes] = field(default_factory=set)  # every tag any XADD carried (crash:log and crash:work)
    acked_log: dict[bytes, bytes] = field(default_factory=dict)  # tag -> ID, XADD crash:log acknowledged
    delivered: set[bytes] = field(default_factory=set)  # IDs handed out on `audit` by an acknowledged XREADGROUP
    ack_sent: set[bytes] = field(default_factory=set)  # IDs an XACK on `audit` named (reply or not)
    ack_done: set[bytes] = field(default_factory=set)  # IDs an acknowledged XACK on `audit` named
    max_delivered: tuple[int, int] = (0, 0)
    ops: int = 0  # acknowledged commands, all clients


@dataclass
class Record:
    """One thread's part of the ledger during one round."""

    sent_tags: list[bytes] = field(default_factory=list)
    acked_log: list[tuple[bytes, bytes]] = field(default_factory=list)
    delivered: list[bytes] = field(default_factory=list)
    ack_sent: list[bytes] = field(default_factory=list)
    ack_done: list[bytes] = field(default_factory=list)
    ops: int = 0
    error: str | None = None  # an error reply: a client bug or a server bug, reported

    def merge_into(self, ledger: Ledger) -> None:
        ledger.sent_tags.update(self.sent_tags)
        ledger.acked_log.update(self.acked_log)
        ledger.delivered.update(self.delivered)
        ledger.ack_sent.update(self.ack_sent)
        ledger.ack_done.update(self.ack_done)
        if self.delivered:
            ledger.max_delivered = max(ledger.max_delivered, max(map(parse_id, self.delivered)))
        ledger.ops += self.ops


# -- the load -------------------------------------------------------------------------------


class Client(threading.Thread):
    """A connection that sends pipelines until the server goes away."""

    def __init__(self, port: int, name: str, seed: int) -> None:
        super().__init__(daemon=True)
        self.port, self.name = port, name
        self.rng = random.Random(seed)
        self.record = Record()
        self.conn: RawConnection | None = None

    def run(self) -> None:
        try:
            self.conn = RawConnection(self.port, timeout=30)
            while True:
                self.step()
        except (OSError, ConnectionError):
            pass  # the kill
        finally:
            if self.conn is not None:
                self.conn.close()

    def pipeline(self, commands: list[tuple]) -> list:
        """Send `commands` at once and read every reply; an error reply stops this client."""
        self.conn.send(b"".join(pack(*command) for command in commands))
        replies = []
        for _ in commands:
            reply = self.conn.read()
            if isinstance(reply, hiredis.ReplyError):
                self.record.error = f"{self.name}: {reply}"
                raise ConnectionError(str(reply))
            replies.append(reply)
            self.record.ops += 1
        return replies

    def step(self) -> None:
        raise NotImplementedError


class Writer(Client):
    def __init__(self, port: int, name: str, seed: int) -> None:
        super().__init__(port, name, seed)
        self.seq = 0

    def step(self) -> None:
        commands, tags = [], []
        for _ in range(self.rng.randint(1, 4)):
            self.seq += 1
            tag = f"{self.name}:{self.seq}".encode()
            key = LOG if self.rng.random() < 0.6 else WORK
            self.record.sent_tags.append(tag)
            commands.append(("XADD", key, "*", "t", tag, "v", "x" * self.rng.randint(1, 40)))
            tags.append((key, tag))
        for (key, tag), reply in zip(tags, self.pipeline(commands), strict=True):
            if key == LOG:
                self.record.acked_log.append((tag, reply))


class GroupWorker(Client):
    def step(self) -> None:
        rng = self.rng
        if rng.random() < 0.5:
            self.audit_step()
        else:
            self.work_step()

    def audit_step(self) -> None:
        """Group `audit` on crash:log: everything it is told is checked after the kill."""
        rng, consumer = self.rng, f"a-{self.name}"
        (reply,) = self.pipeline([("XREADGROUP", "GROUP", "audit", consumer, "COUNT", rng.randint(1, 20), "STREAMS", LOG, ">")])
        ids = [entry[0] for entry in reply[0][1]] if reply else []
        self.record.delivered.extend(ids)
        acking = [entry for entry in ids if rng.random() < 0.7]
        commands = []
        if acking:
            commands.append(("XACK", LOG, "audit", *acking))
            self.record.ack_sent.extend(acking)
        choice = rng.random()
        if choice < 0.2:
            commands.append(("XAUTOCLAIM", LOG, "audit", consumer, "0", "0-0", "COUNT", rng.randint(1, 10)))
        elif choice < 0.4:
            commands.append(("XPENDING", LOG, "audit", "-", "+", "10"))
        if not commands:
            return
        replies = self.pipeline(commands)
        if acking:
            self.record.ack_done.extend(acking)
            replies = replies[1:]
        if 0.2 <= choice < 0.4 and replies[0]:  # XPENDING's listing: claim those entries
            self.pipeline([("XCLAIM", LOG, "audit", consumer, "0", *[entry[0] for entry in replies[0]])])

    def work_step(self) -> None:
        """Group `g` on crash:work, whose entries the trimmer removes."""
        rng, consumer = self.rng, f"w-{self.name}"
        (reply,) = self.pipeline([("XREADGROUP", "GROUP", "g", consumer, "COUNT", rng.randint(1, 20), "STREAMS", WORK, ">")])
        ids = [entry[0] for entry in reply[0][1]] if reply else []
        commands = []
        acking = [entry for entry in ids if rng.random() < 0.5]
        if acking:
            commands.append(("XACK", WORK, "g", *acking))
        pending = self.pipeline([("XPENDING", WORK, "g", "-", "+", "5")])[0]
        if pending:
            commands.append(("XCLAIM", WORK, "g", consumer, "0", *[entry[0] for entry in pending], *(("JUSTID",) if rng.random() < 0.5 else ())))
        if rng.random() < 0.2:
            commands.append(("XAUTOCLAIM", WORK, "g", consumer, "0", "0-0", "COUNT", "5"))
        if commands:
            self.pipeline(commands)


class Trimmer(Client):
    def step(self) -> None:
        rng = self.rng
        choice = rng.random()
        if choice < 0.4:
            command = ("XTRIM", WORK, "MAXLEN", *(("~",) if rng.random() < 0.5 else ()), rng.randint(50, 500))
        elif choice < 0.6:
            last = self.pipeline([("XREVRANGE", WORK, "+", "-", "COUNT", rng.randint(1, 300))])[0]
            if not last:
                return
            command = ("XTRIM", WORK, "MINID", last[-1][0])
        else:
            some = self.pipeline([("XRANGE", WORK, "-", "+", "COUNT", "50")])[0]
            if not some:
                return
            command = ("XDEL", WORK, *[entry[0] for entry in rng.sample(some, min(len(some), 3))])
        self.pipeline([command])
        time.sleep(0.002)


# -- a round: load, kill, restart ----------------------------------------------------------------


def kill_family(server: Server) -> None:
    """SIGKILL the server and any child it forked (a BGSAVE or rewrite in progress)."""
    try:
        with open(f"/proc/{server.pid}/task/{server.pid}/children") as handle:
            kids = [int(word) for word in handle.read().split()]
    except OSError:
        kids = []
    os.kill(server.pid, signal.SIGKILL)
    for pid in kids:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
    server.proc.wait()
    server.stop(keep_dir=True)


def load_round(server: Server, round_no: int, rng: random.Random) -> tuple[list[Client], str]:
    """Run the clients for a random time, start a background save at times, then kill the server."""
    clients: list[Client] = [Writer(server.port, f"{round_no}.w{index}", rng.getrandbits(32)) for index in range(WRITERS)]
    clients += [GroupWorker(server.port, f"{round_no}.g{index}", rng.getrandbits(32)) for index in range(GROUP_WORKERS)]
    clients.append(Trimmer(server.port, f"{round_no}.t", rng.getrandbits(32)))
    for client in clients:
        client.start()
    runtime = rng.uniform(0.05, 1.2)
    background = ""
    if rng.random() < 0.3:
        time.sleep(rng.uniform(0, runtime))
        background = rng.choice(["BGREWRITEAOF", "BGREWRITEAOF", "BGSAVE"])
        reply = server.call(background)
        if isinstance(reply, hiredis.ReplyError):
            background += f" ({reply})"
        time.sleep(rng.uniform(0, 0.3))
    else:
        time.sleep(runtime)
    if server.proc.poll() is not None:
        raise ServerDied(f"the server exited by itself (status {server.proc.returncode}): {server.read_log()}")
    kill_family(server)
    for client in clients:
        client.join(30)
    return clients, background


class ServerDied(Exception):
    """The server exited or failed to start: a result of its own, not a count."""


# -- the checks ---------------------------------------------------------------------------------


@dataclass
class Findings:
    lost: list[str] = field(default_factory=list)
    invented: list[str] = field(default_factory=list)
    inconsistent: list[str] = field(default_factory=list)


def xrange_all(conn: RawConnection, key: str) -> list:
    entries, start = [], "-"
    while True:
        page = conn.call("XRANGE", key, start, "+", "COUNT", "10000")
        if isinstance(page, hiredis.ReplyError):
            raise RuntimeError(f"XRANGE {key}: {page}")
        entries.extend(page)
        if len(page) < 10000:
            return entries
        start = "(" + page[-1][0].decode()


def pairs(flat: list) -> dict:
    if len(flat) % 2:
        raise ValueError(f"odd field list: {flat!r}")
    return dict(zip(flat[::2], flat[1::2], strict=True))


def check(conn: RawConnection, ledger: Ledger) -> Findings:
    found = Findings()
    tags_seen: set[bytes] = set()
    for key in (LOG, WORK):
        entries = xrange_all(conn, key)
        length = conn.call("XLEN", key)
        if length != len(entries):
            again = len(xrange_all(conn, key))  # the same read once more: a passing state or a lasting one
            short = len(conn.call("XRANGE", key, "-", "+", "COUNT", "10"))
            backwards = len(conn.call("XREVRANGE", key, "+", "-", "COUNT", "10000"))
            found.inconsistent.append(
                f"{key}: XRANGE - + gave {len(entries)} entries, XLEN says {length}; then XRANGE - + again gives {again}, "
                f"with COUNT 10 {short}, XREVRANGE + - COUNT 10000 {backwards}"
            )
        for entry_id, flat in entries:
            fields = pairs(flat)
            tag = fields.get(b"t")
            if tag is None or tag not in ledger.sent_tags:
                found.invented.append(f"{key} {entry_id.decode()}: {flat!r} was never sent")
            elif tag in tags_seen:
                found.invented.append(f"{key} {entry_id.decode()}: tag {tag.decode()} is present twice")
            elif key == LOG and tag in ledger.acked_log and ledger.acked_log[tag] != entry_id:
                found.invented.append(f"{key}: tag {tag.decode()} at {entry_id.decode()}, acknowledged at {ledger.acked_log[tag].decode()}")
            if tag is not None:
                tags_seen.add(tag)
    for tag, entry_id in ledger.acked_log.items():
        if tag not in tags_seen:
            alone = conn.call("XRANGE", LOG, entry_id, entry_id)  # told apart: gone, or only missed by the full range
            seen = "XRANGE of its ID alone finds it" if alone else "XRANGE of its ID alone finds nothing"
            found.lost.append(f"{LOG}: acknowledged XADD {entry_id.decode()} ({tag.decode()}) is missing ({seen})")

    stream = conn.call("XINFO", "STREAM", LOG)
    if isinstance(stream, hiredis.ReplyError):
        found.inconsistent.append(f"XINFO STREAM {LOG}: {stream}")
        return found
    last_generated = parse_id(pairs(stream)[b"last-generated-id"])
    if ledger.acked_log and last_generated < max(map(parse_id, ledger.acked_log.values())):
        found.lost.append(f"{LOG}: last-generated-id {last_generated} is behind an acknowledged XADD")

    pels = {key: check_groups(conn, key, found) for key in (LOG, WORK)}
    audit = pels[LOG].get(b"audit")
    if audit is None:
        if ledger.delivered:
            found.lost.append(f"{LOG}: group audit is gone")
        return found
    pending, last_delivered = audit
    if last_delivered < ledger.max_delivered:
        found.lost.append(f"{LOG} audit: last-delivered-id {last_delivered} is behind an acknowledged delivery {ledger.max_delivered}")
    for entry_id in ledger.ack_done & pending:
        found.lost.append(f"{LOG} audit: {entry_id.decode()} is pending again after an acknowledged XACK")
    for entry_id in ledger.delivered - ledger.ack_sent - pending:
        found.lost.append(f"{LOG} audit: {entry_id.decode()} was delivered, never acked, and is not pending")
    return found


def check_groups(conn: RawConnection, key: str, found: Findings) -> dict[bytes, tuple[set[bytes], tuple[int, int]]]:
    """Each group's consistency; returns its PEL IDs and last-delivered-id by name."""
    out: dict[bytes, tuple[set[bytes], tuple[int, int]]] = {}
    full = conn.call("XINFO", "STREAM", key, "FULL", "COUNT", "10")
    if isinstance(full, hiredis.ReplyError) or not isinstance(full, list):
        found.inconsistent.append(f"XINFO STREAM {key} FULL: {full!r}")
    stream = pairs(conn.call("XINFO", "STREAM", key))
    entries_added = stream[b"entries-added"]
    groups = conn.call("XINFO", "GROUPS", key)
    if isinstance(groups, hiredis.ReplyError):
        found.inconsistent.append(f"XINFO GROUPS {key}: {groups}")
        return out
    for flat in groups:
        info = pairs(flat)
        name = info[b"name"]
        where = f"{key} group {name.decode()}"
        last_delivered = parse_id(info[b"last-delivered-id"])
        if last_delivered > parse_id(stream[b"last-generated-id"]):
            found.inconsistent.append(f"{where}: last-delivered-id {last_delivered} beyond last-generated-id")
        read = info[b"entries-read"]
        if read is not None and read > entries_added:
            found.inconsistent.append(f"{where}: entries-read {read} > entries-added {entries_added}")
        summary = conn.call("XPENDING", key, name)
        listing = conn.call("XPENDING", key, name, "-", "+", str(max(1, info[b"pending"]) + 10))
        consumers = conn.call("XINFO", "CONSUMERS", key, name)
        if any(isinstance(reply, hiredis.ReplyError) for reply in (summary, listing, consumers)):
            found.inconsistent.append(f"{where}: XPENDING / XINFO CONSUMERS: {summary!r} {listing!r} {consumers!r}")
            continue
        ids = {entry[0] for entry in listing}
        by_consumer = sum(pairs(consumer)[b"pending"] for consumer in consumers)
        if not (info[b"pending"] == summary[0] == len(listing) == len(ids) == by_consumer):
            found.inconsistent.append(
                f"{where}: pending {info[b'pending']} (XINFO GROUPS), {summary[0]} (XPENDING), {len(listing)} listed, {by_consumer} by consumer"
            )
        above = [entry_id for entry_id in ids if parse_id(entry_id) > last_delivered]
        if above:
            found.inconsistent.append(f"{where}: {len(above)} PEL IDs above last-delivered-id, e.g. {above[0].decode()}")
        out[name] = (ids, last_delivered)
    return out


# -- the run ---------------------------------------------------------------------------------------


def main() -> int:
    kills = int(os.environ.get("CRASH_KILLS", "100"))
    seed = int(os.environ.get("CRASH_SEED", str(random.randrange(1 << 30))))
    rng = random.Random(seed)
    root = os.environ.get("CRASH_MILLRACE_ROOT")
    millrace_root = Path(root) if root else None
    workdir = tempfile.mkdtemp(prefix="millrace-crash-")
    print(f"crash test: {kills} kills, seed {seed}, appendfsync always, in {workdir}", flush=True)
    ledger = Ledger()
    totals: dict[str, set[str]] = {"lost": set(), "invented": set(), "inconsistent": set()}  # distinct findings: a loss stays lost
    started = time.monotonic()
    server = start_server("millrace", *ARGS, millrace_root=millrace_root, workdir=workdir)
    try:
        with server.connect() as conn:
            for key in (LOG, WORK):
                conn.call("XADD", key, "*", "t", f"setup:{key}")
                ledger.sent_tags.add(f"setup:{key}".encode())
            conn.call("XGROUP", "CREATE", LOG, "audit", "0")
            conn.call("XGROUP", "CREATE", WORK, "g", "0")
        for round_no in range(1, kills + 1):
            clients, background = load_round(server, round_no, rng)
            errors = [client.record.error for client in clients if client.record.error]
            for client in clients:
                client.record.merge_into(ledger)
            before = f"{workdir}.before"  # the files as the kill left them, kept if this round fails
            shutil.rmtree(before, ignore_errors=True)
            shutil.copytree(workdir, before)
            server = start_server("millrace", *ARGS, millrace_root=millrace_root, workdir=workdir)
            with server.connect(timeout=120) as conn:
                found = check(conn, ledger)
            found.inconsistent.extend(f"error reply: {error}" for error in errors)
            for name, lines in totals.items():
                lines.update(getattr(found, name))
            status = "ok" if not (found.lost or found.invented or found.inconsistent) else "FAIL"
            if status == "FAIL" and not os.path.exists(f"{workdir}.failed-{round_no}"):
                os.rename(before, f"{workdir}.failed-{round_no}")
                status += f" (the files before this restart: {workdir}.failed-{round_no})"
                if os.environ.get("CRASH_STOP_ON_FAIL"):  # leave the failed server up to look at
                    print(f"kill {round_no}: {found.lost[:3]} {found.invented[:3]} {found.inconsistent[:3]}")
                    print(f"stopped at the first failure; the server still runs: pid {server.pid}, port {server.port}, dir {workdir}")
                    return 1
            print(
                f"kill {round_no:3d}: {status}, {sum(client.record.ops for client in clients)} replies"
                f"{', during ' + background if background else ''}; lost {len(found.lost)}, invented {len(found.invented)}, inconsistent {len(found.inconsistent)}",
                flush=True,
            )
            for line in found.lost[:5] + found.invented[:5] + found.inconsistent[:5]:
                print(f"    {line}", flush=True)
    except (ServerDied, RuntimeError) as exc:
        print(f"crash test stopped: {exc}", flush=True)
        server.stop(keep_dir=True)
        print(f"the directory is kept for inspection: {workdir}")
        return 2
    failed = any(totals.values())
    server.stop(keep_dir=failed)
    shutil.rmtree(f"{workdir}.before", ignore_errors=True)
    if failed:
        print(f"the directory is kept for inspection: {workdir}")
    print(
        f"\n{kills} kills in {time.monotonic() - started:.0f} s, {ledger.ops} acknowledged commands, "
        f"{len(ledger.acked_log)} acknowledged XADDs on {LOG}, {len(ledger.delivered)} deliveries on audit\n"
        f"lost acknowledged writes: {len(totals['lost'])}\n"
        f"invented entries: {len(totals['invented'])}\n"
        f"inconsistent group state: {len(totals['inconsistent'])}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
