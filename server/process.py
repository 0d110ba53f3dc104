"""The server as a process: `daemonize`, `pidfile`, start-up warnings and the cron's periodic log lines.

What redis-server does around its event loop, kept out of main.py: detach
from the terminal, record the pid, tell the operator about settings that lose
data or leave the server open, and at `verbose`/`debug` say what the keyspace
and the clients look like every five seconds.
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger("millrace")

VERBOSE = 15  # Redis's LL_VERBOSE, between debug and notice; printed as '-'
DEFAULT_PIDFILE = "/var/run/millrace.pid"  # Redis's CONFIG_DEFAULT_PID_FILE is /var/run/redis.pid
PERIODIC_MS = 5000  # Redis's serverCron logs these run_with_period(5000)

logging.addLevelName(VERBOSE, "VERBOSE")


def daemonize() -> None:
    """Detach as a daemon: fork, new session, fork again, stdio on /dev/null; the first process exits 0.

    Runs before the event loop and any thread exist (main() calls it right after the
    configuration is read), so forking is safe.
    """
    if os.fork():
        os._exit(0)
    os.setsid()
    if os.fork():
        os._exit(0)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    if null > 2:
        os.close(null)


def pidfile_path(config) -> str | None:
    """Where the pid goes: `pidfile`, or Redis's default when daemonized without one."""
    if config["pidfile"]:
        return config["pidfile"]
    return DEFAULT_PIDFILE if config["daemonize"] else None


def write_pidfile(path: str) -> None:
    """As Redis's createPidFile: a failure is logged and the server runs on."""
    try:
        with open(path, "w") as handle:
            handle.write(f"{os.getpid()}\n")
    except OSError as exc:
        log.warning("Failed to write PID file: %s", exc.strerror or exc)


def remove_pidfile(path: str) -> None:
    log.info("Removing the pid file.")
    try:
        os.unlink(path)
    except OSError:
        pass


def _loopback_only(bind: str) -> bool:
    hosts = [h.lstrip("-") for h in bind.split()]
    return all(h == "localhost" or h.startswith("127.") or h == "::1" for h in hosts)


def startup_warnings(config, nopass: bool) -> list[str]:
    """Settings that lose data or leave the server open to anyone, as start-up warnings."""
    warnings = []
    if not config["save"] and not config["appendonly"]:
        warnings.append(
            "WARNING no persistence is configured (save \"\" and appendonly no): everything written is lost when the server stops."
            " Use --appendonly yes or a save schedule to keep it."
        )
    if config["appendonly"] and config["appendfsync"] == "no":
        warnings.append("WARNING appendfsync no leaves fsync to the kernel: a machine crash can lose the last ~30 seconds of writes.")
    if not config["protected-mode"] and nopass and not _loopback_only(config["bind"]):
        warnings.append(
            f"WARNING protected-mode is no and no password is set, while listening on {config['bind']}:"
            " any client that can reach this port can read, change and delete every key. Set requirepass or bind to 127.0.0.1."
        )
    return warnings


class PeriodicLog:
    """Redis's serverCron lines: keyspace size at verbose, clients and memory at debug, every 5 s."""

    def __init__(self) -> None:
        self.last = 0

    def __call__(self, server, now_ms: int, rss: int) -> None:
        if now_ms - self.last < PERIODIC_MS or not log.isEnabledFor(VERBOSE):
            return
        self.last = now_ms
        for db in server.keyspace.dbs:
            if len(db):
                log.log(VERBOSE, "DB %d: %d keys (%d volatile) in %d slots HT.", db.id, len(db), len(db.expires), table_slots(len(db)))
        if log.isEnabledFor(logging.DEBUG):
            clients = list(server.clients.values())
            replicas = sum(1 for c in clients if getattr(c, "replica", None) is not None)
            log.debug("%d clients connected (%d replicas), %d bytes in use", len(clients) - replicas, replicas, rss)


def table_slots(keys: int) -> int:
    """The slots Redis's dict would have for that many keys (a power of two, at least 4, grown at ratio 1)."""
    slots = 4
    while slots < keys:
        slots *= 2
    return slots


# -- the kernel's view of the process: OOM score and CPU affinity (Redis's setOOMScoreAdj, setcpuaffinity) --

OOM_MASTER, OOM_REPLICA, OOM_BGCHILD = 0, 1, 2  # indexes into oom-score-adj-values
OOM_FILE = "/proc/self/oom_score_adj"
_oom_base: int | None = None  # the score before Millrace first set it (restored by `oom-score-adj no`)


def set_oom_score_adj(config, process_class: int) -> bool:
    """Write oom-score-adj-values[process_class] (added to the original score under `yes`/`relative`)
    to /proc/self/oom_score_adj, or put the original back once the setting is `no`. False (logged)
    when /proc refuses, as Redis's setOOMScoreAdj."""
    global _oom_base
    mode = config["oom-score-adj"]
    try:
        if mode != "no":
            if _oom_base is None:
                with open(OOM_FILE) as handle:
                    _oom_base = int(handle.read())
            value = int(config["oom-score-adj-values"].split()[process_class])
            if mode == "yes":  # Redis's relative (shown as yes)
                value += _oom_base
            value = max(-1000, min(1000, value))
        elif _oom_base is not None:
            value, _oom_base = _oom_base, None
        else:
            return True
        with open(OOM_FILE, "w") as handle:
            handle.write(f"{value}\n")
    except (OSError, ValueError) as exc:
        log.warning("Unable to set oom_score_adj: %s", exc)
        return False
    return True


CPU_SETSIZE = 1024  # glibc's cpu_set_t: Redis's setcpuaffinity cannot name a CPU beyond it


def parse_cpulist(cpulist: str) -> set[int] | None:
    """Redis's (util-linux's) cpu list: "0,2,3", "0,2-3", "0-20:2"; None when malformed."""
    cpus: set[int] = set()
    for part in cpulist.split(","):
        bounds, _, step = part.partition(":")
        low, dash, high = bounds.partition("-")
        try:
            first = int(low)
            last = int(high) if dash else first
            stride = int(step) if step else 1
        except ValueError:
            return None
        if first < 0 or last < first or stride < 1:
            return None
        cpus.update(range(first, min(last, CPU_SETSIZE - 1) + 1, stride))  # CPU_SET ignores the rest
    return cpus


def set_cpu_affinity(cpulist: str) -> None:
    """server-cpulist, bgsave-cpulist, aof-rewrite-cpulist: bind this process to those CPUs. As Redis's
    setcpuaffinity, an empty or malformed list changes nothing, and a refusal by the kernel is ignored."""
    cpus = parse_cpulist(cpulist) if cpulist else None
    if cpus:
        try:
            os.sched_setaffinity(0, cpus)
        except OSError as exc:
            log.warning("Unable to set the CPU affinity to %s: %s", cpulist, exc)


def set_oom_score_adj_for_role(server) -> bool:
    """set_oom_score_adj for this server's role now (Redis's setOOMScoreAdj(-1))."""
    replication = server.replication  # None in a server built in-process: its config says the role
    replica = replication.master is not None if replication is not None else bool(server.config["replicaof"])
    return set_oom_score_adj(server.config, OOM_REPLICA if replica else OOM_MASTER)
