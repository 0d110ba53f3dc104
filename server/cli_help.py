"""`millrace --help`: the usage line and every parameter with its default, grouped as redis.conf groups them.

The groups and their order are those of Redis's own redis.conf, so a reader can
hold the two side by side; a mistyped flag gets the closest name.
"""

from __future__ import annotations

import difflib

from . import __version__
from .config import PARAMS, Config

# redis.conf's sections, in its order, with the parameters each one documents.
GROUPS: dict[str, tuple[str, ...]] = {
    "NETWORK": (
        "bind", "bind-source-addr", "protected-mode", "enable-protected-configs", "enable-debug-command", "enable-module-command",
        "port", "tcp-backlog", "unixsocket", "unixsocketperm", "timeout", "tcp-keepalive", "socket-mark-id",
    ),
    "TLS/SSL": (
        "tls-port", "tls-cert-file", "tls-key-file", "tls-key-file-pass", "tls-client-cert-file", "tls-client-key-file",
        "tls-client-key-file-pass", "tls-dh-params-file", "tls-ca-cert-file", "tls-ca-cert-dir", "tls-auth-clients",
        "tls-replication", "tls-cluster", "tls-protocols", "tls-ciphers", "tls-ciphersuites", "tls-prefer-server-ciphers",
        "tls-session-caching", "tls-session-cache-size", "tls-session-cache-timeout",
    ),
    "GENERAL": (
        "daemonize", "supervised", "pidfile", "loglevel", "logfile", "syslog-enabled", "syslog-ident", "syslog-facility",
        "crash-log-enabled", "crash-memcheck-enabled", "databases", "always-show-logo", "set-proc-title", "proc-title-template",
        "locale-collate", "hide-user-data-from-log",
    ),
    "SNAPSHOTTING": ("save", "stop-writes-on-bgsave-error", "rdbcompression", "rdbchecksum", "sanitize-dump-payload", "dbfilename",
                     "rdb-del-sync-files", "dir"),
    "REPLICATION": (
        "replicaof", "masterauth", "masteruser", "replica-serve-stale-data", "replica-read-only", "repl-diskless-sync",
        "repl-diskless-sync-delay", "repl-diskless-sync-max-replicas", "repl-diskless-load", "replica-full-sync-buffer-limit", "repl-ping-replica-period",
        "repl-timeout", "repl-disable-tcp-nodelay", "repl-backlog-size", "repl-backlog-ttl", "replica-priority",
        "propagation-error-behavior", "replica-ignore-disk-write-errors", "replica-announced", "min-replicas-to-write",
        "min-replicas-max-lag", "replica-announce-ip", "replica-announce-port",
    ),
    "KEYS TRACKING": ("tracking-table-max-keys",),
    "SECURITY": ("acllog-max-len", "aclfile", "requirepass", "acl-pubsub-default"),
    "CLIENTS": ("maxclients", "max-new-connections-per-cycle", "max-new-tls-connections-per-cycle"),
    "MEMORY MANAGEMENT": ("maxmemory", "maxmemory-policy", "maxmemory-samples", "maxmemory-eviction-tenacity", "replica-ignore-maxmemory",
                          "active-expire-effort"),
    "LAZY FREEING": ("lazyfree-lazy-eviction", "lazyfree-lazy-expire", "lazyfree-lazy-server-del", "replica-lazy-flush",
                     "lazyfree-lazy-user-del", "lazyfree-lazy-user-flush"),
    "THREADED I/O": ("io-threads",),
    "KERNEL OOM CONTROL": ("oom-score-adj", "oom-score-adj-values"),
    "KERNEL TRANSPARENT HUGEPAGE CONTROL": ("disable-thp",),
    "APPEND ONLY MODE": (
        "appendonly", "appendfilename", "appenddirname", "appendfsync", "no-appendfsync-on-rewrite", "auto-aof-rewrite-percentage",
        "auto-aof-rewrite-min-size", "aof-load-truncated", "aof-use-rdb-preamble", "aof-timestamp-enabled", "aof-disable-auto-gc",
    ),
    "SHUTDOWN": ("shutdown-timeout", "shutdown-on-sigint", "shutdown-on-sigterm"),
    "NON-DETERMINISTIC LONG BLOCKING COMMANDS": ("lua-time-limit", "busy-reply-threshold"),
    "REDIS CLUSTER": (
        "cluster-enabled", "cluster-config-file", "cluster-node-timeout", "cluster-port", "cluster-replica-validity-factor",
        "cluster-migration-barrier", "cluster-allow-replica-migration", "cluster-require-full-coverage", "cluster-replica-no-failover",
        "cluster-allow-reads-when-down", "cluster-allow-pubsubshard-when-down", "cluster-link-sendbuf-limit",
        "cluster-announce-hostname", "cluster-announce-human-nodename", "cluster-preferred-endpoint-type",
        "cluster-slot-stats-enabled", "cluster-compatibility-sample-ratio",
    ),
    "CLUSTER DOCKER/NAT SUPPORT": ("cluster-announce-tls-port", "cluster-announce-ip", "cluster-announce-port", "cluster-announce-bus-port"),
    "SLOW LOG": ("slowlog-log-slower-than", "slowlog-max-len"),
    "LATENCY MONITOR": ("latency-monitor-threshold",),
    "LATENCY TRACKING": ("latency-tracking", "latency-tracking-info-percentiles"),
    "EVENT NOTIFICATION": ("notify-keyspace-events",),
    "ADVANCED CONFIG": (
        "hash-max-listpack-entries", "hash-max-listpack-value", "list-max-listpack-size", "list-compress-depth",
        "set-max-intset-entries", "set-max-listpack-entries", "set-max-listpack-value", "zset-max-listpack-entries", "zset-max-listpack-value", "hll-sparse-max-bytes",
        "stream-node-max-bytes", "stream-node-max-entries", "stream-idmp-duration", "stream-idmp-maxsize", "activerehashing", "client-output-buffer-limit",
        "client-query-buffer-limit", "maxmemory-clients", "proto-max-bulk-len", "hz", "dynamic-hz",
        "aof-rewrite-incremental-fsync", "rdb-save-incremental-fsync", "lfu-log-factor", "lfu-decay-time",
    ),
    "ACTIVE DEFRAGMENTATION": (
        "activedefrag", "active-defrag-ignore-bytes", "active-defrag-threshold-lower", "active-defrag-threshold-upper",
        "active-defrag-cycle-min", "active-defrag-cycle-max", "active-defrag-max-scan-fields", "jemalloc-bg-thread",
        "server-cpulist", "bio-cpulist", "aof-rewrite-cpulist", "bgsave-cpulist", "ignore-warnings",
    ),
}

USAGE = f"""\
Millrace {__version__}, a Redis-compatible stream server.

Usage: millrace [/path/to/millrace.conf] [--name value ...] [-]
       millrace - (read the configuration from stdin)
       millrace -v or --version
       millrace -h or --help

Examples:
       millrace (Redis's defaults: port 6379, snapshots in the current directory)
       millrace --port 7000 --dir /var/lib/millrace --appendonly yes
       millrace /etc/millrace.conf --loglevel verbose
       echo 'maxmemory 128mb' | millrace -

Every parameter below is also a redis.conf-style directive ("name value" per line)
and a CONFIG GET/SET name; later settings win. Shown as --name default, grouped as
redis.conf groups them.
"""


# Redis's earlier spellings, still accepted (slaveof, ziplist, ...): listed last, apart.
OLDER_NAMES = (
    "slaveof", "slave-read-only", "slave-serve-stale-data", "cluster-slave-no-failover", "cluster-slave-validity-factor",
    "hash-max-ziplist-entries", "hash-max-ziplist-value", "list-max-ziplist-size", "min-slaves-max-lag", "min-slaves-to-write",
    "repl-ping-slave-period", "slave-announce-ip", "slave-announce-port", "slave-ignore-maxmemory", "slave-lazy-flush",
    "slave-priority", "zset-max-ziplist-entries", "zset-max-ziplist-value", "server_cpulist", "bio_cpulist",
    "aof_rewrite_cpulist", "bgsave_cpulist",
)


def _show(config: Config, name: str) -> str:
    value = config.format(name)
    return '""' if value == "" else value


def help_text() -> str:
    """The whole --help page: usage, then each group's parameters and their defaults."""
    config = Config()
    grouped = {name for names in GROUPS.values() for name in names}
    older = tuple(name for name in OLDER_NAMES if name in PARAMS)
    own = tuple(name for name in PARAMS if name not in grouped and name not in OLDER_NAMES)
    lines = [USAGE]
    groups = [*GROUPS.items(), ("MILLRACE (no redis.conf counterpart)", own), ("OLDER NAMES (Redis's earlier spellings)", older)]
    for title, names in groups:
        if not names:
            continue
        lines.append(title)
        for name in names:
            alias = PARAMS[name].alias
            same = f"  (the same setting as --{alias})" if alias and name in older else ""
            lines.append(f"  --{name} {_show(config, name)}{same}")
        lines.append("")
    return "\n".join(lines)


def suggestion(name: str) -> str | None:
    """The parameter closest to a mistyped one (difflib), or None when nothing is close."""
    match = difflib.get_close_matches(name.lower(), PARAMS, n=1, cutoff=0.6)
    return match[0] if match else None
