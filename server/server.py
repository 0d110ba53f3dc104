"""Server state and dispatch: one place where a command meets the keyspace.

`Server.execute` resolves argv through the command table, checks arity,
authentication and MULTI queuing, calls the handler and then does what every
write needs: touch WATCHed and blocked-on keys, count dirty changes, and pass
the handler's effects on to propagation (the AOF and replicas consume the
same normalized commands).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from time import perf_counter_ns

from protocol.errors import ReplyError, arg_text, error_line
from protocol.reply import Error
from storage.keyspace import Database, Keyspace
from storage.stream_id import format_id

from . import REDIS_VERSION, notify, output_limits, retention
from .blocking import Block, BlockingManager, ReadyKeys
from .command import COMMANDS, Command, UnknownSubcommand
from .config import Config
from .default_user import DefaultUser
from .dirty import RULES as DIRTY_RULES
from .eviction import AccessClock, Evictor, policy_kind
from .latency import EXACT_US, LatencyMonitor, coarse_us
from .latency import threshold_ns as latency_threshold_ns
from .lazyfree import LazyFree
from .loading import LoadingProgress
from .maxmemory import MemoryMeter
from .pause import may_replicate
from .pubsub import KEY_MISS, PubSub
from .slowlog import SlowLog
from .slowlog import threshold_ns as slowlog_threshold

Effects = list[list[bytes]]

# Commands that run at once even inside MULTI, as in Redis.
NOT_QUEUED = frozenset({"exec", "discard", "multi", "watch", "quit", "reset"})
# Consumer-group bookkeeping Redis signals neither to WATCH nor to blocked readers
# (t_stream.c calls no signalModifiedKey/signalKeyAsReady for XREADGROUP, XACK, XCLAIM...).
QUIET_EFFECTS = frozenset({
    "xack", "xclaim", "xgroup|setid", "xgroup|createconsumer", "xgroup|delconsumer", "xsetid",
    "xgroup|join", "xgroup|defer", "xgroup|undefer", "xgroup|leave",  # a KEYSHARED read's: no more a change than a plain read's
})
# Group changes that wake blocked readers (DESTROY releases XREADGROUP with NOGROUP) but are no
# change to WATCH: Redis calls signalKeyAsReady, not signalModifiedKey, for them (XGROUP CREATE
# touches WATCH only when MKSTREAM creates the key).
READY_ONLY_EFFECTS = frozenset({"xgroup|create", "xgroup|destroy"})
# Quiet effects that can end a KEYSHARED group's draining (issue 22): an acknowledgement, a claim, a
# consumer deleted or leaving, a SETID, look-ahead room freed (UNDEFER) or a join that hands a hash
# back frees entries a blocked reader of that group may now get, so they wake its readers (no WATCH
# touch, as for any quiet effect). Their key is followed by the group.
KEYSHARED_RELEASES = frozenset({"xack", "xclaim", "xgroup|setid", "xgroup|delconsumer", "xgroup|leave", "xgroup|undefer", "xgroup|join"})
# What a RESP2 client with subscriptions may run (Redis's processCommand).
SUBSCRIBED_CONTEXT = frozenset({"subscribe", "unsubscribe", "psubscribe", "punsubscribe", "ssubscribe", "sunsubscribe", "ping", "quit", "reset"})
BLOCKED = object()  # execute() result: the client is now waiting


class Server:
    """The server state every handler reaches as `ctx.server`: keyspace, clients, stats, propagation."""

    # Slots, not an instance dict: every command reads several of these, and CPython 3.11
    # keeps at most 30 attributes in its fast dict-less layout (the server has more).
    __slots__ = (
        "config", "default_user", "keyspace", "clients", "next_client_id", "commands", "blocking", "watched", "monitors",
        "effect_listeners", "_exec_effects", "_propagated_db", "run_id", "start_time", "now", "dirty",
        "net_input_bytes", "net_output_bytes", "oom", "pause", "slowlog", "slowlog_threshold_ns", "stats",
        "keyspace_hits", "keyspace_misses", "errorstats", "loop", "pending_writes", "port", "version",
        "memory_startup", "memory_peak", "memory_peak_time", "replica_keys_with_expire", "ops_samples", "idle_checked", "active_expire", "shutdown",
        "shutdown_save", "shutdown_nosave", "shutdown_wait", "shutdown_asap", "hz", "startup_hooks", "shutdown_hooks", "persistence_info", "loading", "loading_progress",
        "lastsave", "replication_info", "debug_reload", "debug_loadaof", "persistence", "aof", "disk_error",
        "refusing", "caller", "replid", "master_repl_offset", "replication", "pubsub", "idmp_keys", "keyshared_keys",
        "latency", "latency_tracking", "latency_threshold_ns", "reads_processed", "writes_processed", "retained", "normal_output_limits", "memory_meter",
        "tracking", "access", "evictor", "expired_stale_perc", "lazyfree",
    )

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or Config()
        self.keyspace = Keyspace(self.config["databases"])
        self.clients: dict[int, object] = {}
        self.next_client_id = 1
        self.commands: dict[bytes, Command] = dict(COMMANDS)  # exact-case lookup cache
        self.blocking = BlockingManager()
        self.watched: dict[tuple[int, bytes], set] = {}
        self.monitors: list = []
        self.effect_listeners: list[Callable[[Effects], None]] = []
        self._exec_effects: list[tuple[int, Effects]] | None = None
        self._propagated_db = -1
        self.run_id = os.urandom(20).hex()
        self.start_time = time.time()
        self.now = int(self.start_time * 1000)
        self.dirty = 0
        self.net_input_bytes = self.net_output_bytes = 0  # INFO total_net_input/output_bytes
        self.oom = False  # memory over maxmemory (checked by the cron): denyoom commands are refused
        self.disk_error: str | None = None  # MISCONF text while the disk refuses writes (persistence sets it)
        self.refusing = False  # oom or disk_error: the fast paths leave every command to execute()'s checks
        self.pause = None  # a server.pause.Pause while CLIENT PAUSE is in force
        self.slowlog = SlowLog(self.config["slowlog-max-len"])
        self.slowlog_threshold_ns = slowlog_threshold(self.config["slowlog-log-slower-than"])
        self.stats: dict[str, int] = dict.fromkeys(
            (
                "total_connections_received",
                "total_error_replies",
                "rejected_connections",
                "expired_keys",
                "evicted_keys",
                "expired_time_cap_reached_count",
                "expire_cycle_cpu_us",
            ),
            0,
        )
        # INFO's keyspace_hits/misses: attributes, not `stats` entries, as GET counts one on every call
        self.keyspace_hits = self.keyspace_misses = 0
        self.errorstats: dict[str, int] = {}
        self.loop = None  # set by the listener
        self.pending_writes: list = []  # clients with queued replies (Redis's clients_pending_write)
        self.port = self.config["port"]
        self.version = REDIS_VERSION
        self.memory_startup = self.memory_peak = 0  # INFO memory: RSS at start-up and the highest seen
        self.memory_peak_time = 0  # and when it was seen (unix time)
        # On a writable replica: keys its own clients gave a TTL, which it expires itself (no primary's DEL
        # comes for them; Redis's slaveKeysWithExpire). None on a primary.
        self.replica_keys_with_expire: set[tuple[int, bytes]] | None = None
        self.ops_samples: list[tuple[int, int, int, int]] = []  # INFO instantaneous_*: the cron's samples
        self.idle_checked = 0  # when the cron last looked for clients idle past `timeout`
        self.active_expire = True  # DEBUG SET-ACTIVE-EXPIRE
        self.idmp_keys: dict[tuple[int, bytes], object] = {}  # (db, key) -> stream with IDMP state, for its expiry cron
        self.keyshared_keys: dict[tuple[int, bytes], object] = {}  # (db, key) -> stream with KEYSHARED session timeouts (keyshared_sessions.py)
        self.shutdown: Callable[[], object] | None = None  # set by the listener: stops the event loop
        self.shutdown_save = self.shutdown_nosave = False  # SHUTDOWN's SAVE / NOSAVE for the shutdown hooks
        self.shutdown_wait = None  # a server.shutdown.Shutdown while lagging replicas catch up first
        self.shutdown_asap = False  # a shutdown signal arrived (a second SIGINT then exits at once)
        self.startup_hooks: list[Callable[[], None]] = []  # persistence: load before accepting clients
        self.shutdown_hooks: list[Callable[[], None]] = []  # persistence: save on the way out
        self.persistence_info: Callable[[], dict] | None = None  # INFO persistence fields it refines
        self.loading = False  # INFO loading
        self.loading_progress = LoadingProgress()  # INFO's loading_* fields while loading
        self.lastsave = self.start_time  # LASTSAVE, INFO rdb_last_save_time
        self.replication_info: Callable[[], list] | None = None  # INFO replication, from the replication layer
        # DEBUG RELOAD / LOADAOF, from the persistence layer (each takes DEBUG's remaining arguments)
        self.debug_reload: Callable[[list[bytes]], object] | None = None
        self.debug_loadaof: Callable[[list[bytes]], object] | None = None
        self.persistence = None  # server.persistence.Persistence, installed by the command line
        self.aof = None  # the open AOF increment's writer while appendonly is on
        self.replid = self.run_id[:40]  # the replication ID and offset a snapshot records
        self.master_repl_offset = 0
        self.replication = None  # server.replication.Replication, installed by the command line
        self.caller = None  # the client whose commands Client.run is running (PubSub defers its pushes)
        # Redis's DefaultUser: requirepass is a shortcut for its password; an ACL file or `user` line sets it at start-up
        self.default_user = DefaultUser()
        self.default_user.set_requirepass(self.config["requirepass"])
        self.config.listeners.append(lambda name, value: name == "requirepass" and self.set_requirepass(value))
        self.hz = self.config["hz"]  # the cron's rate: hz, raised with the clients under dynamic-hz (adapt_hz)
        self.config.listeners.append(lambda name, value: name == "hz" and setattr(self, "hz", value))
        self.pubsub = PubSub(self)  # channel and pattern subscriptions, keyspace notifications
        self.latency = LatencyMonitor()  # LATENCY's spike events (latency-monitor-threshold)
        self.latency_tracking = self.config["latency-tracking"]  # per-command histograms for INFO latencystats
        self.latency_threshold_ns = latency_threshold_ns(self.config["latency-monitor-threshold"])
        self.reads_processed = self.writes_processed = 0  # INFO total_reads_processed / total_writes_processed
        retention.install(self)  # streams with a consumption-based retention policy (self.retained)
        self.normal_output_limits = output_limits.normal_limits(self.config)  # None: nothing to check
        self.memory_meter = MemoryMeter(self)  # maxmemory: the data's memory, checked before each denyoom command
        self.tracking = None  # server.tracking.Tracking once a client enables CLIENT TRACKING (Redis's TrackingTable)
        self.expired_stale_perc = 0.0  # INFO expired_stale_perc (a fraction): active expiry's moving average
        self.evictor = Evictor(self)  # maxmemory-policy's evictions (server/eviction.py)
        self.config.listeners.append(lambda name, value: name == "maxmemory" and self.evictor.new_maxmemory())
        self.lazyfree = LazyFree(self)  # flushed databases, freed a slice at a time (server/lazyfree.py)
        self.access: AccessClock | None = None  # the keys' access clock, while an LRU or LFU policy is set
        self.policy_changed()

    def policy_changed(self) -> None:
        """maxmemory-policy set: an LRU or LFU policy keeps an access clock, a fresh one when the kind changes
        (Redis: "when switching between policies at runtime LRU and LFU data will take some time to adjust")."""
        kind = policy_kind(self.config["maxmemory-policy"])
        if kind is None:
            self.access = None
        elif self.access is None or self.access.kind != kind:
            self.access = AccessClock(self, kind)

    def set_requirepass(self, password: str) -> None:
        self.default_user.set_requirepass(password)
        self.auth_changed()

    def auth_changed(self) -> None:
        """The default user changed: Redis's authRequired is judged at each command from the user's flags, so a
        client that never logged in runs while the user has no password, and must AUTH again once it has one."""
        required = self.default_user.auth_required
        for client in self.clients.values():
            client.authenticated = client.logged_in or not required
            client.reader.unauthenticated = not client.authenticated

    def clock(self) -> int:
        """Refresh the cached time (each read does it too, like Redis's cached mstime)."""
        self.now = now = time.time_ns() // 1_000_000
        return now

    # -- dispatch --------------------------------------------------------

    def lookup_command(self, name: bytes) -> Command | None:
        """The command named `name` in any letter case; hits are cached as sent."""
        cmd = self.commands.get(name)
        if cmd is None:
            cmd = COMMANDS.get(name.lower())
            if cmd is not None and len(self.commands) < 4096:
                self.commands[name] = cmd
        return cmd

    def execute(self, client, argv: list[bytes]):
        """Run one command for client; returns the reply, or BLOCKED.

        Client.data_received and Client.run call `call` directly for a request
        none of these checks can stop (a known command with no subcommands and
        a valid argc, from an authenticated client outside MULTI, no pause or
        OOM or disk error in force): keep the three in step.
        """
        cmd = self.commands.get(argv[0]) or self.lookup_command(argv[0])
        try:
            if cmd is None:
                raise ReplyError(_unknown_command(argv))
            if cmd.subcommands:
                cmd = cmd.resolve(argv)
            if not cmd.min_args <= len(argv) <= cmd.max_args and not (client.loading and len(argv) <= cmd.loading_max_args):
                raise ReplyError(f"ERR wrong number of arguments for '{cmd.name}' command")
            if not client.authenticated and "no-auth" not in cmd.flags:
                raise ReplyError("NOAUTH Authentication required.")
            if cmd.name == "debug":  # Redis's CMD_PROTECTED check: refused before MULTI can queue it
                from .commands.server import DEBUG_NOT_ALLOWED, debug_refused

                if debug_refused(client):
                    raise ReplyError(DEBUG_NOT_ALLOWED)
            if self.refusing and not client.loading:
                self.refuse(cmd, argv, client)
            if client.restricted:
                if client.subscribed and cmd.name not in SUBSCRIBED_CONTEXT:
                    raise ReplyError(
                        f"ERR Can't execute '{cmd.name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
                    )
            if self.loading and not client.loading and "loading" not in cmd.flags:  # start-up loading serves clients between its steps
                raise ReplyError("LOADING Redis is loading the dataset in memory")
            if client.restricted and client.monitor and (cmd.write or "readonly" in cmd.flags or may_replicate(cmd)):
                raise ReplyError("ERR Replica can't interact with the keyspace")  # a monitor is a replica to Redis
        except ReplyError as exc:
            if client.multi is not None:
                client.multi_error = True
            if type(exc) is UnknownSubcommand:
                cmd = None
            if self.tracking is not None:
                self.tracking.rejected(client, cmd)
            if cmd is not None and cmd.name == "exec":
                # Redis's execCommandAbort, in MULTI or not: the transaction and WATCHes end,
                # the error is EXECABORT, and MONITOR sees the EXEC that call() never ran
                from .commands.transactions import exec_abort

                if self.monitors:
                    self.feed_monitors(client, cmd, argv)
                return self.error(exec_abort(client, exc.message), cmd, rejected=True)
            return self.error(exc.message, cmd, rejected=True)
        if self.pause is not None and not client.loading and self.pause.applies(client, cmd):
            from .pause import postpone  # CLIENT PAUSE in force

            return postpone(self, client, argv)
        if client.multi is not None and cmd.name not in NOT_QUEUED:
            if "no-multi" in cmd.flags:
                client.multi_error = True
                return self.error("ERR Command not allowed inside a transaction", cmd, rejected=True)
            return client.queue(cmd, argv)
        before = self.memory_meter.before
        if before is None or before[0] is not argv:  # (a command admitted, then refused or held: not this one)
            return self.call(client, cmd, argv)
        try:
            return self.call(client, cmd, argv)
        finally:
            self.memory_meter.settle()  # what the admitted write added (server/maxmemory.py)

    def snapshot_header(self):
        """Where a snapshot taken now stands in the replication stream."""
        from persistence.snapshot import Header

        from . import __version__

        master = self.replication.master if self.replication is not None else None
        stream_db = master.client.db.id if master is not None else -1
        return Header(self.replid, self.master_repl_offset, stream_db, __version__)

    def update_refusing(self) -> None:
        """Is any state in force that refuses some commands? Then every command goes through execute()."""
        replication = self.replication
        self.refusing = self.loading or self.oom or bool(self.config["maxmemory"]) or self.disk_error is not None or (
            replication is not None and (replication.master is not None or self.config["min-replicas-to-write"] > 0)
        )

    def refuse(self, cmd: Command, argv: list[bytes], client=None) -> None:
        """Redis's processCommand checks while `refusing`, in its order: OOM, MISCONF, NOREPLICAS, READONLY, MASTERDOWN.

        EXEC is judged by what it queued (Redis's mstate flags): a write if any is, refused under OOM
        if any may grow memory, on a stale replica if any may not run there."""
        write, denyoom, stale = cmd.write, "denyoom" in cmd.flags, "stale" in cmd.flags
        if cmd.name == "exec" and client is not None and client.multi:
            ops = [op for op, _ in client.multi]
            write = any(op.write for op in ops)
            denyoom = any("denyoom" in op.flags for op in ops)
            stale = all("stale" in op.flags for op in ops)
        if self.config["maxmemory"]:
            if denyoom:
                if not self.memory_meter.admit(client, cmd, argv):
                    raise ReplyError("OOM command not allowed when used memory > 'maxmemory'.")
            elif write:  # (a deletion makes room at once: DEL, UNLINK, GETDEL, a smaller SETRANGE...)
                self.memory_meter.record(client, cmd, argv)
        if self.disk_error is not None and (write or cmd.name == "ping"):
            raise ReplyError(self.disk_error)  # Redis refuses PING too
        replication = self.replication
        if replication is None:
            return
        config = self.config
        if replication.master is None:
            if write and config["min-replicas-to-write"] and config["min-replicas-max-lag"] and replication.good_replicas < config["min-replicas-to-write"]:
                raise ReplyError("NOREPLICAS Not enough good replicas to write.")
            return
        if write and config["replica-read-only"]:
            raise ReplyError("READONLY You can't write against a read only replica.")
        if replication.master.state != "connected" and not config["replica-serve-stale-data"] and not stale:
            raise ReplyError("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.")

    def call(self, client, cmd: Command, argv: list[bytes]):
        """Run a resolved command; used by execute, EXEC and the loaders."""
        start = perf_counter_ns()
        offset = self.master_repl_offset
        flags = self.pubsub.active  # notify-keyspace-events while anyone is subscribed
        notifying = flags and (cmd.write or flags & KEY_MISS)
        try:
            if notifying:
                before = notify.before(self, client, cmd, argv)
            if cmd.write and self.replica_keys_with_expire is not None and not client.loading:
                result = self._replica_write(client, cmd, argv)
            else:
                result = cmd.handler(client, argv)
        except ReplyError as exc:
            if not self.loading:  # an AOF replay counts nothing (count_call below)
                cmd.failed_calls += 1
            result = self.error(exc.message)
            if notifying:
                if client.db.expired:
                    self.propagate_expired(client.db)
                notify.key_misses(self, client.db.id, before, exc.message, notify.value_type(cmd))
        else:
            if notifying:
                self.notify_call(client, cmd, argv, result, before)
            if cmd.blocking and type(result) is Block:
                result = self.block(client, cmd, result)
            elif cmd.write:
                result, effects = result
                if effects and (self.retained.keys or self.retained.rescan):  # some stream may have a retention policy
                    effects = retention.after_write(self, client, cmd, argv, effects)
                if effects:
                    db = client.db
                    if self.replica_keys_with_expire is not None and not client.loading:
                        self.remember_replica_keys(db, effects)
                    rule = DIRTY_RULES.get(cmd.name)
                    dirty = len(effects) if rule is None else rule(result, effects)
                    if (db.expired or self.watched or self.blocking.waiters or self.effect_listeners or self._exec_effects is not None
                            or self.tracking is not None or self.access is not None):
                        self.after_write(db.id, effects, dirty)
                    else:  # the quiet case: nothing to touch, queue or propagate
                        self.dirty += dirty
        elapsed = perf_counter_ns() - start
        if result is BLOCKED:  # counted when the wait ends (unblock), as Redis's updateStatsOnUnblock
            block = client.blocked
            block.argv = argv
            block.duration_ns = elapsed
        elif not self.loading:  # an AOF being replayed counts nothing, as in Redis
            self.count_call(client, cmd, argv, elapsed)
            if elapsed >= self.latency_threshold_ns:
                self.latency.add("fast-command" if "fast" in cmd.flags else "command", elapsed // 1_000_000)
        if client.db.expired:
            self.propagate_expired(client.db)
        if self.master_repl_offset != offset:  # Redis's c->woff (what WAIT waits for): this command propagated, EXEC too
            client.woff = self.master_repl_offset
        if self.monitors:  # after the command, as Redis's call(): EXEC follows what it ran, SELECT shows its new db
            self.feed_monitors(client, cmd, argv)
        if self.tracking is not None:  # client-side caching: remember a read's keys, order its invalidations
            result = self.tracking.after_call(client, cmd, argv, result)
        if self.access is not None:  # an LRU or LFU maxmemory-policy: the named keys were accessed
            self.access.touch(client, cmd, argv)
        return result

    def count_call(self, client, cmd: Command, argv: list[bytes], elapsed: int) -> None:
        """INFO commandstats, latencystats and the slowlog for one finished call (ns)."""
        cmd.calls += 1  # after the command, as Redis counts it: CONFIG RESETSTAT counts itself, INFO does not
        cmd.duration_ns += elapsed
        client.commands_processed += 1
        if elapsed >= self.slowlog_threshold_ns and "skip-slowlog" not in cmd.flags:
            self.slowlog.push(client, argv, elapsed)
        if self.latency_tracking:  # server/latency.py's record_us, inlined
            us = elapsed // 1000
            if us >= EXACT_US:
                us = coarse_us(us)
            histogram = cmd.latency_hist
            histogram[us] = histogram.get(us, 0) + 1

    @staticmethod
    def _replica_write(client, cmd: Command, argv: list[bytes]):
        """A client's write on a writable replica (replica-read-only no): a key past its TTL, kept for
        the primary's DEL, is deleted first, as Redis's lookupKeyWrite does, so INCR or APPEND makes a
        new key rather than writing under the dead TTL (its value gone at once)."""
        previous, Database.expiry = Database.expiry, "write"
        try:
            return cmd.handler(client, argv)
        finally:
            Database.expiry = previous

    def remember_replica_keys(self, db, effects) -> None:
        """A writable replica's own write: the keys it left with a TTL are this replica's to expire."""
        for argv in effects:
            cmd = effect_command(argv)
            for key in cmd.get_keys(argv) if cmd is not None else ():
                if key in db.expires:
                    self.replica_keys_with_expire.add((db.id, key))

    @property
    def total_commands_processed(self) -> int:
        """Derived from the per-command counters rather than counted twice."""
        return sum(cmd.calls + sum(sub.calls for sub in cmd.subcommands.values()) for cmd in COMMANDS.values())

    def error(self, message: str, cmd: Command | None = None, rejected: bool = False) -> Error:
        """Count an error reply in INFO stats/errorstats and build it."""
        self.stats["total_error_replies"] += 1
        code = message.split(" ", 1)[0]
        self.errorstats[code] = self.errorstats.get(code, 0) + 1
        if rejected and cmd is not None:
            cmd.rejected_calls += 1
        return Error(error_line(message))

    # -- writes: effects, WATCH, blocked clients, propagation -------------

    def after_write(self, db: int, effects: Effects, dirty: int | None = None) -> None:
        """Count, touch and propagate a write's effects; `dirty` is its change count if not one per effect."""
        # call() skips this for a quiet write, testing the same conditions: keep the two in step.
        database = self.keyspace.dbs[db]
        if database.expired:
            # keys the command found expired propagate first (their DEL must precede its effects)
            self.propagate_expired(database)
        self.dirty += len(effects) if dirty is None else dirty
        if self.access is not None:
            self.access.effects(db, effects)
        if self.watched or self.blocking.waiters or self.tracking is not None:
            for argv in effects:
                self.touch_effect(db, argv)
        if self._exec_effects is not None:
            self._exec_effects.append((db, effects))
        elif self.effect_listeners:
            self.propagate(db, effects)

    def touch_effect(self, db: int, argv: list[bytes]) -> None:
        cmd = effect_command(argv)
        if cmd is None:
            return
        name = cmd.name
        if name in ("flushall", "flushdb", "swapdb"):
            # blocked clients re-check; WATCHes were touched by the command (touch_watched_db)
            for index in range(len(self.keyspace)):
                if name == "flushall" or index == db or (name == "swapdb" and str(index).encode() in argv[1:]):
                    self.blocking.touch_db(index)
            return
        if name == "copy":
            # only the destination changes, in the database the effect names (COPY src dst DB n)
            self.touch(int(argv[4]) if len(argv) > 4 else db, argv[2])
            return
        if cmd.name in QUIET_EFFECTS:
            if cmd.name in KEYSHARED_RELEASES and self.blocking.waiters:
                self._wake_keyshared(db, argv, cmd)
            return
        if cmd.name == "xcfgset" and argv[2] == b"IIDS-ADDED":
            return  # an IDMP repeat's counters, metadata Redis 8.6.2 marks with keyModified(..., 0)
        if cmd.name in READY_ONLY_EFFECTS and argv[-1].upper() != b"MKSTREAM":
            for key in cmd.get_keys(argv):
                self.blocking.touch(db, key)
            return
        for key in cmd.get_keys(argv):
            self.touch(db, key)

    def _wake_keyshared(self, db: int, argv: list[bytes], cmd: Command) -> None:
        """Wake the blocked readers of the effect's key if its group is KEYSHARED: the entries a
        draining hash held back may be theirs now (a plain group's readers stay parked, as in Redis)."""
        for pos in cmd.key_positions(argv):
            key = argv[pos]
            if (db, key) not in self.blocking.waiters or pos + 1 >= len(argv):
                continue
            groups = getattr(self.keyspace.dbs[db].data.get(key), "groups", None)
            group = groups.get(argv[pos + 1]) if groups else None
            if group is not None and group.keyshared is not None:
                self.blocking.touch(db, key)

    def touch(self, db: int, key: bytes) -> None:
        """A key changed: invalidate WATCHes on it and wake its waiters."""
        watchers = self.watched.get((db, key))
        if watchers:
            for client in watchers:
                expired = client.watch_expired
                if expired and (db, key) in expired and key not in self.keyspace.dbs[db].data:
                    expired.discard((db, key))  # expired when watched, now removed: no change (Redis's touchWatchedKey)
                    continue
                client.dirty_cas = True
        self.blocking.touch(db, key)
        if self.tracking is not None:  # Redis's signalModifiedKey -> trackingInvalidateKey
            self.tracking.invalidate_key(key)

    def touch_watched_db(self, index: int, swapped_with: int | None = None) -> None:
        """Before FLUSHDB/FLUSHALL/SWAPDB empty or replace database `index`.

        As Redis's touchAllWatchedKeysInDb: a WATCHed key is touched only if it
        exists there, or will exist (and not already expired) in the database
        swapped in; watching a key that stays absent is no change.
        """
        if not self.watched:
            return
        db = self.keyspace[index].data
        other = self.keyspace[swapped_with] if swapped_with is not None else None
        now = self.now
        for (wdb, key), clients in self.watched.items():
            if wdb != index:
                continue
            existed, replaced = key in db, other is not None and key in other.data
            if not (existed or replaced):
                continue
            for client in clients:
                noted = client.watch_expired
                if noted and (wdb, key) in noted:  # past its TTL when watched
                    if not replaced:
                        noted.discard((wdb, key))  # and now gone: no change
                        continue
                    if other.is_expired(key, now):
                        continue  # replaced by a key as dead
                elif not existed and other.is_expired(key, now):
                    client.note_expired((wdb, key))  # nothing, then a dead key: no change yet
                    continue
                client.dirty_cas = True

    def propagate(self, db: int, effects: Effects) -> None:
        """Hand normalized commands to the AOF and replicas, atomically."""
        if len(effects) == 1 and db == self._propagated_db:  # the usual write: one effect, no SELECT
            batch = [effects[0]]
            for listener in self.effect_listeners:
                listener(batch)
            return
        batch = self._select(db, [])
        if len(effects) > 1 and effects[0][0].upper() != b"MULTI":
            batch += [[b"MULTI"], *effects, [b"EXEC"]]
        else:
            batch += effects
        self._emit(batch)

    def propagate_replicas(self, effects: Effects) -> None:
        """Commands Redis propagates to replicas only (PROPAGATE_REPL: PUBLISH), never to the AOF.

        They name no key, so they go without a SELECT and leave the shared stream's database as it
        is; inside EXEC they wait for the transaction's own effects and follow them.
        """
        if self._exec_effects is not None:
            self._exec_effects.append((-1, effects))
        elif self.replication is not None:
            self.replication.feed(effects)

    def begin_exec(self) -> None:
        self._exec_effects = []

    def end_exec(self) -> None:
        """An EXEC's effects go out once, as one MULTI/EXEC, whatever databases they touched; a single
        effect goes out alone, as Redis 7+ wraps only more than one (propagatePendingCommands)."""
        collected, self._exec_effects = self._exec_effects, None
        if not collected:
            return
        if all(db >= 0 for db, _ in collected):
            if len(collected) == 1 and len(collected[0][1]) == 1:
                if self.effect_listeners:
                    self.propagate(*collected[0])
                return
            if self.effect_listeners:
                batch: Effects = [[b"MULTI"]]
                for db, effects in collected:
                    self._select(db, batch).extend(effects)
                batch.append([b"EXEC"])
                self._emit(batch)
            return
        self._end_exec_with_replica_only(collected)

    def _end_exec_with_replica_only(self, collected: list[tuple[int, Effects]]) -> None:
        """A transaction that PUBLISHed: replicas get its commands in order inside MULTI/EXEC, the AOF
        the same without them (Redis propagates each with its own targets, the MULTI/EXEC to both)."""
        replicas: Effects = [[b"MULTI"]]
        aof: Effects = [[b"MULTI"]]
        for db, effects in collected:
            if db < 0:
                replicas += effects
            else:
                keyed = self._select(db, []) + effects
                aof += keyed
                replicas += keyed
        if len(aof) == 1:  # only replica-only commands: no transaction for the AOF
            replicas = replicas[1:] if len(replicas) == 2 else replicas + [[b"EXEC"]]
            aof = []
        else:
            aof.append([b"EXEC"])
            replicas.append([b"EXEC"])
        feed = self.replication.feed if self.replication is not None else None
        for listener in self.effect_listeners:
            if listener == feed:
                listener(replicas)
            elif aof:
                listener(aof)

    def _select(self, db: int, batch: Effects) -> Effects:
        """Add a SELECT to batch when the propagated stream is in another database."""
        if db != self._propagated_db:
            batch.append([b"SELECT", str(db).encode()])
            self._propagated_db = db
        return batch

    def _emit(self, batch: Effects) -> None:
        for listener in self.effect_listeners:
            listener(batch)

    def notify_call(self, client, cmd: Command, argv: list[bytes], result, before) -> None:
        """Keyspace events of a command that ran (after any key it found expired)."""
        if client.db.expired:
            self.propagate_expired(client.db)
        if type(result) is Block:
            reply, effects = None, result.effects or []
        elif cmd.write:
            reply, effects = result
        else:
            reply, effects = result, []
        notify.notify_call(self, client, cmd, argv, reply, effects, before)

    def propagate_expired(self, db) -> None:
        keys, db.expired = db.expired, []
        notify.notify_expired(self, db.id, keys)
        self.stats["expired_keys"] += len(keys)
        self.after_write(db.id, [[b"DEL", key] for key in keys])

    # -- replies -----------------------------------------------------------

    def queue_write(self, client) -> None:
        """Have client's replies written at the end of this loop turn."""
        if not self.pending_writes and self.loop is not None:
            self.loop.call_soon(self.flush_writes)
        self.pending_writes.append(client)

    def flush_writes(self) -> None:
        """Write each queued client's replies in one call; close those that asked for it."""
        if self.aof is not None:  # the turn's effects reach the AOF before any reply (group commit)
            self.persistence.flush()
        replication = self.replication
        if replication is not None and replication.flushed != self.master_repl_offset:
            replication.flush()  # one write per replica and turn
        clients, self.pending_writes = self.pending_writes, []
        written = 0
        limited = self.normal_output_limits is not None
        for client in clients:
            output, transport = client.output, client.transport
            if output:
                client.output = []
                if transport is not None:
                    payload = b"".join(output)  # one chunk is returned as it is
                    written += len(payload)
                    client.net_out += len(payload)
                    self.writes_processed += 1
                    transport.write(payload)  # after a kill() the transport is closing and drops it
                    if limited or not client.authenticated:
                        output_limits.after_write(client, self)
            if client.close_after_reply and transport is not None:
                transport.close()
        self.net_output_bytes += written

    # -- blocking ----------------------------------------------------------

    def block(self, client, cmd: Command, block: Block):
        """Park client on block's keys, or answer at once where Redis never blocks."""
        if block.effects:
            self.after_write(client.db.id, block.effects)
        if client.cannot_block:
            result = block.attempt()
            if result is None:
                reply = block.timeout_reply()
                result = (reply, []) if cmd.write else reply
            if cmd.write:
                reply, effects = result
                if effects:
                    self.after_write(client.db.id, effects)
                return reply
            return result
        block.db = client.db.id
        block.client = client
        block.write = cmd.write
        block.command = cmd
        if cmd.name == "xread":
            block.last_ids = [getattr(client.db.lookup(key, self.now), "last_id", 0) for key in block.keys]
        self.blocking.park(block)
        client.blocked = block
        if block.timeout_ms > 0:
            block.timer = self.loop.call_later(block.timeout_ms / 1000, self.timeout_block, block)
        self.schedule_wake(block)
        return BLOCKED

    # A wake-up re-checks at least this often (ms), in case a change no key signals moved the time.
    WAKE_RECHECK_MS = 1000

    def schedule_wake(self, block: Block) -> None:
        """Re-attempt a parked block at its wake_at (its keys marked ready), if it has one."""
        if block.wake_at is None:
            return
        delay = min(max(block.wake_at - self.now, 0) + 1, self.WAKE_RECHECK_MS)
        block.wake_timer = self.loop.call_later(delay / 1000, self.wake_block, block)

    def wake_block(self, block: Block) -> None:
        block.wake_timer = None
        if block.client.blocked is not block:
            return
        for key in block.keys:
            self.blocking.ready.add((block.db, key))
        self.serve_ready()  # reschedules the wake-up if the block keeps waiting

    def finish_wait(self, block: Block) -> None:
        """End an internal wait (Block.internal) with its reply, if its client still waits on it."""
        if block.client is not None and block.client.blocked is block:
            self.unblock(block, block.attempt())

    def timeout_block(self, block: Block) -> None:
        block.timer = None
        self.unblock(block, block.timeout_reply())

    def unblock(self, block: Block, reply) -> None:
        """End a wait (served, timed out, CLIENT UNBLOCK): the command counts now, its failure too."""
        self.blocking.unpark(block)
        cmd = block.command
        if cmd is not None:
            if type(reply) is Error:
                cmd.failed_calls += 1
            self.count_call(block.client, cmd, block.argv, block.duration_ns)
        block.client.resume(reply)

    def serve_ready(self) -> None:
        """Retry the clients blocked on keys touched since the last call: the keys in the order they
        became ready (Redis's server.ready_keys list), each key's clients FIFO.

        Redis re-runs a woken command through processCommand, so while some state refuses or holds
        commands (`refusing`, CLIENT PAUSE, a password set since), recheck_woken() judges it first."""
        blocking = self.blocking
        self.clock()
        while blocking.ready:
            ready, blocking.ready = blocking.ready, ReadyKeys()
            for db, key in ready:
                for block in list(blocking.waiters.get((db, key), ())):
                    client = block.client
                    if client.blocked is not block:
                        continue
                    if (self.refusing or self.pause is not None or not client.authenticated) and self.recheck_woken(block):
                        continue
                    cmd = block.command
                    # the re-run's own lookups miss where keys are missing, as Redis's re-run command's do
                    notifying = cmd is not None and self.pubsub.active & KEY_MISS
                    if notifying:
                        before = notify.before(self, client, cmd, block.argv)
                    start = perf_counter_ns()
                    try:
                        result = block.attempt()
                    except ReplyError as exc:
                        block.duration_ns += perf_counter_ns() - start
                        if notifying:
                            notify.key_misses(self, client.db.id, before, exc.message, notify.value_type(cmd))
                        self.unblock(block, self.error(exc.message))
                        continue
                    block.duration_ns += perf_counter_ns() - start
                    if notifying:
                        notify.key_misses(self, client.db.id, before)
                    if result is None:
                        if block.wake_at is not None:  # attempt() moved its wake-up time
                            if block.wake_timer is not None:
                                block.wake_timer.cancel()
                            self.schedule_wake(block)
                        continue
                    if block.write:
                        result, effects = result
                        if effects:
                            rule = DIRTY_RULES.get(block.command.name) if block.command is not None else None
                            self.after_write(db, effects, None if rule is None else rule(result, effects))
                    self.unblock(block, result)

    # Answered when their condition is met, not re-run (Redis's BLOCKED_WAIT / BLOCKED_WAITAOF).
    NOT_RERUN = frozenset({"wait", "waitaof"})

    def recheck_woken(self, block: Block) -> bool:
        """processCommand's checks for a woken blocked command, as execute() makes them for one that
        arrives: what refuses it now (NOAUTH, OOM, MISCONF, NOREPLICAS, READONLY, MASTERDOWN) answers
        it and ends the wait, uncounted but as a rejected call; a CLIENT PAUSE that holds it postpones
        it, to run from the start when the pause ends (an XREAD's `$` as the ID it stood for).
        True when the client no longer waits on its keys."""
        cmd, client = block.command, block.client
        if cmd is None or cmd.name in self.NOT_RERUN:
            return False
        try:
            if not client.authenticated and "no-auth" not in cmd.flags:
                raise ReplyError("NOAUTH Authentication required.")
            if self.refusing:
                self.refuse(cmd, block.argv, client)
        except ReplyError as exc:
            if self.tracking is not None:
                self.tracking.rejected(client, cmd)
            self.blocking.unpark(block)
            client.resume(self.error(exc.message, cmd, rejected=True))
            return True
        if self.pause is None or not self.pause.applies(client, cmd):
            return False
        from .pause import postpone

        argv = block.argv
        if block.last_ids is not None:  # XREAD ... STREAMS key... id...: the IDs end the command line
            ids = len(block.keys)
            argv = argv[:-ids] + [
                format_id(last_id) if arg == b"$" else arg for arg, last_id in zip(argv[-ids:], block.last_ids, strict=True)
            ]
        self.blocking.unpark(block)
        client.blocked = None
        postpone(self, client, argv)
        return True

    # -- monitors ----------------------------------------------------------

    def feed_monitors(self, client, cmd: Command, argv: list[bytes]) -> None:
        from .commands.server import monitor_line

        if "admin" in cmd.flags or "skip-monitor" in cmd.flags or client.loading:
            return
        line = monitor_line(client, argv, time.time())
        for monitor in self.monitors:  # a monitor's own command: its line follows the reply, as in Redis
            monitor.push(line, monitor is self.caller)


def effect_command(argv: list[bytes]) -> Command | None:
    """The Command an effect runs: its subcommand for a container (XGROUP SETID ...)."""
    cmd = COMMANDS.get(argv[0].lower())
    if cmd is not None and cmd.subcommands and len(argv) > 1:
        cmd = cmd.subcommands.get(argv[1].lower(), cmd)
    return cmd


def _unknown_command(argv: list[bytes]) -> str:
    """Redis's text: each argument quoted and followed by a space, 128 bytes at most, echoed byte
    for byte up to its first NUL (Redis formats them with '%.*s')."""
    args = b""
    for arg in argv[1:]:
        if len(args) >= 128:
            break
        args += b"'" + arg.partition(b"\0")[0][: 128 - len(args)] + b"' "
    text = b"ERR unknown command '" + argv[0].partition(b"\0")[0][:128] + b"', with args beginning with: " + args
    return arg_text(text)  # Server.error encodes it back to these bytes
