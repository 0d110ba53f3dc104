"""`millrace` / `python -m server`: command line, config file, listener.

Like redis-server: an optional config file path first, then any parameter as
`--name value` (later wins), e.g. `millrace millrace.conf --port 7000`.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import gc
import logging
import logging.handlers
import os
import signal
import socket
import stat
import sys
import time

from protocol.errors import ProtocolError
from protocol.reader import split_args

from . import REDIS_VERSION, __version__, default_user, keyshared_sessions, output_limits, proctitle, retention
from . import shutdown as stopping
from .client import Client
from .commands.idmp import expire_cycle as idmp_expire_cycle
from .config import DEPRECATED, PARAMS, Config, ConfigError
from .info import rss_bytes, sample_ops
from .lag_watch import cron as lag_watch_cron
from .notify import notify_expired
from .open_files import adjust_open_files_limit
from .process import (
    VERBOSE,
    PeriodicLog,
    daemonize,
    pidfile_path,
    remove_pidfile,
    set_cpu_affinity,
    set_oom_score_adj_for_role,
    startup_warnings,
    write_pidfile,
)
from .server import Server

log = logging.getLogger("millrace")
_LEVELS = {"debug": logging.DEBUG, "verbose": VERBOSE, "notice": logging.INFO, "warning": logging.WARNING, "nothing": logging.CRITICAL + 10}


class FatalConfigError(Exception):
    """A directive Redis would refuse at startup: where it was and why."""

    def __init__(self, lineno: int, line: str, reason: str) -> None:
        super().__init__(reason)
        self.lineno, self.line, self.reason = lineno, line, reason


Directive = tuple[int, str, list[str]]  # line number, line as written, words


def read_config_file(path: str) -> list[Directive]:
    """Directives of a redis.conf-style file: `name value...`, '#' comments, quotes as Redis."""
    with open(path, encoding="utf-8", errors="surrogateescape") as handle:
        text = handle.read()
    return config_directives(text.splitlines())


def config_directives(lines: list[str], first_line: int = 1, depth: int = 0) -> list[Directive]:
    """Directives in order; `include path` brings another file's in at that place, as Redis does."""
    directives = []
    for offset, raw in enumerate(lines):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            words = [w.decode("utf-8", "surrogateescape") for w in split_args(line.encode("utf-8", "surrogateescape"))]
        except ProtocolError:
            raise FatalConfigError(first_line + offset, line, "Unbalanced quotes in configuration line") from None
        if words and words[0].lower() == "include" and len(words) == 2 and depth < 16:
            try:
                with open(words[1], encoding="utf-8", errors="surrogateescape") as handle:
                    directives.extend(config_directives(handle.read().splitlines(), 1, depth + 1))
            except OSError as exc:
                sys.stderr.write(f"Fatal error, can't open config file '{os.path.abspath(words[1])}': {exc.strerror}\n")
                sys.exit(1)
        elif words:
            directives.append((first_line + offset, line, words))
    return directives


def _repr(arg: str) -> str:
    from .commands.server import quote_arg

    return quote_arg(arg.encode("utf-8", "surrogateescape"))


def parse_args(args: list[str]) -> tuple[str | None, list[Directive]]:
    """`[config-file] [--name value ...]` -> (config file path, directives in order).

    As in redis-server, the options follow the file's lines (after one empty
    line), so an error in `--port abc` is reported "at line 2" without a file.
    """
    directives: list[Directive] = []
    config_file = None
    file_lines = 0
    if args and args[0] == "-":  # the configuration on stdin, as `redis-server -`
        lines = sys.stdin.read().splitlines()
        directives.extend(config_directives(lines))
        file_lines = len(lines)
        args = args[1:]
    elif args and not args[0].startswith("--") and args[0] not in ("-h", "-v"):
        config_file = os.path.abspath(args[0])
        try:
            with open(config_file, encoding="utf-8", errors="surrogateescape") as handle:
                lines = handle.read().splitlines()
        except OSError as exc:
            sys.stderr.write(f"Fatal error, can't open config file '{config_file}': {exc.strerror}\n")
            sys.exit(1)
        directives.extend(config_directives(lines))
        file_lines = len(lines)
        args = args[1:]
    lineno = file_lines + 1
    index = 0
    while index < len(args):
        arg = args[index]
        if arg in ("-h", "--help"):
            from .cli_help import help_text

            print(help_text())
            sys.exit(0)
        if arg in ("-v", "--version"):
            print(f"Millrace server v={__version__} redis_version={REDIS_VERSION} bits=64")
            sys.exit(0)
        if not arg.startswith("--"):
            sys.stderr.write(f"Unexpected argument: {arg}\n")
            sys.exit(1)
        values = []
        index += 1
        while index < len(args) and not args[index].startswith("--"):
            values.append(args[index])
            index += 1
        lineno += 1
        name = arg[2:]
        line = " ".join([name, *(_repr(v) for v in values)])
        directives.append((lineno, line, [name, *values]))
    return config_file, directives


def build_config(config_file: str | None, directives: list[Directive]) -> Config:
    """Apply directives in order; a bad one raises FatalConfigError."""
    config = Config(config_file=config_file)
    for lineno, line, words in directives:
        name = words[0].lower()
        if name == "user" and len(words) >= 2:  # Redis's ACLAppendUserForLoading: checked here, applied by load_users
            try:
                config.default_user = default_user.from_directive(words[1:], config.default_user is not None)
            except default_user.AclError as exc:
                raise FatalConfigError(lineno, line, str(exc)) from None
            continue
        if name in DEPRECATED and len(words) == 2:
            continue  # as Redis 8: no effect there either
        param = PARAMS.get(name)
        if param is None:
            from .cli_help import suggestion

            close = suggestion(name)
            hint = f"\nDid you mean '{close}'? (millrace --help lists every parameter)" if close else ""
            raise FatalConfigError(lineno, line, "Bad directive or wrong number of arguments" + hint)
        if not param.multi and len(words) != 2:
            raise FatalConfigError(lineno, line, "wrong number of arguments")
        try:
            config.startup_set(name, " ".join(words[1:]))
            if name == "dir":
                check_dir(config["dir"])
        except ConfigError as exc:
            raise FatalConfigError(lineno, line, str(exc)) from None
    return config


def load_users(server: Server) -> None:
    """Redis's ACLLoadUsersAtStartup: the config file's `user` line or the ACL file sets the default user
    (requirepass then no longer does, until CONFIG SET gives it again); an error stops start-up."""
    config = server.config
    user = config.default_user
    try:
        if config["aclfile"]:
            if user is not None:
                log.warning(default_user.BOTH)
                sys.exit(1)
            user = default_user.from_file(os.path.join(config["dir"], config["aclfile"]))
    except default_user.AclError as exc:
        log.warning("Aborting Millrace startup because of ACL errors: %s", exc)  # Redis's words, naming this server
        sys.exit(1)
    if user is not None:
        server.default_user = user


def check_dir(path: str) -> None:
    """Redis chdirs into `dir` while reading the configuration: a missing one stops start-up (strerror as chdir's)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise ConfigError(exc.strerror or str(exc)) from None
    if not stat.S_ISDIR(mode):
        raise ConfigError(os.strerror(errno.ENOTDIR))
    if not os.access(path, os.X_OK):
        raise ConfigError(os.strerror(errno.EACCES))


def build_server(args: list[str]) -> Server:
    """The server the command line describes; exits like redis-server on a bad config."""
    try:
        config = build_config(*parse_args(args))
    except FatalConfigError as exc:
        sys.stderr.write(
            f"\n*** FATAL CONFIG FILE ERROR (Millrace {__version__}) ***\n"
            f"Reading the configuration file, at line {exc.lineno}\n"
            f">>> '{exc.line}'\n{exc.reason}\n"
        )
        sys.exit(1)
    from .commands.server import install_config_listeners
    from .persistence import Persistence
    from .replica_link import become_replica
    from .replication import Replication

    server = Server(config)
    install_config_listeners(server)
    Persistence(server).install()
    Replication(server).install()
    if config["replicaof"]:
        host, port = config["replicaof"].split()
        server.startup_hooks.append(lambda: become_replica(server, host, int(port)))
    return server


class _RedisFormatter(logging.Formatter):
    """Redis's log line: `pid:M 22 Nov 2026 01:13:40.123 * message`, level as . - * #."""

    SYMBOLS = {logging.DEBUG: ".", VERBOSE: "-", logging.INFO: "*", logging.WARNING: "#", logging.ERROR: "#", logging.CRITICAL: "#"}

    def format(self, record: logging.LogRecord) -> str:
        record.symbol = self.SYMBOLS.get(record.levelno, "*")
        return super().format(record)


class _Syslog(logging.handlers.SysLogHandler):
    """syslog-enabled: each log line's message to the local syslog as Redis's openlog/syslog send it
    (`<PRI>Mmm dd hh:mm:ss ident[pid]: message`), Redis's levels as syslog's (notice is NOTICE)."""

    PRIORITIES = {"DEBUG": "debug", logging.getLevelName(VERBOSE): "info", "INFO": "notice"}  # the rest: warning

    def __init__(self, ident: str, facility: str) -> None:
        super().__init__("/dev/log", facility=self.facility_names[facility])
        self.append_nul = False
        self.tag = ident

    def mapPriority(self, levelName: str) -> str:  # noqa: N802 (the base class's name)
        return self.PRIORITIES.get(levelName, "warning")

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.localtime(record.created)
        return f"{time.strftime('%b', stamp)} {stamp.tm_mday:2d} {time.strftime('%H:%M:%S', stamp)} {self.tag}[{record.process}]: {record.getMessage()}"


LOG_MAX_LEN = 1024  # Redis's buffer for one log message: its first 1023 bytes are written (file and syslog)


def _cut_long(record: logging.LogRecord) -> bool:
    """A handler's filter: a message of LOG_MAX_LEN bytes or more cut to its first 1023, as Redis's
    vsnprintf into its buffer cuts it (uncut, a very long one would not even fit a syslog datagram)."""
    message = record.getMessage()
    if len(message) >= LOG_MAX_LEN // 4 and len(data := message.encode(errors="replace")) >= LOG_MAX_LEN:
        record.msg, record.args = data[: LOG_MAX_LEN - 1].decode(errors="ignore"), ()
    return True


def setup_logging(config: Config) -> None:
    handler: logging.Handler
    handler = logging.FileHandler(config["logfile"]) if config["logfile"] else logging.StreamHandler(sys.stdout)
    handler.setFormatter(_RedisFormatter("%(process)d:M %(asctime)s.%(msecs)03d %(symbol)s %(message)s", "%d %b %Y %H:%M:%S"))
    handler.addFilter(_cut_long)
    log.handlers[:] = [handler]
    log.setLevel(_LEVELS[config["loglevel"]])
    if config["syslog-enabled"]:
        try:
            syslog = _Syslog(config["syslog-ident"], config["syslog-facility"])
            syslog.addFilter(_cut_long)
            log.addHandler(syslog)
        except OSError as exc:  # (Redis's syslog() drops the lines without a word)
            log.warning("syslog-enabled: the local syslog (/dev/log) cannot be reached: %s", exc.strerror or exc)
    config.listeners.append(lambda name, value: name == "loglevel" and log.setLevel(_LEVELS[value]))


async def serve(server: Server) -> None:
    loop = asyncio.get_running_loop()
    server.loop = loop
    config = server.config
    try:
        sockets = _bind_all(config)
    except _ListenError as exc:
        _cannot_listen(exc.address, exc.cause)
    if not sockets:
        _cannot_listen(f"*:{config['port']}", OSError(errno.EADDRNOTAVAIL, os.strerror(errno.EADDRNOTAVAIL)))
    server.port = sockets[0].getsockname()[1]
    proctitle.start(config, server.port)
    config.listeners.append(lambda name, value: proctitle.on_config(config, name))
    server.memory_startup = rss_bytes()
    stopped = loop.create_future()
    server.shutdown = lambda: stopped.done() or stopped.set_result(None)
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopping.on_signal, server, sig == signal.SIGINT)
    # Served from here, while loading too: until the hooks are done every command goes through
    # execute()'s checks, and what may not run during a load gets LOADING, as from Redis.
    server.loading = server.refusing = True
    try:
        listeners = [await loop.create_server(lambda: Client(server), sock=sock) for sock in sockets]
        config.listeners.append(lambda name, value: _relisten(server, listeners, name))
        for hook in server.startup_hooks:
            steps = hook()
            if steps is not None:  # a loader's steps: the clients are served between them
                await _load(server, steps, stopped)
            if stopped.done():
                break  # SHUTDOWN or a signal during the load: no save of half the data (they refuse one then)
    finally:
        server.loading = False
        server.update_refusing()
    if not stopped.done():
        loop.call_later(1 / server.hz, _cron, server)
        log.info("Millrace %s ready to accept connections tcp on port %d", __version__, server.port)
        for warning in startup_warnings(config, server.default_user.nopass):
            log.warning(warning)
    await stopped
    for listener in listeners:
        listener.close()
    for hook in server.shutdown_hooks:
        hook()
    pidfile = pidfile_path(config)
    if pidfile:
        remove_pidfile(pidfile)
    log.info("Millrace is now ready to exit, bye bye...")


async def _load(server: Server, steps, stopped: asyncio.Future) -> None:
    """Run a loader's steps with the event loop turning between them: four turns, as Redis's
    processEventsWhileBlocked, so that a request is accepted, read, run and answered at one stop."""
    try:
        for _ in steps:
            for _turn in range(4):
                await asyncio.sleep(0)
            if stopped.done():
                return
    finally:
        steps.close()  # a load cut short by a shutdown runs its own cleanup now


class _ListenError(Exception):
    def __init__(self, address: str, cause: OSError) -> None:
        super().__init__(address)
        self.address, self.cause = address, cause


def _bind_all(config: Config) -> list[socket.socket]:
    """Listening sockets for every bind address at the configured port (an optional '-' address this
    host lacks is skipped), marked with socket-mark-id. _ListenError for a required one, no new one left open."""
    sockets: list[socket.socket] = []
    port = config["port"]
    try:
        for word in config["bind"].split():
            host = word.lstrip("-")
            try:
                sockets.append(_listen(host, port, config["tcp-backlog"]))
            except OSError as exc:
                if word.startswith("-") and exc.errno in UNAVAILABLE:
                    continue  # an optional address this host does not have (Redis's '-')
                raise _ListenError(f"{host}:{port}", exc) from exc
    except _ListenError:
        for sock in sockets:
            sock.close()
        raise
    if config["socket-mark-id"]:  # SO_MARK on the listening sockets (routing, firewalls), as Redis; not critical
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, getattr(socket, "SO_MARK", 36), config["socket-mark-id"])
    return sockets


def _at_once(coro):
    """Run a coroutine that does its work before it first waits (the wait, for a loop turn, dropped)."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    return None


def _serve_on(server: Server, listeners: list, sockets: list[socket.socket]) -> None:
    """Accept clients on these listening sockets at once (asyncio's and uvloop's create_server with
    start_serving=False never wait, nor does start_serving before its loop turn), each server in `listeners`."""
    for sock in sockets:
        made = _at_once(server.loop.create_server(lambda: Client(server), sock=sock, start_serving=False))
        listeners.append(made)
        _at_once(made.start_serving())


def _relisten(server: Server, listeners: list, name: str) -> None:
    """CONFIG SET port / bind, as Redis's changeListener: every listener is closed, then the server
    listens where the settings now say (port 0: on no TCP port); the connections made through them
    stay. Refused when a required address cannot be bound (CONFIG SET's undo listens anew where it did)."""
    if name not in ("port", "bind"):
        return
    config = server.config
    for old in listeners:
        old.close()
    listeners.clear()
    server.port = config["port"]
    if not config["port"]:
        return
    try:
        sockets = _bind_all(config)
    except _ListenError as exc:
        log.warning("Warning: Could not create server TCP listening socket %s: bind: %s", exc.address, exc.cause.strerror or exc.cause)
        raise ConfigError("Unable to listen on this port. Check server logs." if name == "port" else "Failed to bind to specified addresses.") from None
    _serve_on(server, listeners, sockets)


# Errors that make an optional ('-') bind address skipped rather than fatal, as Redis's listenToPort.
UNAVAILABLE = frozenset({errno.ENOPROTOOPT, errno.EPROTONOSUPPORT, errno.ESOCKTNOSUPPORT, errno.EPFNOSUPPORT, errno.EAFNOSUPPORT, errno.EADDRNOTAVAIL})


def _cannot_listen(address: str, exc: OSError) -> None:
    """A bind address that cannot be listened on ends the start-up, with Redis's two lines: serving
    the other addresses alone sent clients of that one to whatever else holds the port."""
    port = address.rsplit(":", 1)[1]
    log.warning("Warning: Could not create server TCP listening socket %s: bind: %s", address, exc.strerror or exc)
    log.warning("Failed listening on port %s (tcp), aborting.", port)
    sys.exit(1)


def _listen(host: str, port: int, backlog: int) -> socket.socket:
    """A listening TCP socket on host:port (SO_REUSEADDR, IPv6 only for IPv6 hosts, as Redis binds)."""
    host = {"*": "0.0.0.0", "::*": "::"}.get(host, host)  # Redis's wildcards
    family, kind, proto, _name, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
        sock.listen(backlog)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


def _cron(server: Server) -> None:
    """Periodic work (Redis's serverCron). Each task runs in its own guard and the next tick is
    scheduled whatever happens: one failing task (a full disk under a save, a bug) must not stop
    expiry, saves, replication and the rest for good."""
    try:
        now = server.clock()
        server.hz = adapt_hz(server.config["hz"], len(server.clients), server.config["dynamic-hz"])
        for task in CRON_TASKS:
            try:
                task(server, now)
            except Exception:
                log.exception("The periodic task %s failed; the others go on", task.__name__)
    finally:
        server.loop.call_later(1 / server.hz, _cron, server)


MAX_CLIENTS_PER_CLOCK_TICK = 200  # Redis's: dynamic-hz doubles the rate while more clients than this share a tick
MAX_HZ = 500


def adapt_hz(hz: int, clients: int, dynamic: bool) -> int:
    """The cron's rate this tick: hz, doubled (up to 500) while clients // rate exceeds 200 (Redis's serverCron)."""
    if dynamic:
        while clients // hz > MAX_CLIENTS_PER_CLOCK_TICK:
            hz *= 2
            if hz > MAX_HZ:
                return MAX_HZ
    return hz


def _active_expire(server: Server, now: int) -> None:
    """Expired keys removed within a share of the tick (25 % + 2 % per active-expire-effort step above 1,
    as Redis). Never on a replica: the primary's DELs
    remove them there (Redis runs activeExpireCycle on masters only)."""
    if not server.active_expire:
        return  # DEBUG SET-ACTIVE-EXPIRE 0
    if server.replication is not None and server.replication.master is not None:
        _expire_replica_keys(server, now)
        return
    if server.pause is not None:
        return  # CLIENT PAUSE (either mode) pauses expiry: Redis's activeExpireCycle returns at once
    started = time.perf_counter()
    effort = server.config["active-expire-effort"] - 1  # Redis's activeExpireCycle: 0..9 scales its three knobs
    keys_per_loop, time_share, acceptable_stale = 20 + 5 * effort, (25 + 2 * effort) / 100, 10 - effort
    deadline = started + time_share / server.hz
    sampled = expired = 0
    stats = server.stats
    for db in server.keyspace.dbs:
        while db.expires:
            before = db.expire_sampled
            removed, stale = db.expire_cycle(now, keys_per_loop, acceptable_stale=acceptable_stale)
            sampled += db.expire_sampled - before
            expired += len(removed)
            if removed:
                stats["expired_keys"] += len(removed)
                notify_expired(server, db.id, removed)
                server.after_write(db.id, [[b"DEL", key] for key in removed])
            if not stale:
                break
            if time.perf_counter() > deadline:
                stats["expired_time_cap_reached_count"] += 1
                break
    # Redis's activeExpireCycle statistics: a moving average of the expired share of the keys sampled
    # (each cycle weighs 5 %), and the cycles' CPU time
    server.expired_stale_perc = (expired / sampled if sampled else 0.0) * 0.05 + server.expired_stale_perc * 0.95
    expiry_ns = int((time.perf_counter() - started) * 1e9)
    stats["expire_cycle_cpu_us"] += expiry_ns // 1000
    if expiry_ns >= server.latency_threshold_ns:  # LATENCY's expire-cycle event, as Redis's activeExpireCycle
        server.latency.add("expire-cycle", expiry_ns // 1_000_000)


def _expire_replica_keys(server: Server, now: int) -> None:
    """A writable replica expires the keys its own clients gave a TTL (Redis's expireSlaveKeys); a key
    that lost its TTL or is gone is forgotten."""
    tracked = server.replica_keys_with_expire
    if not tracked:
        return
    dbs = server.keyspace.dbs
    touched = set()
    for db_id, key in list(tracked):
        database = dbs[db_id]
        when = database.expires.get(key)
        if when is not None and when >= now:
            continue
        tracked.discard((db_id, key))
        if when is not None:
            database.expire_now(key)
            touched.add(db_id)
    for db_id in touched:
        server.propagate_expired(dbs[db_id])


def _streams(server: Server, now: int) -> None:
    if server.idmp_keys:
        idmp_expire_cycle(server)
    if server.keyshared_keys:
        keyshared_sessions.cron(server, now)  # KEYSHARED members past SESSION-TIMEOUT leave, also without reads
    if server.blocking.ready:
        server.serve_ready()


def _measure(server: Server, now: int) -> None:
    sample_ops(server, now)
    lag_watch_cron(server, now)
    rss = rss_bytes() if log.isEnabledFor(VERBOSE) else 0  # only the verbose periodic log shows it
    server.memory_meter.cron(now)  # maxmemory: the data's memory (evictions run before the next write)
    if server.access is not None:
        server.access.prune()
    _periodic_log(server, now, rss)


def _clients(server: Server, now: int) -> None:
    output_limits.cron(server)
    timeout = server.config["timeout"]
    if timeout and now - server.idle_checked >= 1000:
        server.idle_checked = now
        close_idle_clients(server, timeout, now / 1000)


def _persistence(server: Server, now: int) -> None:
    if server.persistence is not None:
        server.persistence.cron()


def _replication(server: Server, now: int) -> None:
    if server.replication is not None:
        server.replication.cron()


def _retention(server: Server, now: int) -> None:
    retention.cron(server)


def _refusal(server: Server, now: int) -> None:
    server.update_refusing()


def _tracking(server: Server, now: int) -> None:
    """Redis's serverCron trackingLimitUsedSlots: a tracking-table-max-keys lowered by CONFIG SET binds
    within a tick, not only at the next tracked read."""
    tracking = server.tracking
    limit = server.config["tracking-table-max-keys"]
    if tracking is not None and limit and len(tracking.table) > limit:
        tracking.limit_used_slots(limit)


CRON_TASKS = (_active_expire, _streams, _measure, _clients, _persistence, _replication, _retention, _refusal, _tracking, stopping.cron)


_periodic_log = PeriodicLog()


def close_idle_clients(server: Server, timeout: int, now: float) -> None:
    """The `timeout` parameter: close clients idle that many seconds. As Redis's clientsCronHandleTimeout,
    never a blocked client, a replica, our primary or MONITOR, nor a Pub/Sub subscriber (a quiet channel is no dead link)."""
    for client in list(server.clients.values()):
        if (client.blocked is None and not client.monitor and client.replica is None and client.master_link is None and not client.channels
                and not client.patterns and not client.shard_channels and now - client.last_interaction / 1000 > timeout):
            log.log(VERBOSE, "Closing idle client")  # at Redis's level: `loglevel verbose` shows it
            client.kill()


def main(argv: list[str] | None = None) -> None:
    from . import commands  # noqa: F401  (registers the command table)

    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as Redis: a closed terminal does not stop the server
    server = build_server(sys.argv[1:] if argv is None else argv)
    if server.config["daemonize"]:
        daemonize()
    setup_logging(server.config)
    load_users(server)
    adjust_open_files_limit(server.config)
    pidfile = pidfile_path(server.config)
    if pidfile:
        write_pidfile(pidfile)
    set_oom_score_adj_for_role(server)  # as Redis's main(): the role's score, the server's CPUs
    set_cpu_affinity(server.config["server-cpulist"])
    gc.freeze()
    try:
        import uvloop

        uvloop.run(serve(server))
    except OSError as exc:  # listening has its own lines (_cannot_listen); persistence logs and exits itself
        log.error("Fatal error: %s", exc.strerror or exc)
        sys.exit(1)


if __name__ == "__main__":
    main()
