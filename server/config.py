"""Configuration parameters under Redis's names, with Redis's validation.

Each parameter is declared once (name, kind, default, bounds, mutability).
The same table serves the command line (`--port 7000`), the config file
(`port 7000`), CONFIG GET/SET/REWRITE and INFO.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from dataclasses import dataclass

from protocol.errors import ReplyError

_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1024, "m": 1000**2, "mb": 1024**2, "g": 1000**3, "gb": 1024**3}
INT_MAX = 2**31 - 1
LLONG_MAX = 2**63 - 1


@dataclass(slots=True)
class Param:
    name: str
    kind: str  # int, memory, bool, enum, string, save
    default: object
    low: int = 0
    high: int = LLONG_MAX
    choices: tuple[str, ...] = ()
    mutable: bool = True
    alias: str | None = None


PARAMS: dict[str, Param] = {}


def _param(name: str, kind: str, default: object, **kw) -> None:
    PARAMS[name] = Param(name, kind, default, **kw)


_param("port", "int", 6379, high=65535)
_param("bind", "string", "127.0.0.1 -::1")
_param("dir", "string", "./data")
_param("dbfilename", "string", "dump.mpk")
_param("appendfilename", "string", "appendonly.aof", mutable=False)
_param("appenddirname", "string", "appendonlydir", mutable=False)
_param("databases", "int", 16, low=1, high=INT_MAX, mutable=False)
_param("maxclients", "int", 10000, low=1, high=INT_MAX)
_param("maxmemory", "memory", 0)
_param("maxmemory-policy", "enum", "noeviction", choices=("noeviction",))
_param("timeout", "int", 0, high=INT_MAX)
_param("tcp-backlog", "int", 511, high=INT_MAX, mutable=False)
_param("tcp-keepalive", "int", 300, high=INT_MAX)
_param("requirepass", "string", "")
_param("loglevel", "enum", "notice", choices=("debug", "verbose", "notice", "warning", "nothing"))
_param("logfile", "string", "", mutable=False)
_param("save", "save", "3600 1 300 100 60 10000")
_param("appendonly", "bool", False)
_param("appendfsync", "enum", "everysec", choices=("always", "everysec", "no"))
_param("stream-node-max-entries", "int", 100, high=LLONG_MAX)
_param("stream-node-max-bytes", "memory", 4096)
_param("proto-max-bulk-len", "memory", 512 * 1024 * 1024, low=1024 * 1024)
_param("client-query-buffer-limit", "memory", 1024 * 1024 * 1024, low=1024 * 1024)
_param("hz", "int", 10, low=1, high=500)
_param("daemonize", "bool", False, mutable=False)
_param("protected-mode", "bool", True)
_param("lua-time-limit", "int", 5000, alias="busy-reply-threshold")
_param("busy-reply-threshold", "int", 5000)
_param("replica-read-only", "bool", True, alias="slave-read-only")
_param("slave-read-only", "bool", True)
_param("latency-tracking", "bool", True)
_param("notify-keyspace-events", "string", "")


def parse_memory(text: str) -> int | None:
    """'1gb' -> 1073741824, as Redis's memtoull; None when malformed."""
    text = text.strip().lower()
    digits = text.rstrip("kmgb")
    unit = text[len(digits):]
    if unit not in _UNITS or not digits.lstrip("-").isdigit():
        return None
    return int(digits) * _UNITS[unit]


class Config:
    """The live values, keyed by parameter name."""

    def __init__(self, overrides: dict[str, str] | None = None) -> None:
        self.values: dict[str, object] = {name: p.default for name, p in PARAMS.items()}
        self.listeners: list[Callable[[str, object], None]] = []
        for name, value in (overrides or {}).items():
            self.set(name, value, startup=True)

    def __getitem__(self, name: str):
        return self.values[name]

    def get(self, pattern: str) -> dict[str, str]:
        """CONFIG GET: every parameter whose name matches the glob."""
        pattern = pattern.lower()
        return {
            name: self.format(name)
            for name in PARAMS
            if fnmatch.fnmatchcase(name, pattern)
        }

    def format(self, name: str) -> str:
        value, param = self.values[name], PARAMS[name]
        if param.kind == "bool":
            return "yes" if value else "no"
        return str(value)

    def set(self, name: str, raw: str, startup: bool = False) -> None:
        """Validate and apply one value; raise ReplyError with Redis's wording."""
        param = PARAMS.get(name.lower())
        if param is None:
            raise ReplyError(f"ERR Unknown option or number of arguments for CONFIG SET - '{name}'")
        name = param.name
        if not param.mutable and not startup:
            raise _invalid(name, "can't set immutable config")
        value = self.parse(param, raw)
        self.values[name] = value
        if param.alias:
            self.values[param.alias] = value
        for other in PARAMS.values():
            if other.alias == name:
                self.values[other.name] = value
        for listener in self.listeners:
            listener(name, value)

    @staticmethod
    def parse(param: Param, raw: str) -> object:
        kind = param.kind
        if kind == "bool":
            if raw.lower() not in ("yes", "no"):
                raise _invalid(param.name, "argument must be 'yes' or 'no'")
            return raw.lower() == "yes"
        if kind == "enum":
            if raw.lower() not in param.choices:
                raise _invalid(param.name, f"argument(s) must be one of the following: {', '.join(param.choices)}")
            return raw.lower()
        if kind in ("int", "memory"):
            if kind == "memory":
                value = parse_memory(raw)
                if value is None:
                    raise _invalid(param.name, "argument must be a memory value")
            else:
                try:
                    value = int(raw)
                except ValueError:
                    raise _invalid(param.name, "argument couldn't be parsed into an integer") from None
            if not param.low <= value <= param.high:
                raise _invalid(param.name, f"argument must be between {param.low} and {param.high} inclusive")
            return value
        return raw


def _invalid(name: str, why: str) -> ReplyError:
    return ReplyError(f"ERR CONFIG SET failed (possibly related to argument '{name}') - {why}")
