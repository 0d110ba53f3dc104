"""Configuration parameters under Redis's names, with Redis's validation.

Each parameter is declared once (name, kind, default, bounds, mutability).
The same table serves the command line (`--port 7000`), the config file
(`port 7000`), CONFIG GET/SET/REWRITE and INFO.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable
from dataclasses import dataclass

from protocol.errors import ReplyError

_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1024, "m": 1000**2, "mb": 1024**2, "g": 1000**3, "gb": 1024**3}
INT_MAX = 2**31 - 1
UINT_MAX = 2**32 - 1
LONG_MAX = LLONG_MAX = 2**63 - 1
ULLONG_MAX = 2**64 - 1


class ConfigError(ValueError):
    """A rejected value; str(self) is Redis's reason ("argument must be 'yes' or 'no'")."""


@dataclass(slots=True)
class Param:
    name: str
    kind: str  # int, memory, bool, enum, string, save
    default: object
    low: int = 0
    high: int = LLONG_MAX
    choices: tuple[str, ...] = ()
    mutable: bool = True
    alias: str | None = None  # the other name of the same setting (slave-read-only...)
    multi: bool = False  # takes several words on the command line / in the file (save, bind)
    protected: bool = False  # CONFIG SET refuses it unless enable-protected-configs allows
    listener: bool = False  # mutable in Redis (it rebinds); here validated, then refused unless unchanged


PARAMS: dict[str, Param] = {}


def _param(name: str, kind: str, default: object, **kw) -> None:
    PARAMS[name] = Param(name, kind, default, **kw)


_param("port", "int", 6379, high=65535, listener=True)
_param("bind", "string", "127.0.0.1 -::1", multi=True, listener=True)
_param("dir", "string", "./data", protected=True)
_param("dbfilename", "string", "dump.mpk", protected=True)
_param("enable-protected-configs", "enum", "no", choices=("no", "yes", "local"), mutable=False)
_param("appendfilename", "string", "appendonly.aof", mutable=False)
_param("appenddirname", "string", "appendonlydir", mutable=False)
_param("databases", "int", 16, low=1, high=INT_MAX, mutable=False)
_param("maxclients", "int", 10000, low=1, high=UINT_MAX)
_param("maxmemory", "memory", 0, high=ULLONG_MAX)
_param(
    "maxmemory-policy",
    "enum",
    "noeviction",
    choices=("volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl", "allkeys-lru", "allkeys-lfu", "allkeys-random", "noeviction"),
)
_param("maxmemory-samples", "int", 5, low=1, high=64)
_param("timeout", "int", 0, high=INT_MAX)
_param("tcp-backlog", "int", 511, high=INT_MAX, mutable=False)
_param("tcp-keepalive", "int", 300, high=INT_MAX)
_param("requirepass", "string", "")
_param("loglevel", "enum", "notice", choices=("debug", "verbose", "notice", "warning", "nothing"))
_param("logfile", "string", "", mutable=False)
_param("pidfile", "string", "", mutable=False)
_param("save", "save", "3600 1 300 100 60 10000", multi=True)
_param("appendonly", "bool", False)
_param("appendfsync", "enum", "everysec", choices=("everysec", "always", "no"))
_param("stream-node-max-entries", "int", 100, high=LLONG_MAX)
_param("stream-node-max-bytes", "memory", 4096, high=LONG_MAX)
_param("proto-max-bulk-len", "memory", 512 * 1024 * 1024, low=1024 * 1024, high=LONG_MAX)
_param("client-query-buffer-limit", "memory", 1024 * 1024 * 1024, low=1024 * 1024, high=LONG_MAX)
_param("hz", "int", 10, high=INT_MAX)
_param("daemonize", "bool", False, mutable=False)
_param("protected-mode", "bool", True)
_param("enable-debug-command", "enum", "no", choices=("no", "yes", "local"), mutable=False)
_param("io-threads", "int", 1, low=1, high=128, mutable=False)
_param("cluster-enabled", "bool", False, mutable=False)
_param("busy-reply-threshold", "int", 5000, high=LONG_MAX, alias="lua-time-limit")
_param("lua-time-limit", "int", 5000, high=LONG_MAX, alias="busy-reply-threshold")
_param("replica-read-only", "bool", True, alias="slave-read-only")
_param("slave-read-only", "bool", True, alias="replica-read-only")
_param("replica-serve-stale-data", "bool", True, alias="slave-serve-stale-data")
_param("slave-serve-stale-data", "bool", True, alias="replica-serve-stale-data")
_param("repl-backlog-size", "memory", 1024 * 1024, low=1, high=LLONG_MAX)
_param("slowlog-log-slower-than", "int", 10000, low=-1, high=LLONG_MAX)
_param("slowlog-max-len", "int", 128, high=LONG_MAX)
_param("latency-monitor-threshold", "int", 0, high=LLONG_MAX)
_param("latency-tracking", "bool", True)
_param("notify-keyspace-events", "string", "")
_param("lazyfree-lazy-user-flush", "bool", False)
_param("activerehashing", "bool", True)
_param("dynamic-hz", "bool", True)


def parse_memory(text: str) -> int | None:
    """'1gb' -> 1073741824, as Redis's memtoull; None when malformed."""
    text = text.strip().lower()
    digits = text.rstrip("kmgb")
    unit = text[len(digits):]
    if unit not in _UNITS or not digits.isdigit():
        return None
    return int(digits) * _UNITS[unit]


def parse_value(param: Param, raw: str) -> object:
    """A raw string as the typed value of param; ConfigError with Redis's reason."""
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
            try:
                value = int(raw)
            except ValueError:
                raise ConfigError("argument couldn't be parsed into an integer") from None
        if not param.low <= value <= param.high:
            raise ConfigError(f"argument must be between {param.low} and {param.high} inclusive")
        if param.name == "hz":  # Redis stores it clamped to CONFIG_MIN_HZ..CONFIG_MAX_HZ
            value = min(max(value, 1), 500)
        return value
    if kind == "save":
        words = raw.split()
        if len(words) % 2 or not all(w.isdigit() for w in words):
            raise ConfigError("Invalid save parameters")
        return " ".join(words)
    return raw


class Config:
    """The live values, keyed by parameter name."""

    def __init__(self, overrides: dict[str, str] | None = None, config_file: str | None = None) -> None:
        self.values: dict[str, object] = {name: p.default for name, p in PARAMS.items()}
        self.listeners: list[Callable[[str, object], None]] = []
        self.config_file = config_file  # absolute path given at startup, for CONFIG REWRITE
        for name, value in (overrides or {}).items():
            self.set(name, value, startup=True)

    def __getitem__(self, name: str):
        return self.values[name]

    def get(self, pattern: str) -> dict[str, str]:
        """CONFIG GET: every parameter whose name matches the glob."""
        pattern = pattern.lower()
        if pattern in PARAMS:
            return {pattern: self.format(pattern)}
        return {name: self.format(name) for name in PARAMS if fnmatch.fnmatchcase(name, pattern)}

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

    def set_many(self, pairs: list[tuple[str, str]], startup: bool = False) -> None:
        """CONFIG SET name value [name value ...]: all valid or nothing changes."""
        parsed: list[tuple[Param, object]] = []
        seen: set[str] = set()
        for name, raw in pairs:
            param = PARAMS.get(name.lower())
            if param is None:
                raise ReplyError(f"ERR Unknown option or number of arguments for CONFIG SET - '{name}'")
            if param.name in seen or (param.alias and param.alias in seen):
                raise _invalid(name, "duplicate parameter")
            seen.add(param.name)
            if not param.mutable and not startup:
                raise _invalid(name, "can't set immutable config")
            if param.protected and not startup and self.values["enable-protected-configs"] == "no":
                raise _invalid(name, "can't set protected config")
            try:
                if param.name == "dir" and not startup and not os.path.isdir(raw):
                    raise ConfigError("No such file or directory")
                value = parse_value(param, raw)
                if param.listener and not startup and value != self.values[param.name]:
                    raise ConfigError("can't set immutable config")
                parsed.append((param, value))
            except ConfigError as exc:
                raise _invalid(name, str(exc)) from None
        for param, value in parsed:
            self._store(param, value)

    def _store(self, param: Param, value: object) -> None:
        self.values[param.name] = value
        if param.alias:
            self.values[param.alias] = value
        for listener in self.listeners:
            listener(param.name, value)

    def changed(self) -> dict[str, str]:
        """Parameters whose value differs from the default, as CONFIG REWRITE writes them."""
        return {name: self.format(name) for name, p in PARAMS.items() if self.values[name] != p.default}


def _invalid(name: str, why: str) -> ReplyError:
    return ReplyError(f"ERR CONFIG SET failed (possibly related to argument '{name}') - {why}")
