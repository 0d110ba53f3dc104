"""Durability, as Redis runs it: snapshots, the AOF, their child processes and schedules.

The files themselves are persistence/'s business; this module decides when
they are written and read: load at start-up, the `save` schedule and
`auto-aof-rewrite-*` in the cron, BGSAVE and BGREWRITEAOF in a forked child
(a copy-on-write image of the keyspace, as Redis forks, so the server keeps
serving), the AOF buffer flushed before each loop turn's replies, MISCONF
when the disk fails, and INFO persistence. Loading replays increments through
the command table with a `LoadingClient`: no command has a second
implementation here. A disk that refuses (full, read-only, a directory where
a file belongs) is logged in Redis's words and never raised out of the cron
or a command: at start-up it ends the process, as Redis exits.
"""

from __future__ import annotations

import errno
import gc
import logging
import os
import random
import re
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

from persistence import aof as aoffile
from persistence import snapshot
from persistence.aof_writer import AofWriter
from protocol.errors import ReplyError
from protocol.reply import Error
from storage.keyspace import Database

from .client import LoadingClient
from .commands.idmp import register_loaded as idmp_register_loaded
from .config import ConfigError, propagation_error_panics
from .fork import fork, reap
from .keyshared_sessions import register_loaded as keyshared_register_loaded

log = logging.getLogger("millrace")

RDB_ERROR = (
    "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. "
    "Commands that may modify the data set are disabled, because this instance is configured to report "
    "errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error option). "
    "Please check the Redis logs for details about the RDB error."
)
REWRITE_FAILED = "ERR Can't execute an AOF background rewriting. Please check the server logs for more information."
BGSAVE_RETRY_DELAY = 5  # CONFIG_BGSAVE_RETRY_DELAY: seconds between tries after a failed BGSAVE
AOF_REWRITE_RETRY_DELAY = 60
LOAD_STEP = 1024  # replayed commands between two turns of the event loop (Redis: processEventsWhileBlocked every 1024)


class LoadError(Exception):
    """A data file the server must not start with: the message says which file, where and why."""


class DiskError(Exception):
    """A file or directory the disk refuses; args are Redis's log lines for it."""


@dataclass
class Child:
    """The one background save or rewrite in progress (Redis allows one child at a time)."""

    pid: int
    kind: str  # "rdb" or "aof"
    started: float
    temp: str  # the file the child writes
    dirty: int  # server.dirty when it forked
    keys: int = 0  # the keys it has to write (INFO current_save_keys_total)

    def partial_files(self) -> list[str]:
        """What a child stopped midway may leave: its file, and the one it writes before renaming it
        there (a rewrite's snapshot base: snapshot.write's temp-<pid>-<name>; a command base: rewrite.py's
        <name>.tmp), as Redis's killAppendOnlyChild removes its temp file."""
        if self.kind == "rdb":
            return [self.temp]
        folder, name = os.path.split(self.temp)
        return [self.temp, os.path.join(folder, f"temp-{self.pid}-{name}"), f"{self.temp}.tmp"]


class Persistence:
    """The server's snapshot and AOF state; `server.persistence`."""

    def __init__(self, server) -> None:
        self.server = server
        self.child: Child | None = None
        self.bgsave_scheduled = False
        self.rewrite_scheduled = False
        self.lastbgsave_status = "ok"
        self.lastbgsave_try = 0.0
        self.last_bgsave_time_sec = -1
        self.rdb_saves = 0
        self.loaded_keys = self.loaded_expired = 0
        self.aof: AofWriter | None = None
        self.manifest: aoffile.Manifest | None = None
        self.aof_base_size = 0  # aof_base_size: the AOF's size after its last rewrite
        self.aof_rewrites = 0
        self.aof_rewrite_failures = 0
        self.aof_last_bgrewrite_status = "ok"
        self.aof_last_rewrite_time_sec = -1
        self.aof_last_rewrite_try = 0.0
        self.aof_new_incr: str | None = None  # the increment opened when the running rewrite began
        self.aof_waiting_rewrite = False  # appendonly turned on: the first base is being written
        self._file_db = -1  # the database the open increment is in after its last whole write (-1: none yet)

    # -- wiring ------------------------------------------------------------------

    def install(self) -> None:
        server = self.server
        server.persistence = self
        server.startup_hooks.append(self.load_at_startup)
        server.shutdown_hooks.append(self.close)
        server.persistence_info = self.info
        server.debug_reload = self.debug_reload
        server.debug_loadaof = self.debug_loadaof
        server.config.listeners.append(self._config_changed)

    def _config_changed(self, name: str, value) -> None:
        if name in ("stop-writes-on-bgsave-error", "save"):
            self._update_refusal()
        elif name == "aof-disable-auto-gc" and not value and self.aof is not None:
            self.delete_history()  # as Redis's updateAofAutoGCEnabled
        elif name == "aof-timestamp-enabled" and self.aof is not None:
            self.aof.timestamps = value
        elif name == "appendonly" and self.server.loop is not None:
            if self.server.loading:  # a base of half the data, or an AOF opened or not after the load regardless
                raise ConfigError("Unable to turn AOF on or off while the dataset loads. Try again once it is loaded.")
            if value and self.aof is None and not self.aof_waiting_rewrite:
                if not self.start_aof():
                    raise ConfigError("Unable to turn on AOF. Check server logs.")  # CONFIG SET puts appendonly back
            elif not value and (self.aof is not None or self.aof_waiting_rewrite):
                self.stop_aof()

    @property
    def config(self):
        return self.server.config

    @property
    def dir(self) -> str:
        return self.config["dir"]

    @property
    def snapshot_path(self) -> str:
        return os.path.join(self.dir, self.config["dbfilename"])

    @property
    def aof_dir(self) -> str:
        return os.path.join(self.dir, self.config["appenddirname"])

    def save_params(self) -> list[tuple[int, int]]:
        words = [int(w) for w in self.config["save"].split()]
        return list(zip(words[0::2], words[1::2], strict=True))

    # -- refusing writes (MISCONF) -------------------------------------------------

    def write_error(self) -> str | None:
        """Redis's writeCommandsDeniedByDiskError, with the text it replies."""
        if self.config["stop-writes-on-bgsave-error"] and self.config["save"] and self.lastbgsave_status == "err":
            return RDB_ERROR
        aof = self.aof
        if aof is not None:
            error = aof.write_error or aof.fsync_error
            if error is not None:
                return f"MISCONF Errors writing to the AOF file: {os.strerror(error.errno or 0)}"
        return None

    def _update_refusal(self) -> None:
        server = self.server
        server.disk_error = self.write_error()
        server.update_refusing()

    # -- loading -----------------------------------------------------------------

    def remove_stale_temp_files(self) -> None:
        """Temporary files of a save or rewrite cut short by a crash: nothing will ever rename them."""
        pattern = re.compile(r"temp-(\d+)-")
        for directory in (self.dir, self.aof_dir):
            try:
                names = os.listdir(directory)
            except OSError:
                continue
            for name in names:
                if not name.startswith("temp-"):
                    continue
                match = pattern.match(name) or re.search(r"-bg-(\d+)\.aof$", name)
                if match is not None and _alive(int(match.group(1))):
                    continue  # another live process's (a shared dir is a mistake, but not ours to clean)
                if directory == self.dir and match is None:
                    continue  # not a name any Millrace child writes in dir
                _unlink(os.path.join(directory, name))
                log.info("Removed the stale temporary file %s", os.path.join(directory, name))

    def load_at_startup(self) -> Iterator[None]:
        """Load the AOF (appendonly yes) or else the snapshot; exit 1 as Redis does on a bad file, or
        on a disk that refuses one (a start-up hook: an OSError out of it would read as a failure to
        listen). A generator: it stops every LOAD_STEP replayed commands, and the server serves its
        clients meanwhile (LOADING to what may not run yet), as Redis's processEventsWhileBlocked."""
        self.remove_stale_temp_files()
        start = time.monotonic()
        try:
            if self.config["appendonly"]:
                yield from self._open_aof_at_startup()
            else:
                self._read_manifest()  # Redis reads it whatever appendonly says, and refuses a bad one
                if os.path.exists(self.snapshot_path):
                    self._load_snapshot_at_startup()
                    log.info("DB loaded from disk: %.3f seconds", time.monotonic() - start)
        except DiskError as exc:
            _exit(*exc.args)
        except (LoadError, snapshot.SnapshotError, aoffile.AofError) as exc:
            _exit(str(exc), "Fatal error loading the DB, check server logs. Exiting.")
        except OSError as exc:  # a refusal no step above names
            _exit(f"Fatal error loading the DB: {exc}", "Exiting.")
        if not self.config["appendonly"]:
            self.server.dirty = 0  # an AOF's replayed changes stay counted, as in Redis (its save points see them)
        self._update_refusal()

    def load_snapshot(self, path: str, aof_preamble: bool = False) -> None:
        """Replace every database with the snapshot's (read and checked whole first)."""
        self.server.loading = True
        gc.disable()
        try:
            loaded = snapshot.read(path)
            self._install(loaded, expire=not aof_preamble)
            if not aof_preamble:  # an AOF's increments go on past the base's offset: it says nothing of them
                self._restore_replication(loaded)
        finally:
            gc.enable()
            self.server.loading = False

    def _install(self, loaded: snapshot.Snapshot, expire: bool) -> None:
        server = self.server
        now = server.clock()
        expired = 0
        if server.tracking is not None:  # emptyData's signalFlushedDb: tracking clients drop their caches
            server.tracking.invalidate_on_flush(None, [])
        for db in server.keyspace.dbs:
            server.touch_watched_db(db.id)  # the old data goes: a WATCHed key it held changed (Redis's emptyData)
            data, expires = loaded.dbs.pop(db.id, ({}, {}))
            if expire:  # as a primary loading an RDB: keys already expired are not loaded
                for key in [k for k, when in expires.items() if when < now]:
                    del data[key]
                    del expires[key]
                    expired += 1
            db.data, db.expires = data, expires
            db.scan_index = None
        if loaded.dbs:
            raise LoadError(f"the snapshot holds database {min(loaded.dbs)}, but databases is {len(server.keyspace)}")
        self.loaded_keys = loaded.keys - expired
        self.loaded_expired = expired
        idmp_register_loaded(server)  # the IDMP expiry cron goes on for the loaded streams (redis#14869)
        keyshared_register_loaded(server)  # and the KEYSHARED session-timeout cron

    def _restore_replication(self, loaded: snapshot.Snapshot) -> None:
        """The replication ID and offset a snapshot recorded (Redis's RDB aux fields).

        A replica takes them as its cached primary, so PSYNC continues where the
        snapshot stopped. A primary keeps its fresh ID and makes the recorded one its
        replid2, valid up to the recorded offset: replicas that stopped exactly
        there continue, and one that saw writes this server has lost since (they
        were never saved) cannot continue a history that now goes another way.
        """
        if not loaded.replid:
            return
        server = self.server
        server.master_repl_offset = loaded.repl_offset
        if server.config["replicaof"]:
            server.replid = loaded.replid
            server.replication.stream_db = loaded.stream_db
        elif server.replication is not None:
            server.replication.replid2 = loaded.replid
            server.replication.second_offset = loaded.repl_offset + 1

    def _load_snapshot_at_startup(self) -> None:
        try:
            self.load_snapshot(self.snapshot_path)
        except OSError as exc:
            name, reason = self.config["dbfilename"], exc.strerror or exc
            if exc.errno == errno.EISDIR:  # Redis opens it, and its first read fails
                raise DiskError("Short read or OOM loading DB. Unrecoverable error, aborting now.", f"Error reading {name}: {reason}") from None
            raise DiskError(f"Fatal error: can't open the RDB file {name} for reading: {reason}", "Fatal error loading the DB, check server logs. Exiting.") from None

    def _open_aof_at_startup(self) -> Iterator[None]:
        manifest = self._read_manifest()
        if manifest is None:
            self._create_aof_dir()
            if os.path.exists(self.snapshot_path):
                # Redis would start empty here and lose the snapshot; keeping it is the safer reading
                log.warning("No AOF found: loading %s and writing the first AOF base from it", self.snapshot_path)
                self._load_snapshot_at_startup()
            self.manifest = aoffile.Manifest()
            self._write_base_now()
            return
        self.manifest = manifest
        start = time.monotonic()
        yield from self.load_aof_steps(manifest)
        log.info("DB loaded from append only file: %.3f seconds", time.monotonic() - start)
        if not manifest.incrs:
            self._open_incr("on server start")
        else:
            name = manifest.incrs[-1].name
            try:
                self._attach_writer(name)
            except OSError as exc:
                raise DiskError(f"Can't open the append-only file {name}: {exc.strerror or exc}") from None
        self.aof_base_size = self._aof_size()

    def _create_aof_dir(self) -> None:
        """Redis's dirCreateIfMissing; DiskError with its log line."""
        try:
            os.mkdir(self.aof_dir, 0o755)
        except FileExistsError:
            if os.path.isdir(self.aof_dir):
                return
            reason = os.strerror(errno.ENOTDIR)
        except OSError as exc:
            reason = exc.strerror or str(exc)
        else:
            return
        raise DiskError(f"Can't open or create append-only dir {self.config['appenddirname']}: {reason}")

    def _read_manifest(self) -> aoffile.Manifest | None:
        """The manifest on disk, None if there is no AOF; AofError if it is malformed or names no
        file, DiskError if it cannot be read."""
        try:
            return aoffile.read_manifest(self.aof_dir, self.config["appendfilename"])
        except OSError as exc:
            name = aoffile.manifest_name(self.config["appendfilename"])
            raise DiskError(f"Fatal error: can't open the AOF manifest {name} for reading: {exc.strerror or exc}") from None

    def _write_manifest(self) -> None:
        try:
            aoffile.write_manifest(self.aof_dir, self.config["appendfilename"], self.manifest)
        except OSError as exc:  # a ManifestWriteError: Redis's line for the step that failed
            raise DiskError(str(exc)) from None

    def load_aof(self, manifest: aoffile.Manifest) -> None:
        """Load the base, then replay each increment through the command table, in one go."""
        for _ in self.load_aof_steps(manifest):
            pass

    def load_aof_steps(self, manifest: aoffile.Manifest) -> Iterator[None]:
        """load_aof() a step at a time (see load_at_startup); INFO's loading_* fields follow it."""
        server = self.server
        files = manifest.files
        server.keyspace.flushall()
        server.loading = True
        progress = server.loading_progress
        progress.start(sum(_size(os.path.join(self.aof_dir, item.name)) for item in files))
        server.dirty = 0
        previous = Database.expiry
        Database.expiry = "keep"  # a replayed PERSIST must still find a key its TTL passed
        gc.disable()
        try:
            for index, item in enumerate(files):
                path = os.path.join(self.aof_dir, item.name)
                if not os.path.exists(path):
                    raise LoadError(f"The AOF file {item.name} doesn't exist")
                try:
                    if item.type == aoffile.BASE and aoffile.is_snapshot(path):
                        self.load_snapshot(path, aof_preamble=True)
                        server.loading = True
                        progress.done_file(_size(path))
                    else:
                        yield from self._replay(path, last=index == len(files) - 1)
                except OSError as exc:
                    raise LoadError(f"Unrecoverable error reading the append only file {item.name}: {exc.strerror or exc}") from None
        finally:
            gc.enable()
            Database.expiry = previous
            server.loading = False

    def _replay(self, path: str, last: bool) -> Iterator[None]:
        with aoffile.mapped(path) as data:
            good, error = aoffile.valid_prefix(data, path)
            if error is not None:
                if not (error.truncated and last and self.config["aof-load-truncated"]):
                    raise LoadError(f"{error}. Make a backup of your AOF file, then use millrace-check-aof --fix <filename.manifest>")
                log.warning("!!! Warning: short read while loading the AOF file %s!!!", path)
                log.warning("!!! Truncating the AOF %s at offset %d !!!", path, good)
                with open(path, "r+b") as handle:  # the mapping is read below `good` only
                    handle.truncate(good)
                    os.fsync(handle.fileno())
                log.warning("AOF %s loaded anyway because aof-load-truncated is enabled", path)
            server = self.server
            client = LoadingClient(server)
            execute = server.execute
            progress = server.loading_progress
            failed = 0
            replayed = 0
            delay = self.config["key-load-delay"]
            for argv, end in aoffile.parse_commands(data, path, stop=good):
                if server.lookup_command(argv[0]) is None:
                    raise LoadError(f"Unknown command '{argv[0].decode(errors='replace')}' reading the append only file {path} (offset {end})")
                reply = execute(client, argv)
                if type(reply) is Error:
                    failed += 1
                    if failed <= 10:
                        log.warning("AOF %s: a replayed command failed before offset %d: %s", path, end, reply)
                if propagation_error_panics(self.config, False, reply):
                    log.critical("Guru Meditation: This server panicked sending an error to its AOF-loading-client after processing the command '%s'",
                                 argv[0].decode(errors="replace").lower())
                    os._exit(1)  # as Redis's serverPanic
                if delay:
                    _debug_delay(delay)
                replayed += 1
                if replayed % LOAD_STEP == 0:
                    progress.at(end)
                    yield
            progress.done_file(len(data))

    # -- the AOF's files -----------------------------------------------------------

    def _aof_size(self) -> int:
        total = 0
        for item in self.manifest.files if self.manifest else ():
            try:
                total += os.path.getsize(os.path.join(self.aof_dir, item.name))
            except OSError:
                pass
        return total

    def _attach_writer(self, name: str) -> None:
        """Appends go to increment `name` from now on. What the previous file could not take (a full
        disk) goes to this one first, as Redis's aof_buf outlives its file."""
        writer = AofWriter(os.path.join(self.aof_dir, name))
        writer.timestamps = self.config["aof-timestamp-enabled"]
        old = self.aof
        if old is not None:
            if old.path == writer.path:  # the temporary increment, emptied for a new rewrite whose base holds it all
                old.buffer = []
            else:
                try:
                    old.sync()
                except OSError:
                    pass  # logged by the writer; its buffer moves on
                writer.adopt(old, self._file_db)
            old.close()
        self.aof = writer
        self._file_db = -1
        server = self.server
        server.aof = self.aof
        server._propagated_db = -1  # every increment starts with its own SELECT (a loader starts in db 0)
        if self.feed not in server.effect_listeners:
            server.effect_listeners.append(self.feed)

    def feed(self, batch: list[list[bytes]]) -> None:
        self.aof.feed(batch)

    def _open_incr(self, when: str = "on background rewrite") -> str:
        """Start a new increment (Redis's openNewIncrAofForAppend). It is listed in the manifest before
        anything is written to it, except while appendonly is being turned on: until the first base
        exists, the writes go to a temporary increment that only the finished rewrite names (Redis's
        temp INCR). DiskError, with nothing changed, if the file or the manifest cannot be written."""
        manifest = self.manifest
        item = None
        if self.aof_waiting_rewrite:
            name = f"temp-{aoffile.incr_name(self.config['appendfilename'], 0)}"
        else:
            seq = manifest.next_seq(aoffile.INCR)
            name = aoffile.incr_name(self.config["appendfilename"], seq)
            item = aoffile.AofFile(name, seq, aoffile.INCR)
        path = os.path.join(self.aof_dir, name)
        try:
            open(path, "wb").close()  # O_TRUNC, as Redis: nothing a manifest names is ever under this name
        except OSError as exc:
            raise DiskError(f"Can't open the append-only file {name}: {exc.strerror or exc}") from None
        if item is not None:
            manifest.incrs.append(item)
            try:
                self._write_manifest()
            except DiskError:
                manifest.incrs.pop()
                _unlink(path)
                raise
            log.info("Creating AOF incr file %s %s", name, when)
        try:
            self._attach_writer(name)
        except OSError as exc:
            raise DiskError(f"Can't open the append-only file {name}: {exc.strerror or exc}") from None
        return name

    def _write_base_now(self) -> None:
        """The first base of a new AOF, written in the foreground (start-up), then its first increment."""
        name = self._base_name(self.manifest.next_seq(aoffile.BASE))
        path = os.path.join(self.aof_dir, name)
        try:
            self._write_base(path)
        except OSError as exc:
            raise DiskError(_rewrite_error(exc)) from None
        self.manifest.base = aoffile.AofFile(name, self.manifest.next_seq(aoffile.BASE), aoffile.BASE)
        log.info("Creating AOF base file %s on server start", name)
        self._open_incr("on server start")
        self.aof_base_size = self._aof_size()

    def _base_name(self, seq: int) -> str:
        return aoffile.base_name(self.config["appendfilename"], seq, self.config["aof-use-rdb-preamble"])

    def _write_base(self, path: str) -> None:
        """A base from the current keyspace: a snapshot, or commands when aof-use-rdb-preamble is no."""
        server = self.server
        if self.config["aof-use-rdb-preamble"]:
            snapshot.write(path, snapshot.keyspace_dbs(server.keyspace), server.snapshot_header())
        else:
            from .rewrite import write_command_base

            write_command_base(path, server.keyspace)

    def start_aof(self) -> bool:
        """CONFIG SET appendonly yes (Redis's startAppendOnly): a rewrite writes the first base; effects go
        to a new increment meanwhile. False, logged and undone, if the rewrite cannot start."""
        self.aof_waiting_rewrite = True
        try:
            self.manifest = self._read_manifest() or aoffile.Manifest()
        except (DiskError, aoffile.AofError) as exc:
            log.warning("%s", " ".join(map(str, exc.args)) if isinstance(exc, DiskError) else exc)
            started = False
        else:
            if self.child is not None and self.child.kind != "aof":
                self.rewrite_scheduled = True
                log.info("AOF was enabled but there is already another background operation. An AOF background was scheduled to start when possible.")
                return True
            if self.child is not None:
                log.info("AOF was enabled but there is already an AOF rewriting in background. Stopping background AOF and starting a rewrite now.")
                self._kill_child()
            started = self.start_rewrite()
        if not started:
            log.warning("Millrace needs to enable the AOF but can't trigger a background AOF rewrite operation. Check the above logs for more info about the error.")
            self.aof_last_bgrewrite_status = "err"
            self.stop_aof()
            self.manifest = None
        return started

    def stop_aof(self) -> None:
        """CONFIG SET appendonly no (Redis's stopAppendOnly): flush, close, stop a rewrite in progress."""
        if self.child is not None and self.child.kind == "aof":
            self._kill_child()
        aof = self.aof
        if aof is not None:
            try:
                aof.sync()
            except OSError:
                pass  # logged by the writer; Redis drops what it could not write, as here
            aof.close()
            if self.aof_waiting_rewrite:  # the temporary increment: no manifest names it
                _unlink(aof.path)
        if self.feed in self.server.effect_listeners:
            self.server.effect_listeners.remove(self.feed)
        self.aof = self.server.aof = None
        self.aof_waiting_rewrite = False
        self.rewrite_scheduled = False
        self.aof_new_incr = None
        self._update_refusal()

    # -- saving --------------------------------------------------------------------

    def save(self) -> bool:
        """A save in the foreground: SAVE, and the saves of FLUSHALL, SHUTDOWN and DEBUG RELOAD. As
        Redis's rdbSave, a failure is logged and leaves rdb_last_bgsave_status alone (only a BGSAVE
        sets it, so only a BGSAVE's failure refuses writes); a success sets it ok."""
        server = self.server
        try:
            snapshot.write(self.snapshot_path, snapshot.keyspace_dbs(server.keyspace), server.snapshot_header())
        except OSError as exc:
            reason = exc.strerror or exc
            if exc.filename2 is not None:
                log.warning("Error moving temp DB file %s on the final destination %s (in server root dir %s): %s", os.path.basename(exc.filename), self.config["dbfilename"], self.dir, reason)
            elif exc.filename is not None:
                log.warning("Failed opening the temp RDB file %s (in server root dir %s) for saving: %s", os.path.basename(exc.filename), self.dir, reason)
            else:
                log.warning("Write error saving DB on disk: %s", reason)
            return False
        log.info("DB saved on disk")
        server.dirty = 0
        server.lastsave = time.time()
        self.lastbgsave_status = "ok"
        self._update_refusal()
        return True

    def flushall_save(self) -> None:
        """FLUSHALL with save points: stop a BGSAVE of the old data and save the empty dataset."""
        self._stop_bgsave_for_flushall()
        self.save()

    def _watch_flushall(self, batch: list[list[bytes]]) -> None:
        """An effect listener while a BGSAVE child runs: any FLUSHALL stops it, as Redis's
        flushAllDataAndResetRDB kills the RDB child (its snapshot would bring the flushed keys back
        at the next start). A rewrite child goes on, as in Redis: the AOF holds the FLUSHALL."""
        for argv in batch:
            if argv[0].upper() == b"FLUSHALL":
                self._stop_bgsave_for_flushall()
                return

    def _stop_bgsave_for_flushall(self) -> None:
        child = self.child
        if child is None or child.kind != "rdb":
            return
        self._kill_child()
        log.warning("Background saving terminated by signal %d", signal.SIGUSR1)
        self.last_bgsave_time_sec = int(time.time() - child.started)  # status stays ok: SIGUSR1 is no error

    def start_bgsave(self) -> bool:
        """Fork a child that writes the snapshot (Redis's rdbSaveBackground); False, logged, if the
        fork fails (rdb_last_bgsave_status err, as Redis)."""
        server = self.server
        self.lastbgsave_try = time.time()
        self.rdb_saves += 1  # counted before the fork, as Redis (a SAVE counts too; FLUSHALL's and RELOAD's do not)
        keyspace = snapshot.keyspace_dbs(server.keyspace)
        path = self.snapshot_path
        header = server.snapshot_header()

        def work() -> None:
            snapshot.write(path, keyspace, header)

        try:
            self._fork("rdb", path, work)
        except OSError as exc:
            self.lastbgsave_status = "err"
            log.warning("Can't save in background: fork: %s", exc.strerror or exc)
            return False
        log.info("Background saving started by pid %d", self.child.pid)
        return True

    def bgsave(self) -> None:
        """BGSAVE: Redis replies a bare ERR when the fork fails (the reason is in the log)."""
        if not self.start_bgsave():
            raise ReplyError("ERR")

    def start_rewrite(self) -> bool:
        """Start a rewrite (Redis's rewriteAppendOnlyFileBackground): a child writes the new base; a new
        increment takes the writes made meanwhile, and what the old one could not take (a full disk).
        False, logged, if it cannot start; never raises (the cron and CONFIG SET call it too)."""
        self.aof_last_rewrite_try = time.time()
        try:
            self._create_aof_dir()
            if self.manifest is None:  # appendonly no: Redis still writes the AOF's base (and no increment)
                self.manifest = self._read_manifest() or aoffile.Manifest()
            if self.aof is not None and not self.aof_waiting_rewrite:
                try:
                    self.aof.sync()  # Redis's flushAppendOnlyFile(1): a failure is logged, and the rewrite goes on
                except OSError:
                    # The increment refuses writes (a full disk). What it could not take goes to an
                    # increment of its own: the new base holds it too, so a successful rewrite makes that
                    # one history (Redis writes it at the head of the new increment, where it is applied
                    # twice, after the base); a failed rewrite keeps it in the chain.
                    self._open_incr()
                    try:
                        self.aof.sync()
                    except OSError:
                        pass  # then the new increment takes it, as Redis's
            if self.aof is not None or self.aof_waiting_rewrite:
                self.aof_new_incr = self._open_incr()
        except (DiskError, aoffile.AofError) as exc:
            log.warning("%s", " ".join(map(str, exc.args)) if isinstance(exc, DiskError) else exc)
            self.aof_last_bgrewrite_status = "err"
            return False
        self.aof_rewrites += 1  # counted before the fork, as Redis
        temp = os.path.join(self.aof_dir, f"temp-rewriteaof-bg-{os.getpid()}.aof")
        try:
            self._fork("aof", temp, lambda: self._write_base(temp))
        except OSError as exc:
            self.aof_last_bgrewrite_status = "err"
            log.warning("Can't rewrite append only file in background: fork: %s", exc.strerror or exc)
            return False
        log.info("Background append only file rewriting started by pid %d", self.child.pid)
        return True

    def rewrite(self) -> None:
        """BGREWRITEAOF: ReplyError with Redis's text if the rewrite cannot start (the reason is in the log)."""
        if not self.start_rewrite():
            raise ReplyError(REWRITE_FAILED)

    def _fork(self, kind: str, temp: str, work) -> None:
        server = self.server
        title = "millrace-rdb-bgsave" if kind == "rdb" else "millrace-aof-rewrite"
        pid = fork(work, server.config, server.config["bgsave-cpulist" if kind == "rdb" else "aof-rewrite-cpulist"], title)
        if kind == "rdb":  # the name snapshot.write gives its temporary file in the child
            temp = os.path.join(os.path.dirname(os.path.abspath(temp)), f"temp-{pid}-{os.path.basename(temp)}")
            server.effect_listeners.append(self._watch_flushall)
        self.child = Child(pid, kind, time.time(), temp, server.dirty, sum(len(db) for db in server.keyspace.dbs))

    def _forget_child(self) -> Child:
        child, self.child = self.child, None
        if child.kind == "rdb":  # a new list: _watch_flushall may be running inside a loop over the old one
            self.server.effect_listeners = [listener for listener in self.server.effect_listeners if listener != self._watch_flushall]
        return child

    def _kill_child(self) -> None:
        child = self._forget_child()
        try:
            os.kill(child.pid, signal.SIGUSR1)
            os.waitpid(child.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        for path in child.partial_files():
            _unlink(path)

    def check_child(self) -> None:
        """Has the child finished? Then finish its work in the parent (Redis's checkChildrenDone)."""
        child = self.child
        if child is None:
            return
        code = reap(child.pid)
        if code is None:
            return
        self._forget_child()
        ok = code == 0
        if code < 0:
            log.warning("%s terminated by signal %d", "Background saving" if child.kind == "rdb" else "Background AOF rewrite", -code)
        if child.kind == "rdb":
            self._bgsave_done(child, ok)
        else:
            self._rewrite_done(child, ok)
        self._update_refusal()

    def _bgsave_done(self, child: Child, ok: bool) -> None:
        server = self.server
        self.last_bgsave_time_sec = int(time.time() - child.started)
        if ok:
            log.info("Background saving terminated with success")
            server.dirty -= child.dirty
            server.lastsave = time.time()
            self.lastbgsave_status = "ok"
        else:
            log.warning("Background saving error")
            self.lastbgsave_status = "err"
            _unlink(child.temp)

    def _rewrite_done(self, child: Child, ok: bool) -> None:
        self.aof_last_rewrite_time_sec = int(time.time() - child.started)
        manifest = self.manifest
        if ok:
            try:
                seq = manifest.next_seq(aoffile.BASE)
                name = self._base_name(seq)
                os.replace(child.temp, os.path.join(self.aof_dir, name))
                # the increments before the one opened at fork time are in the new base now
                names = [item.name for item in manifest.incrs]
                first = names.index(self.aof_new_incr) if self.aof_new_incr in names else len(names)
                old = ([manifest.base] if manifest.base else []) + manifest.incrs[:first]
                for item in old:
                    item.type = aoffile.HISTORY
                manifest.history.extend(old)
                manifest.base = aoffile.AofFile(name, seq, aoffile.BASE)
                manifest.incrs = manifest.incrs[first:]
                if self.aof_waiting_rewrite:  # the temporary increment becomes the first real one (its fd stays open)
                    incr_seq = manifest.next_seq(aoffile.INCR)
                    incr = aoffile.incr_name(self.config["appendfilename"], incr_seq)
                    os.replace(self.aof.path, os.path.join(self.aof_dir, incr))
                    self.aof.path = os.path.join(self.aof_dir, incr)
                    manifest.incrs = [aoffile.AofFile(incr, incr_seq, aoffile.INCR)]
                aoffile.write_manifest(self.aof_dir, self.config["appendfilename"], manifest)
            except OSError as exc:
                ok = False
                log.warning("Error trying to switch to the rewritten AOF: %s", exc)
            else:
                self.delete_history()
        if ok:
            log.info("Background AOF rewrite finished successfully")
            self.aof_rewrite_failures = 0
            self.aof_last_bgrewrite_status = "ok"
            if self.aof_waiting_rewrite:
                self.aof_waiting_rewrite = False
                if self.server.replication is not None:
                    self.server.replication.wake_waiters()  # WAITAOF's local side: the AOF now holds their writes
            self.aof_base_size = self._aof_size()
        else:
            log.warning("Background AOF rewrite terminated with error")
            self.aof_rewrite_failures += 1
            self.aof_last_bgrewrite_status = "err"
            _unlink(child.temp)
        self.aof_new_incr = None

    # -- the cron and the loop turn -------------------------------------------------

    def cron(self) -> None:
        """Children, the save schedule, automatic rewrites, everysec fsync (Redis's serverCron part)."""
        self.check_child()
        server = self.server
        aof = self.aof
        if aof is not None:
            self.flush()  # effects no reply carried out (active expiry, CLIENT REPLY OFF)
            aof.cron(self.config["appendfsync"])  # (hold_fsync as flush() just set it)
            if not aof.buffer:
                self._file_db = server._propagated_db
        now = time.time()
        if self.child is None:
            if self.rewrite_scheduled:
                self.rewrite_scheduled = False
                self.start_rewrite()
            elif self.bgsave_scheduled:
                self.bgsave_scheduled = False
                self.start_bgsave()
            elif self.aof_waiting_rewrite and now - self.aof_last_rewrite_try > BGSAVE_RETRY_DELAY:
                self.start_rewrite()
            else:
                for seconds, changes in self.save_params():
                    if server.dirty >= changes and now - server.lastsave > seconds and (
                        self.lastbgsave_status == "ok" or now - self.lastbgsave_try > BGSAVE_RETRY_DELAY
                    ):
                        log.info("%d changes in %d seconds. Saving...", changes, seconds)
                        self.start_bgsave()
                        break
                else:
                    self._auto_rewrite(now)
        self._update_refusal()

    def _auto_rewrite(self, now: float) -> None:
        if self.aof is None or not self.config["auto-aof-rewrite-percentage"]:
            return
        if self.aof_last_bgrewrite_status == "err" and now - self.aof_last_rewrite_try < AOF_REWRITE_RETRY_DELAY:
            return
        size = self._aof_size() + self.aof.buffered
        base = self.aof_base_size or 1
        if size >= self.config["auto-aof-rewrite-min-size"] and (size - base) * 100 // base >= self.config["auto-aof-rewrite-percentage"]:
            log.info("Starting automatic rewriting of AOF on %d%% growth", (size - base) * 100 // base)
            self.start_rewrite()

    def flush(self) -> None:
        """Before replies go out: write the turn's effects (and fsync under `always`)."""
        aof = self.aof
        policy = self.config["appendfsync"]
        aof.hold_fsync = self.config["no-appendfsync-on-rewrite"] and self._child_writing()
        try:
            ok = aof.flush(policy)
        except OSError as exc:
            log.warning("Can't recover from AOF write error when the AOF fsync policy is 'always': %s. Exiting...", exc.strerror or exc)
            sys.stdout.flush()
            os._exit(1)
        if not aof.buffer:  # the database a buffer kept after a failed write was fed for (see _attach_writer)
            self._file_db = self.server._propagated_db
        if not ok or self.server.disk_error is not None:
            self._update_refusal()

    def _child_writing(self) -> bool:
        """A child is writing (a snapshot, a rewrite, a replica's snapshot): no-appendfsync-on-rewrite holds
        the AOF's fsyncs meanwhile, as Redis's hasActiveChildProcess() check in flushAppendOnlyFile."""
        replication = self.server.replication
        return self.child is not None or (replication is not None and any(link.child for link in replication.replicas))

    # -- shutdown, DEBUG ---------------------------------------------------------------

    def prepare_shutdown(self, save: bool, force: bool = False) -> bool:
        """Before exiting: stop a child, flush the AOF, save if asked; False if the save failed
        (unless `force`: SHUTDOWN FORCE and shutdown-on-sig* force exit anyway, as Redis). Never a
        save while the start-up load runs: half the data (Redis turns SAVE into NOSAVE then)."""
        save = save and not self.server.loading
        if self.child is not None:
            log.warning("There is a child saving an .rdb or rewriting the AOF. Killing it!")
            self._kill_child()
        if self.aof is not None:
            log.info("Calling fsync() on the AOF file.")
            try:
                self.aof.sync()
            except OSError as exc:
                log.warning("Error writing the AOF on shutdown: %s", exc.strerror or exc)
        if save:
            log.info("Saving the final RDB snapshot before exiting.")
            if not self.save():
                if not force:
                    log.warning("Error trying to save the DB, can't exit.")
                    log.warning("Errors trying to shut down the server. Check the logs for more information.")
                    return False
                log.warning("Error trying to save the DB. Exit anyway.")
        return True

    def close(self) -> None:
        """The last shutdown hook: a write that fails now is logged, and the exit goes on (Redis exits 0)."""
        aof = self.aof
        if aof is not None:
            try:
                aof.sync()
            except OSError as exc:
                log.warning("Error writing the AOF on shutdown: %s", exc.strerror or exc)
            finally:
                aof.close()
                self.aof = self.server.aof = None

    def debug_reload(self, args: list[bytes]):
        """DEBUG RELOAD [MERGE] [NOFLUSH] [NOSAVE]: save, empty (unless NOFLUSH), load the snapshot
        again. Replies as Redis: a bare ERR when the save fails; when the load fails, the databases
        stay emptied (Redis empties them first) and the reason is in the log only."""
        options = {arg.lower() for arg in args}
        if not options <= {b"merge", b"noflush", b"nosave"}:
            raise ReplyError("ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.")
        if b"nosave" not in options and not self.save():
            raise ReplyError("ERR")
        try:
            loaded = snapshot.read(self.snapshot_path)
        except (OSError, snapshot.SnapshotError) as exc:
            log.warning("Error trying to load the RDB dump %s: %s", self.snapshot_path, exc)
            if b"noflush" not in options:
                self.server.keyspace.flushall()
            raise ReplyError("ERR Error trying to load the RDB dump, check server logs.") from None
        if b"noflush" in options:  # MERGE alone still empties first, as Redis (it only allows duplicates)
            for db in self.server.keyspace.dbs:
                data, expires = loaded.dbs.pop(db.id, ({}, {}))
                db.data.update(data)
                db.expires.update(expires)
        else:
            self._install(loaded, expire=True)
        log.info("DB reloaded by DEBUG RELOAD")
        from protocol.reply import OK

        return OK

    def debug_loadaof(self, args: list[bytes]):
        """DEBUG LOADAOF: flush the AOF, empty the databases, replay the AOF files on disk (as Redis,
        also with appendonly off: the files an earlier appendonly yes left, or none and an error)."""
        from protocol.reply import OK

        failed = "ERR Error trying to load the AOF files, check server logs."
        server = self.server
        if self.aof is not None:
            try:
                self.aof.sync()  # as Redis's flushAppendOnlyFile(1): a failure is logged only
            except OSError:
                pass
            manifest = self.manifest
        else:
            try:
                manifest = self._read_manifest()
            except (DiskError, aoffile.AofError) as exc:
                log.warning("%s", exc)
                manifest = None
            if manifest is None:
                server.keyspace.flushall()
                log.warning("The AOF directory %s doesn't exist or holds no AOF", self.aof_dir)
                raise ReplyError(failed)
        listeners = server.effect_listeners
        server.effect_listeners = []
        try:
            self.load_aof(manifest)
        except (LoadError, aoffile.AofError, snapshot.SnapshotError) as exc:
            log.warning("%s", exc)
            raise ReplyError(failed) from None
        finally:
            server.effect_listeners = listeners
            server._propagated_db = -1
        server.dirty = 0  # as Redis's DEBUG LOADAOF: nothing to save or propagate
        log.info("Append Only File loaded by DEBUG LOADAOF")
        return OK

    def delete_history(self) -> None:
        """Remove the files a rewrite retired, and their manifest lines (Redis's aofDelHistoryFiles);
        `aof-disable-auto-gc yes` keeps them."""
        manifest = self.manifest
        if self.config["aof-disable-auto-gc"] or manifest is None or not manifest.history:
            return
        for item in manifest.history:
            log.info("Removing the history file %s in the background", item.name)
            _unlink(os.path.join(self.aof_dir, item.name))
        manifest.history = []
        try:
            aoffile.write_manifest(self.aof_dir, self.config["appendfilename"], manifest)
        except OSError as exc:  # the next manifest written drops the history lines
            log.warning("%s", exc)

    # -- INFO ------------------------------------------------------------------------

    def reset_stats(self) -> None:
        """CONFIG RESETSTAT's share: the counters Redis's resetServerStats zeroes."""
        self.rdb_saves = self.aof_rewrites = self.aof_rewrite_failures = 0
        if self.aof is not None:
            self.aof.delayed_fsync = 0

    def info(self) -> dict:
        child = self.child
        now = time.time()
        fields = {
            "current_save_keys_total": child.keys if child is not None else 0,  # (Redis's redisFork counts them)
            "rdb_bgsave_in_progress": 1 if child is not None and child.kind == "rdb" else 0,
            "rdb_last_bgsave_status": self.lastbgsave_status,
            "rdb_last_bgsave_time_sec": self.last_bgsave_time_sec,
            "rdb_current_bgsave_time_sec": int(now - child.started) if child is not None and child.kind == "rdb" else -1,
            "rdb_saves": self.rdb_saves,
            "rdb_last_load_keys_expired": self.loaded_expired,
            "rdb_last_load_keys_loaded": self.loaded_keys,
            "aof_enabled": 1 if self.aof is not None or self.aof_waiting_rewrite else 0,
            "aof_rewrite_in_progress": 1 if child is not None and child.kind == "aof" else 0,
            "aof_rewrite_scheduled": 1 if self.rewrite_scheduled else 0,
            "aof_last_rewrite_time_sec": self.aof_last_rewrite_time_sec,
            "aof_current_rewrite_time_sec": int(now - child.started) if child is not None and child.kind == "aof" else -1,
            "aof_last_bgrewrite_status": self.aof_last_bgrewrite_status,
            "aof_rewrites": self.aof_rewrites,
            "aof_rewrites_consecutive_failures": self.aof_rewrite_failures,
            "aof_last_write_status": "err" if self.aof is not None and self.aof.write_error else "ok",
        }
        aof = self.aof
        if aof is not None:
            fields.update(
                aof_current_size=self._aof_size() + aof.buffered,
                aof_base_size=self.aof_base_size,
                aof_pending_rewrite=1 if self.rewrite_scheduled else 0,
                aof_buffer_length=aof.buffered,
                aof_pending_bio_fsync=1 if aof.fsync_in_progress() else 0,
                aof_delayed_fsync=aof.delayed_fsync,
            )
        return fields


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _debug_delay(usec: int) -> None:
    """Redis's debugDelay: sleep usec microseconds; a negative -n sleeps 1 us one time in n."""
    if usec < 0:
        usec = 1 if random.randrange(-usec) == 0 else 0
    if usec:
        time.sleep(usec / 1e6)


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _unlink(path: str) -> None:
    """Remove a failed child's temporary file, if it left one."""
    try:
        os.unlink(path)
    except OSError:
        pass


def _rewrite_error(exc: OSError) -> str:
    """Redis's log line for a base that could not be written (rewriteAppendOnlyFile)."""
    reason = exc.strerror or exc
    if exc.filename2 is not None:
        return f"Error moving temp append only file on the final destination: {reason}"
    if exc.filename is not None:
        return f"Failed opening the temp file for AOF rewrite in rewriteAppendOnlyFile(): {reason}"
    return f"Write error writing append only file on disk: {reason}"


def _exit(*lines: str) -> None:
    """End the start-up as Redis's exit(1) after its log lines."""
    for line in lines:
        log.critical("%s", line)
    sys.stdout.flush()
    os._exit(1)
