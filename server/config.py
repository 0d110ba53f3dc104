"""Configuration parameters under Redis's names, with Redis's validation.

Each parameter is declared once (name, kind, default, bounds, mutability).
The same table serves the command line (`--port 7000`), the config file
(`port 7000`), CONFIG GET/SET/REWRITE and INFO.
"""

from __future__ import annotations

import locale
import os
import re
from collections.abc import Callable
from dataclasses import dataclass

from protocol.errors import ReplyError
from protocol.reply import Error
from storage.glob import compile_pattern

from .proctitle import expand as expand_title

_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1024, "m": 1000**2, "mb": 1024**2, "g": 1000**3, "gb": 1024**3}
INT_MAX = 2**31 - 1
INT_MIN = -(2**31)
UINT_MAX = 2**32 - 1
LONG_MAX = LLONG_MAX = 2**63 - 1
ULLONG_MAX = 2**64 - 1


class ConfigError(ValueError):
    """A rejected value; str(self) is Redis's reason ("argument must be 'yes' or 'no'")."""


_STRING2LL = re.compile(r"0|-?[1-9][0-9]*")  # Redis's string2ll: no sign '+', spaces or leading zeros
_MEMORY = re.compile(r"([0-9]*)([a-zA-Z]*)")
_STRTOLL = re.compile(r"[ \t\n\v\f\r]*([+-]?[0-9]+)|")  # strtoll reaching the word's end (no digits at all: 0)
_DOUBLE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def is_glob(pattern: str) -> bool:
    """CONFIG GET's test (configGetCommand): a name with none of these is looked up, not matched."""
    return any(c in pattern for c in "[*?")


def parse_memory(text: str) -> int | None:
    """'1gb' -> 1073741824, as Redis's memtoull; None when malformed.

    Like memtoull: no spaces or sign, fewer than 128 digits, no digits at all is 0, a number past
    ULLONG_MAX saturates (strtoull) and the unit's product wraps around 2**64.
    """
    match = _MEMORY.fullmatch(text)
    if match is None or match[2].lower() not in _UNITS or len(match[1]) >= 128:
        return None
    return min(int(match[1] or "0"), ULLONG_MAX) * _UNITS[match[2].lower()] % (ULLONG_MAX + 1)


def _parse_double(text: str) -> float | None:
    """Redis's string2d: strtod's whole string (hex and inf too), no leading space, no NaN."""
    if _DOUBLE.fullmatch(text):
        return float(text)
    lowered = text.lower().lstrip("+-")
    if lowered in ("inf", "infinity"):
        return float("-inf") if text.startswith("-") else float("inf")
    try:
        return float.fromhex(text) if "0x" in text.lower() else None
    except ValueError:
        return None


def _format_percentile(value: float) -> str:
    text = repr(value)
    return text[:-2] if text.endswith(".0") else text


def parse_percentiles(raw: str) -> str:
    """latency-tracking-info-percentiles: numbers in [0, 100], one space apart, printed back shortest."""
    values = []
    for word in raw.split(" ") if raw else []:
        value = _parse_double(word)
        if value is None:
            raise ConfigError("Invalid latency-tracking-info-percentiles parameters")
        if not 0.0 <= value <= 100.0:
            raise ConfigError("latency-tracking-info-percentiles parameters should sit between [0.0,100.0]")
        values.append(_format_percentile(value))
    return " ".join(values)


# notify-keyspace-events: Redis's class characters; "A" is all of g$lshzxetd (not n, o, c, K, E, m).
_NOTIFY_CLASSES = "g$lshzxetdnoc"
_NOTIFY_ALL = frozenset("g$lshzxetd")


class NotifyClasses(str):
    """notify-keyspace-events as Redis prints it, carrying every class that was set: the printed
    form drops `n` beside `A` ("KEAn" prints "AKE"), yet Redis still emits `new` events then."""

    classes: frozenset[str] = frozenset()


def parse_notify_keyspace_events(raw: str) -> str:
    """The flags as Redis prints them back (keyspaceEventsFlagsToString): "KEA" -> "AKE"."""
    flags: set[str] = set()
    for char in raw:
        if char == "A":
            flags |= _NOTIFY_ALL
        elif char in _NOTIFY_CLASSES or char in "KEm":  # o and c (overwritten, type_changed) since Redis 8.2
            flags.add(char)
        else:
            raise ConfigError("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.")
    text = "A" if _NOTIFY_ALL <= flags else "".join(c for c in _NOTIFY_CLASSES if c in flags)
    value = NotifyClasses(text + "".join(c for c in "KEm" if c in flags))
    value.classes = frozenset(flags)
    return value


@dataclass(slots=True)
class Param:
    name: str
    kind: str  # int, memory, bool, enum, string, save
    default: object
    low: int = 0
    high: int = LLONG_MAX
    unsigned: bool = False  # Redis's unsigned types: a negative value (or a memory value past LLONG_MAX) is refused first
    choices: tuple[str, ...] = ()
    mutable: bool = True
    alias: str | None = None  # the other name of the same setting (slave-read-only...)
    older: bool = False  # the alias is Redis's earlier spelling: CONFIG REWRITE writes the current one only
    multi: bool = False  # takes several words on the command line / in the file (save, bind)
    protected: bool = False  # CONFIG SET refuses it unless enable-protected-configs allows
    hidden: bool = False  # Redis's HIDDEN_CONFIG: CONFIG GET answers its exact name, never a pattern
    normalize: Callable[[object], object] | None = None  # Redis's own check or stored form, after the kind's parse
    merge: Callable[[object, object], object] | None = None  # the stored value from the current one and a new one


PARAMS: dict[str, Param] = {}


def _param(name: str, kind: str, default: object, **kw) -> None:
    PARAMS[name] = Param(name, kind, default, **kw)


_param("port", "int", 6379, high=65535)  # CONFIG SET listens anew (server/main.py _relisten)
_param("bind", "string", "127.0.0.1 -::1", multi=True)
_param("dir", "string", ".", protected=True)  # Redis: the working directory; it must exist
_param("dbfilename", "string", "dump.mpk", protected=True, normalize=lambda v: _base_name(v, "dbfilename", "filename"))
_param("enable-protected-configs", "enum", "no", choices=("no", "yes", "local"), mutable=False)
_param("appendfilename", "string", "appendonly.aof", mutable=False, normalize=lambda v: _base_name(v, "appendfilename", "filename"))
_param("appenddirname", "string", "appendonlydir", mutable=False, normalize=lambda v: _base_name(v, "appenddirname", "dirname"))
_param("databases", "int", 16, low=1, high=INT_MAX, mutable=False)
_param("maxclients", "int", 10000, low=1, high=UINT_MAX, unsigned=True)
_param("maxmemory", "memory", 0, high=ULLONG_MAX, unsigned=True)
_param(
    "maxmemory-policy",
    "enum",
    "noeviction",
    choices=("volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl", "allkeys-lru", "allkeys-lfu", "allkeys-random", "noeviction"),
)
_param("maxmemory-samples", "int", 5, low=1, high=64)
_param("lfu-log-factor", "int", 10, high=INT_MAX)  # the LFU counter's logarithm base (server/eviction.py)
_param("lfu-decay-time", "int", 1, high=INT_MAX)  # minutes per decrement of an idle key's LFU counter
# Redis's test knob: a pause after each replayed AOF command (microseconds; -n: 1 us one time in n)
_param("key-load-delay", "int", 0, low=INT_MIN, high=INT_MAX, hidden=True)

_param("timeout", "int", 0, high=INT_MAX)
_param("tcp-backlog", "int", 511, high=INT_MAX, mutable=False)
_param("tcp-keepalive", "int", 300, high=INT_MAX)
_param("requirepass", "string", "")
_param("replica-announced", "bool", True)  # INFO's replica_announced: Sentinel leaves an unannounced replica out of SENTINEL REPLICAS
_param("aclfile", "string", "", mutable=False)  # the default user's rules, read at start-up (server/default_user.py)
_param("loglevel", "enum", "notice", choices=("debug", "verbose", "notice", "warning", "nothing"))
_param("logfile", "string", "", mutable=False)
_param("pidfile", "string", "", mutable=False)
_param("save", "save", "3600 1 300 100 60 10000", multi=True)
_param("appendonly", "bool", False)
_param("appendfsync", "enum", "everysec", choices=("everysec", "always", "no"))
_param("stream-node-max-entries", "int", 100, high=LLONG_MAX)
_param("stream-node-max-bytes", "memory", 4096, high=LONG_MAX, unsigned=True)
_param("stream-exact-lag", "bool", False)  # Millrace (issue 23): XINFO GROUPS lag/entries-read exact instead of nil
_param("stream-idmp-duration", "int", 100, low=1, high=86400)  # seconds an IDMP iid is kept (Redis 8.6)
_param("stream-idmp-maxsize", "int", 100, low=1, high=10000)  # iids kept per producer (Redis 8.6)
_param("proto-max-bulk-len", "memory", 512 * 1024 * 1024, low=1024 * 1024, high=LONG_MAX)
_param("client-query-buffer-limit", "memory", 1024 * 1024 * 1024, low=1024 * 1024, high=LONG_MAX, unsigned=True)
_param("hz", "int", 10, high=INT_MAX, normalize=lambda hz: min(max(hz, 1), 500))  # stored clamped to CONFIG_MIN_HZ..CONFIG_MAX_HZ
_param("daemonize", "bool", False, mutable=False)
_param("protected-mode", "bool", True)
_param("enable-debug-command", "enum", "no", choices=("no", "yes", "local"), mutable=False)
_param("io-threads", "int", 1, low=1, high=128, mutable=False)
# No cluster mode (no cluster bus listener, slots, MOVED, CLUSTER commands): `yes` would be a
# cluster node that answers as a standalone server, so it is refused, as tls-port is.
_param("cluster-enabled", "bool", False, mutable=False, normalize=lambda v: _no_cluster(v))
_param("busy-reply-threshold", "int", 5000, high=LONG_MAX, alias="lua-time-limit")
_param("lua-time-limit", "int", 5000, high=LONG_MAX, alias="busy-reply-threshold", older=True)
_param("replicaof", "string", "", multi=True, mutable=False, alias="slaveof", normalize=lambda v: _replicaof(v))
_param("slaveof", "string", "", multi=True, mutable=False, alias="replicaof", normalize=lambda v: _replicaof(v), older=True)
_param("masterauth", "string", "")
_param("masteruser", "string", "")
_param("replica-read-only", "bool", True, alias="slave-read-only")
_param("slave-read-only", "bool", True, alias="replica-read-only", older=True)
_param("replica-serve-stale-data", "bool", True, alias="slave-serve-stale-data")
_param("slave-serve-stale-data", "bool", True, alias="replica-serve-stale-data", older=True)
_param("repl-backlog-size", "memory", 1024 * 1024, low=1, high=LLONG_MAX, normalize=lambda size: max(size, 16384))  # CONFIG_REPL_BACKLOG_MIN_SIZE
_param("slowlog-log-slower-than", "int", 10000, low=-1, high=LLONG_MAX)
_param("slowlog-max-len", "int", 128, high=LONG_MAX)
_param("latency-monitor-threshold", "int", 0, high=LLONG_MAX)
_param("latency-tracking", "bool", True)
_param("notify-keyspace-events", "string", "", normalize=parse_notify_keyspace_events)
_param("latency-tracking-info-percentiles", "string", "50 99 99.9", multi=True, normalize=parse_percentiles)
_param("lazyfree-lazy-user-flush", "bool", False)
_param("activerehashing", "bool", True)
_param("dynamic-hz", "bool", True)
# TLS is not built in: a TLS port, TLS to the primary or the cluster bus would be a security setting
# accepted and ignored, so each is refused (its other tls-* parameters, as in Redis, do nothing
# while these are off).
_param("tls-port", "int", 0, high=65535, normalize=lambda v: _no_tls("tls-port", v, 0))
_param("tls-replication", "bool", False, normalize=lambda v: _no_tls("tls-replication", v, False))
_param("tls-cluster", "bool", False, normalize=lambda v: _no_tls("tls-cluster", v, False))
_param("unixsocket", "string", "", mutable=False, normalize=lambda v: _no_unixsocket(v))
# Redis's enum parameters Millrace does not act on: Redis's choices, so a value Redis refuses is
# refused with its text (they were free strings or yes/no booleans: `oom-score-adj relative` was
# refused as "must be 'yes' or 'no'", `acl-pubsub-default bogus` accepted).
for _name, _default, _choices in (
    ("acl-pubsub-default", "resetchannels", ("allchannels", "resetchannels")),
    ("cluster-preferred-endpoint-type", "ip", ("ip", "hostname", "unknown-endpoint")),
    ("oom-score-adj", "no", ("no", "yes", "relative", "absolute")),
    ("propagation-error-behavior", "ignore", ("ignore", "panic", "panic-on-replicas")),
    ("repl-diskless-load", "disabled", ("disabled", "on-empty-db", "swapdb")),
    ("sanitize-dump-payload", "no", ("no", "yes", "clients")),
    ("tls-auth-clients", "yes", ("no", "yes", "optional")),
):
    _param(_name, "enum", _default, choices=_choices)
PARAMS["oom-score-adj"].normalize = lambda v: "yes" if v == "relative" else v  # Redis's alias: shown as yes
# No client eviction: a limit other than 0 would be accepted and ignored, so it is refused (Redis's
# values and texts are checked first).
_param("maxmemory-clients", "string", "0", normalize=lambda v: _no_client_eviction(_memory_or_percent(v)))
_param("oom-score-adj-values", "string", "0 200 800", multi=True, normalize=lambda v: _oom_score_adj_values(v))
# No supervisor protocol (systemd's sd_notify, upstart's SIGSTOP): a unit waiting for READY=1
# would time out, so anything but `no` is refused rather than accepted and ignored.
_param("supervised", "enum", "no", choices=("upstart", "systemd", "auto", "no"), mutable=False, normalize=lambda v: _no_supervision(v))
# SIGINT / SIGTERM act as SHUTDOWN with these flags (server/main.py), as Redis's flags parameters.
_param("shutdown-on-sigint", "string", "default", multi=True, normalize=lambda v: _shutdown_flags(v))
_param("shutdown-on-sigterm", "string", "default", multi=True, normalize=lambda v: _shutdown_flags(v))
# Millrace logs user data (a failed command from the primary with its key): `yes` would not hide it.
_param("hide-user-data-from-log", "bool", False, normalize=lambda v: _no_hiding(v))
_param("unixsocketperm", "string", "0", mutable=False, normalize=lambda v: _octal_permissions(v))  # Redis's OCTAL_CONFIG


def _output_limits():
    from . import output_limits  # imports this module

    return output_limits


_param(
    "client-output-buffer-limit", "string", "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60", multi=True,
    normalize=lambda raw: _output_limits().validate(raw), merge=lambda current, raw: _output_limits().merge(current, raw),
)


# Redis parameters Millrace accepts for compatibility (a stock redis.conf loads,
# CONFIG GET/SET answer) but does not act on. One per line: name, flags
# (m: several words, i: immutable, b: memory value, u: Redis's type is unsigned,
# -: none), Redis's default, and for a number Redis's bounds `low..high` (its
# config.c table, checked against redis-server 8.2.3's error texts).
# Kinds follow the default: yes/no is a bool, a number an integer, else text.
_COMPAT = """
acl-pubsub-default - resetchannels
acllog-max-len - 128 0..LLONG_MAX
active-defrag-cycle-max - 25 1..99
active-defrag-cycle-min - 1 1..99
active-defrag-ignore-bytes bu 104857600 1..LLONG_MAX
active-defrag-max-scan-fields - 1000 1..LLONG_MAX
active-defrag-threshold-lower - 10 0..1000
active-defrag-threshold-upper - 100 0..1000
active-expire-effort - 1 1..10
activedefrag - no
always-show-logo i no
aof-disable-auto-gc - no
aof-load-truncated - yes
aof-rewrite-cpulist i ""
aof-rewrite-incremental-fsync - yes
aof-timestamp-enabled - no
aof-use-rdb-preamble - yes
aof_rewrite_cpulist i ""
auto-aof-rewrite-min-size b 67108864 0..LLONG_MAX
auto-aof-rewrite-percentage - 100 0..INT_MAX
bgsave-cpulist i ""
bgsave_cpulist i ""
bind-source-addr - ""
bio-cpulist i ""
bio_cpulist i ""
cluster-allow-pubsubshard-when-down - yes
cluster-allow-reads-when-down - no
cluster-allow-replica-migration - yes
cluster-announce-bus-port - 0 0..65535
cluster-announce-hostname - ""
cluster-announce-human-nodename - ""
cluster-announce-ip - ""
cluster-announce-port - 0 0..65535
cluster-announce-tls-port - 0 0..65535
cluster-compatibility-sample-ratio - 0 0..100
cluster-config-file i nodes.conf
cluster-link-sendbuf-limit bu 0 0..LLONG_MAX
cluster-migration-barrier - 1 0..INT_MAX
cluster-node-timeout - 15000 0..LLONG_MAX
cluster-port i 0 0..65535
cluster-preferred-endpoint-type - ip
cluster-replica-no-failover - no
cluster-replica-validity-factor - 10 0..INT_MAX
cluster-require-full-coverage - yes
cluster-slave-no-failover - no
cluster-slave-validity-factor - 10 0..INT_MAX
cluster-slot-stats-enabled - no
crash-log-enabled - yes
crash-memcheck-enabled - yes
disable-thp i yes
enable-module-command i no
hash-max-listpack-entries u 512 0..LLONG_MAX
hash-max-listpack-value bu 64 0..LLONG_MAX
hash-max-ziplist-entries u 512 0..LLONG_MAX
hash-max-ziplist-value bu 64 0..LLONG_MAX
hll-sparse-max-bytes bu 3000 0..LLONG_MAX
ignore-warnings m ""
jemalloc-bg-thread - yes
lazyfree-lazy-eviction - no
lazyfree-lazy-expire - no
lazyfree-lazy-server-del - no
lazyfree-lazy-user-del - no
list-compress-depth - 0 0..INT_MAX
list-max-listpack-size - -2 INT_MIN..INT_MAX
list-max-ziplist-size - -2 INT_MIN..INT_MAX
locale-collate - ""
max-new-connections-per-cycle u 10 1..1000
max-new-tls-connections-per-cycle u 1 1..1000
maxmemory-clients b 0
maxmemory-eviction-tenacity - 10 0..100
min-replicas-max-lag - 10 0..INT_MAX
min-replicas-to-write - 0 0..INT_MAX
min-slaves-max-lag - 10 0..INT_MAX
min-slaves-to-write - 0 0..INT_MAX
no-appendfsync-on-rewrite - no
oom-score-adj - no
oom-score-adj-values m 0 200 800
proc-title-template - {title} {listen-addr} {server-mode}
propagation-error-behavior - ignore
rdb-del-sync-files - no
rdb-save-incremental-fsync - yes
rdbchecksum i yes
rdbcompression - yes
repl-backlog-ttl - 3600 0..LLONG_MAX
repl-disable-tcp-nodelay - no
repl-diskless-load - disabled
repl-diskless-sync - yes
repl-diskless-sync-delay - 5 0..INT_MAX
repl-diskless-sync-max-replicas - 0 0..INT_MAX
repl-ping-replica-period - 10 1..INT_MAX
repl-ping-slave-period - 10 1..INT_MAX
repl-timeout - 60 1..INT_MAX
replica-announce-ip - ""
replica-announce-port - 0 0..65535
replica-full-sync-buffer-limit b 0 0..LLONG_MAX
replica-ignore-disk-write-errors - no
replica-ignore-maxmemory - yes
replica-lazy-flush - no
replica-priority - 100 0..INT_MAX
sanitize-dump-payload - no
server-cpulist i ""
server_cpulist i ""
set-max-intset-entries u 512 0..LLONG_MAX
set-max-listpack-entries u 128 0..LLONG_MAX
set-max-listpack-value u 64 0..LLONG_MAX
set-proc-title i yes
shutdown-on-sigint - default
shutdown-on-sigterm - default
shutdown-timeout - 10 0..INT_MAX
slave-announce-ip - ""
slave-announce-port - 0 0..65535
slave-ignore-maxmemory - yes
slave-lazy-flush - no
slave-priority - 100 0..INT_MAX
socket-mark-id iu 0 0..UINT_MAX
stop-writes-on-bgsave-error - yes
supervised i no
syslog-enabled i no
syslog-facility i local0
syslog-ident i redis
tls-auth-clients - yes
tls-ca-cert-dir - ""
tls-ca-cert-file - ""
tls-cert-file - ""
tls-ciphers - ""
tls-ciphersuites - ""
tls-client-cert-file - ""
tls-client-key-file - ""
tls-client-key-file-pass - ""
tls-cluster - no
tls-dh-params-file - ""
tls-key-file - ""
tls-key-file-pass - ""
tls-port i 0
tls-prefer-server-ciphers - no
tls-protocols - ""
tls-replication - no
tls-session-cache-size - 20480 0..INT_MAX
tls-session-cache-timeout - 300 0..INT_MAX
tls-session-caching - yes
tracking-table-max-keys u 1000000 0..LLONG_MAX
unixsocket i ""
zset-max-listpack-entries u 128 0..LLONG_MAX
zset-max-listpack-value bu 64 0..LLONG_MAX
zset-max-ziplist-entries u 128 0..LLONG_MAX
zset-max-ziplist-value bu 64 0..LLONG_MAX
"""


_LIMITS = {"INT_MIN": INT_MIN, "INT_MAX": INT_MAX, "UINT_MAX": UINT_MAX, "LLONG_MAX": LLONG_MAX}
_NUMBER = re.compile(r"(-?[0-9]+) (\S+)\.\.(\S+)")  # a default and Redis's bounds


def _bound(word: str) -> int:
    return _LIMITS[word] if word in _LIMITS else int(word)


def _compat_params() -> None:
    """Declare each _COMPAT line; a number without Redis's bounds is a mistake here, never "anything goes"."""
    for line in _COMPAT.strip().splitlines():
        name, flags, default = line.split(" ", 2)
        default = "" if default == '""' else default
        if name in PARAMS:
            continue  # a parameter Millrace implements is declared above
        multi, mutable = "m" in flags, "i" not in flags
        if number := _NUMBER.fullmatch(default):
            kind = "memory" if "b" in flags else "int"
            low, high = _bound(number[2]), _bound(number[3])
            _param(name, kind, int(number[1]), low=low, high=high, unsigned="u" in flags, mutable=mutable)
        elif default in ("yes", "no"):
            _param(name, "bool", default == "yes", mutable=mutable)
        elif default.lstrip("-").isdigit() and not multi:
            raise AssertionError(f"{name}: a number needs Redis's bounds in _COMPAT")
        else:
            _param(name, "string", default, mutable=mutable, multi=multi)


_compat_params()
PARAMS["aof-disable-auto-gc"].hidden = True
# Redis's other names of the same settings (config.c's alias): one value, set or read by either name.
for _name, _alias in (
    ("hash-max-listpack-entries", "hash-max-ziplist-entries"),
    ("hash-max-listpack-value", "hash-max-ziplist-value"),
    ("zset-max-listpack-entries", "zset-max-ziplist-entries"),
    ("zset-max-listpack-value", "zset-max-ziplist-value"),
    ("list-max-listpack-size", "list-max-ziplist-size"),
    ("min-replicas-max-lag", "min-slaves-max-lag"),
    ("min-replicas-to-write", "min-slaves-to-write"),
    ("repl-ping-replica-period", "repl-ping-slave-period"),
    ("replica-announce-ip", "slave-announce-ip"),
    ("replica-announce-port", "slave-announce-port"),
    ("replica-priority", "slave-priority"),
    ("replica-ignore-maxmemory", "slave-ignore-maxmemory"),
    ("replica-lazy-flush", "slave-lazy-flush"),
    ("cluster-replica-no-failover", "cluster-slave-no-failover"),
    ("cluster-replica-validity-factor", "cluster-slave-validity-factor"),
    ("server-cpulist", "server_cpulist"),
    ("bio-cpulist", "bio_cpulist"),
    ("aof-rewrite-cpulist", "aof_rewrite_cpulist"),
    ("bgsave-cpulist", "bgsave_cpulist"),
):
    PARAMS[_name].alias, PARAMS[_alias].alias = _alias, _name
    PARAMS[_alias].older = True
_param("syslog-facility", "enum", "local0", choices=("user", *(f"local{i}" for i in range(8))), mutable=False)  # (server/main.py)
# Strings Redis checks although Millrace does not use them.
PARAMS["proc-title-template"].normalize = lambda v: _proc_title_template(v)
PARAMS["locale-collate"].normalize = lambda v: _locale_collate(v)
PARAMS["cluster-announce-hostname"].normalize = lambda v: _announced_hostname(v)
PARAMS["cluster-announce-human-nodename"].normalize = lambda v: _announced_nodename(v)
# Redis 8's deprecated_configs: a config file or command line may name them (any one value), they
# set nothing there either; CONFIG GET does not list them and CONFIG SET does not know them.
DEPRECATED = frozenset(("list-max-ziplist-entries", "list-max-ziplist-value", "lua-replicate-commands", "io-threads-do-reads"))


def parse_value(param: Param, raw: str) -> object:
    """A raw string as the typed value of param; ConfigError with Redis's reason."""
    value = _parse_kind(param, raw)
    return value if param.normalize is None else param.normalize(value)


def _parse_kind(param: Param, raw: str) -> object:
    kind = param.kind
    if kind == "bool":
        if raw.lower() not in ("yes", "no"):
            raise ConfigError("argument must be 'yes' or 'no'")
        return raw.lower() == "yes"
    if kind == "enum":
        if raw.lower() not in param.choices:
            raise ConfigError(f"argument(s) must be one of the following: {', '.join(param.choices)}")
        return raw.lower()
    if kind in ("int", "memory"):
        if kind == "memory":
            value = parse_memory(raw)
            if value is None:
                raise ConfigError("argument must be a memory value")
        else:
            value = int(raw) if _STRING2LL.fullmatch(raw) else None
            if value is None or not -LLONG_MAX - 1 <= value <= LLONG_MAX:
                raise ConfigError("argument couldn't be parsed into an integer")
        if param.unsigned and not 0 <= value <= LLONG_MAX:  # as Redis's long long, negative
            raise ConfigError("argument must be greater or equal to 0")
        if not param.low <= value <= param.high:
            raise ConfigError(f"argument must be between {param.low} and {param.high} inclusive")
        return value
    if kind == "save":
        return _save_params(raw)
    return raw


def _save_params(raw: str) -> str:
    """Redis's setConfigSaveOption: words split on single spaces (MULTI_ARG_CONFIG), in pairs, each
    a whole strtoll number ("01", "+1", "-0" pass), seconds at least 1 and changes at least 0; stored
    as Redis prints them (`%jd %d`: changes are a C int)."""
    words = raw.split(" ") if raw else []
    if len(words) % 2:
        raise ConfigError("Invalid save parameters")
    numbers = []
    for index, word in enumerate(words):
        match = _STRTOLL.fullmatch(word)
        if match is None:
            raise ConfigError("Invalid save parameters")
        value = max(-LLONG_MAX - 1, min(LLONG_MAX, int(match[1]))) if match[1] else 0  # strtoll saturates
        if value < (0 if index % 2 else 1):
            raise ConfigError("Invalid save parameters")
        numbers.append(value if index % 2 == 0 else (value + 2**31) % 2**32 - 2**31)
    return " ".join(map(str, numbers))


def _no_tls(name: str, value: object, off: object) -> object:
    if value != off:
        raise ConfigError(f"TLS is not supported by Millrace: {name} cannot be enabled (put a TLS terminating proxy in front of the plain port)")
    return value


def _no_supervision(value: str) -> str:
    if value != "no":
        raise ConfigError("supervision is not supported by Millrace: supervised must be no (under systemd, a unit of Type=simple, or Type=forking with daemonize yes)")
    return value


def _memory_or_percent(value: str) -> str:
    """Redis's maxmemory-clients: a memory value (shown in bytes) or a percentage 0..100 (`0%` is 0);
    a memory value past LLONG_MAX is, as Redis's long long, a negative number: a percentage."""
    memory = parse_memory(value)
    if value.endswith("%") and value[:-1].isdigit() or memory is not None and memory > LLONG_MAX:
        percent = int(value[:-1]) if memory is None else ULLONG_MAX + 1 - memory
        if percent > 100:
            raise ConfigError("percentage argument must be less or equal to 100")
        return f"{percent}%" if percent else "0"
    if memory is None:
        raise ConfigError("argument must be a memory or percent value")
    return str(memory)


def propagation_error_panics(config, from_primary: bool, reply) -> bool:
    """propagation-error-behavior, as Redis's afterErrorReply: a read-only replica panics on a failed
    command from its primary under `panic` or `panic-on-replicas`, an AOF load under `panic` only.
    `reply`: the command's, an error or an EXEC's array holding one (Redis checks each error sent)."""
    if type(reply) is not Error and not (type(reply) is list and any(type(item) is Error for item in reply)):
        return False
    behavior = config["propagation-error-behavior"]
    if from_primary:
        return behavior != "ignore" and bool(config["replica-read-only"])
    return behavior == "panic"


def _no_cluster(value: bool) -> bool:
    if value:
        raise ConfigError("cluster mode is not supported by Millrace: cluster-enabled must be no (replicas follow a primary with replicaof)")
    return value


def _no_client_eviction(value: str) -> str:
    if value != "0":
        raise ConfigError("client eviction is not supported by Millrace: maxmemory-clients must be 0 (client-output-buffer-limit and client-query-buffer-limit bound each client)")
    return value


_HOSTNAME = re.compile(r"[a-zA-Z0-9.-]*")
_AUX_REFUSED = frozenset("!#$%&()*+:;<>?@[]^{|}~")


def _announced_hostname(value: str) -> str:
    """Redis's isValidAnnouncedHostname (cluster-announce-hostname)."""
    if len(value.encode("utf-8", "surrogateescape")) >= 256:
        raise ConfigError("Hostnames must be less than 256 characters")
    if not _HOSTNAME.fullmatch(value):
        raise ConfigError("Hostnames may only contain alphanumeric characters, hyphens or dots")
    return value


def _announced_nodename(value: str) -> str:
    """Redis's isValidAnnouncedNodename (cluster-announce-human-nodename): isValidAuxString."""
    if any(c in _AUX_REFUSED for c in value if not c.isalnum()):
        raise ConfigError("Announced human node name contained invalid character")
    return value


def _oom_score_adj_values(value: str) -> str:
    words = value.split()
    if len(words) != 3:
        raise ConfigError("wrong number of arguments")
    if not all(re.fullmatch(r"-?[0-9]+", w) and -2000 <= int(w) <= 2000 for w in words):
        raise ConfigError("Invalid oom-score-adj-values, elements must be between -2000 and 2000.")
    return " ".join(str(int(w)) for w in words)


SHUTDOWN_FLAGS = ("default", "save", "nosave", "now", "force")


def _shutdown_flags(value: str) -> str:
    """Redis's shutdown-on-sig* flags: words among SHUTDOWN_FLAGS, stored in Redis's order (`default` alone when none)."""
    words = value.lower().split()
    if not words or any(word not in SHUTDOWN_FLAGS for word in words):
        raise ConfigError(f"argument(s) must be one of the following: {', '.join(SHUTDOWN_FLAGS)}")
    if "save" in words and "nosave" in words:
        raise ConfigError("shutdown options SAVE and NOSAVE can't be used simultaneously")
    return " ".join(flag for flag in SHUTDOWN_FLAGS[1:] if flag in words) or "default"


def _no_hiding(value: bool) -> bool:
    if value:
        raise ConfigError(
            "hiding user data from the log is not supported by Millrace: hide-user-data-from-log must be no (a failed command from the primary is logged with its key)"
        )
    return value


_OCTAL = re.compile(r"[ \t\n\v\f\r]*[+-]?[0-7]*")  # strtoll(value, &end, 8) reaching the end


def _octal_permissions(value: str) -> str:
    """unixsocketperm: Redis's octal 0..0777, shown in octal."""
    digits = value.strip(" \t\n\v\f\r")
    if not _OCTAL.fullmatch(value) or (value and not digits.lstrip("+-")):  # no digits: only "" reaches the end
        raise ConfigError("argument couldn't be parsed as an octal number")
    number = int(digits, 8) if digits.lstrip("+-") else 0
    if number < 0:
        raise ConfigError("argument must be greater or equal to 0")
    if number > 0o777:
        raise ConfigError("argument must be between 0 and 777 inclusive")
    return format(number, "o")


# proc-title-template's variables: those that expand to nothing here make a template of them alone empty.
_TITLE_VARIABLES = {
    "title": "",
    "server-mode": "",
    "unixsocket": "",
    "listen-addr": "*",
    "port": "*",
    "tls-port": "*",
    "config-file": "*",
}


def _proc_title_template(value: str) -> str:
    """Redis's validateProcTitleTemplate: `{name}` of a known variable, `{{` a brace, and not blank once expanded."""
    if not expand_title(value, _TITLE_VARIABLES):
        raise ConfigError("template format is invalid or contains unknown variables")
    return value


def _locale_collate(value: str) -> str:
    """Redis applies it (setlocale LC_COLLATE) and refuses a locale the system lacks; Millrace
    compares no strings by locale, so the name is only tried, and the previous one put back."""
    previous = locale.setlocale(locale.LC_COLLATE)
    try:
        locale.setlocale(locale.LC_COLLATE, value)
    except locale.Error:
        raise ConfigError("Invalid locale name") from None
    finally:
        locale.setlocale(locale.LC_COLLATE, previous)
    return value


def _no_unixsocket(value: str) -> str:
    """No Unix-socket listener: a path given would be a socket nobody creates (accepted and ignored, as
    tls-port was). Refused, as Millrace refuses TLS; the empty default stays."""
    if value:
        raise ConfigError("Unix sockets are not supported by Millrace: unixsocket cannot be set (clients connect over TCP: port and bind)")
    return value


def _base_name(value: str, name: str, what: str) -> str:
    """Redis's pathIsBaseName: a file name in `dir`, never a path that leaves it."""
    if "/" in value or "\\" in value:
        raise ConfigError(f"{name} can't be a path, just a {what}")
    return value


def _replicaof(value: str) -> str:
    """`replicaof <host> <port>` (or nothing); Redis checks the port's range."""
    if not value:
        return value
    words = value.split()
    if len(words) != 2 or not words[1].isdigit() or not 0 < int(words[1]) <= 65535:
        raise ConfigError("Invalid master port")
    return f"{words[0]} {int(words[1])}"


class Config:
    """The live values, keyed by parameter name."""

    def __init__(self, overrides: dict[str, str] | None = None, config_file: str | None = None) -> None:
        self.values: dict[str, object] = {name: p.default for name, p in PARAMS.items()}
        self.stream_node_limits = (
            self.values["stream-node-max-entries"],
            self.values["stream-node-max-bytes"],
        )  # for XADD, kept by _store
        self.listeners: list[Callable[[str, object], None]] = []
        self.config_file = config_file  # absolute path given at startup, for CONFIG REWRITE
        self.default_user = None  # a DefaultUser from the file's `user default ...` line (server/default_user.py)
        for name, value in (overrides or {}).items():
            self.set(name, value, startup=True)

    def __getitem__(self, name: str):
        return self.values[name]

    def get(self, pattern: str) -> dict[str, str]:
        """CONFIG GET: every parameter whose name matches the glob."""
        name = pattern.lower()  # the exact lookup ignores case; the glob keeps the pattern as given,
        if name in PARAMS:  # where NOCASE still compares an escaped byte in a set exactly (`[\\M]` is not `m`)
            return {name: self.format(name)}
        if not is_glob(pattern):  # Redis: no glob character, an exact name or nothing
            return {}
        match = compile_pattern(pattern.encode("utf-8", "surrogateescape"), nocase=True)  # Redis's stringmatch, nocase
        return {name: self.format(name) for name, param in PARAMS.items() if not param.hidden and match(name.encode())}

    def format(self, name: str) -> str:
        value, param = self.values[name], PARAMS[name]
        if param.kind == "bool":
            return "yes" if value else "no"
        return str(value)

    def startup_set(self, name: str, raw: str) -> None:
        """Apply a directive from the file or command line; ConfigError with the bare reason."""
        param = PARAMS.get(name.lower())
        if param is None:
            raise ConfigError("Bad directive or wrong number of arguments")
        self._store(param, parse_value(param, raw))

    def set(self, name: str, raw: str, startup: bool = False) -> None:
        """Validate and apply one value; raise ReplyError with Redis's CONFIG SET wording."""
        self.set_many([(name, raw)], startup)

    def set_many(self, pairs: list[tuple[str, str]], startup: bool = False, local: bool = True) -> None:
        """CONFIG SET name value [name value ...]: all valid or nothing changes. `local`: the client
        is on the loopback interface, which `enable-protected-configs local` asks."""
        parsed: list[tuple[Param, object]] = []
        seen: set[str] = set()
        for name, raw in pairs:
            param = PARAMS.get(name.lower())
            if param is None:
                raise ReplyError(f"ERR Unknown option or number of arguments for CONFIG SET - '{name}'")
            if param.name in seen:  # Redis 8 takes a name and its alias together, the last one winning
                raise _invalid(name, "duplicate parameter")
            seen.add(param.name)
            if not param.mutable and not startup:
                raise _invalid(name, "can't set immutable config")
            allowed = self.values["enable-protected-configs"]
            if param.protected and not startup and (allowed == "no" or (allowed == "local" and not local)):
                raise _invalid(name, "can't set protected config")
            try:
                if param.name == "dir" and not startup and not os.path.isdir(raw):
                    raise ConfigError("No such file or directory")
                value = parse_value(param, raw)
                parsed.append((param, value))
            except ConfigError as exc:
                raise _invalid(name, str(exc)) from None
        # As Redis: every value is set first, then each is applied (the listeners), seeing all the new ones
        # (CONFIG SET port P bind A listens on A:P, never on the old addresses at P)
        previous: list[tuple[Param, object]] = []
        stored: list[tuple[Param, object]] = []
        for param, value in parsed:
            previous.append((param, self.values[param.name]))
            stored.append((param, self._put_merged(param, value)))
        for applied, (param, value) in enumerate(stored, 1):
            try:
                self._notify(param, value)
            except ConfigError as exc:  # a listener could not apply it (Redis's apply functions): undo them all
                for undone, old in reversed(previous):
                    self._put(undone, old)
                for undone, old in reversed(previous[:applied]):
                    self._notify(undone, old, quiet=True)
                raise _invalid(param.name, str(exc)) from None

    def _store(self, param: Param, value: object) -> None:
        self._notify(param, self._put_merged(param, value))

    def _put_merged(self, param: Param, value: object) -> object:
        """Store value (merged first where it sets part of the parameter: client-output-buffer-limit); the value stored."""
        if param.merge is not None:
            value = param.merge(self.values[param.name], value)
        self._put(param, value)
        return value

    def _put(self, param: Param, value: object) -> None:
        self.values[param.name] = value
        if param.alias:
            self.values[param.alias] = value
        if param.name.startswith("stream-node-max-"):
            self.stream_node_limits = (self.values["stream-node-max-entries"], self.values["stream-node-max-bytes"])

    def _notify(self, param: Param, value: object, quiet: bool = False) -> None:
        """Tell the listeners; one may refuse with ConfigError (an undo, `quiet`, goes on regardless)."""
        for listener in self.listeners:
            try:
                listener(param.name, value)
            except ConfigError:
                if not quiet:
                    raise

    def changed(self) -> dict[str, str]:
        """Parameters whose value differs from the default, as CONFIG REWRITE writes them."""
        return {name: self.format(name) for name, p in PARAMS.items() if self.values[name] != p.default and not p.older}


def _invalid(name: str, why: str) -> ReplyError:
    return ReplyError(f"ERR CONFIG SET failed (possibly related to argument '{name}') - {why}")
