"""COMMAND DOCS and COMMAND INFO of every command Millrace shares with Redis 8.2.3, compared with the oracle.

Both servers are asked for the same names (COMMAND LIST of each, subcommands included) over a raw
socket, in RESP2 and RESP3, and the replies are parsed keeping RESP types (a status is not a bulk
string, a set is not an array), so field order and wire types are compared too. Where Millrace
deliberately differs the exception is listed once below, with its reason, as narrowly as possible:
an argument or a history entry of a command, never the whole command.
"""

from __future__ import annotations

import socket

import pytest

from tests.rawclient import encode_command
from tests.servers import millrace_and_redis

# Commands Millrace has and Redis 8.2.3 does not: compared with nothing (their docs are checked by their own tests).
MILLRACE_ONLY: dict[str, str] = {
    "xnack": "Redis 8.8 (XNACK)",
    "xcfgset": "Redis 8.6 (IDMP configuration)",
    "xidmprecord": "Redis 8.6 IDMP's effect form, for AOF and replicas",
    "xbacklog": "Millrace's exact lag and backlog",
    "xgrouplag": "Millrace's exact lag and backlog",
    "xcount": "Millrace's XCOUNT",
    "xretention": "Millrace's consumption-based retention",
    "xretention|get": "Millrace's consumption-based retention",
    "xretention|set": "Millrace's consumption-based retention",
    "xretention|setstate": "Millrace's consumption-based retention",
    "xretention|off": "Millrace's consumption-based retention",
    "xretention|help": "Millrace's consumption-based retention",
    "xgroup|join": "Millrace's key-ordered delivery",
    "xgroup|leave": "Millrace's key-ordered delivery",
    "xgroup|defer": "Millrace's key-ordered delivery",
    "xgroup|undefer": "Millrace's key-ordered delivery",
    "xgroup|release": "Millrace's key-ordered delivery",
    "xgroup|setconfig": "Millrace's key-ordered delivery",
    "xinfo|keyshared": "Millrace's key-ordered delivery",
}

# Top-level arguments of shared commands that only Millrace documents: (command, argument name) -> why.
EXTRA_ARGUMENTS: dict[tuple[str, str], str] = {
    ("xadd", "idmp"): "IDMPAUTO / IDMP, Redis 8.6",
    ("xread", "maxcount"): "MAXCOUNT, Redis 8.10",
    ("xread", "maxsize"): "MAXSIZE, Redis 8.10",
    ("xreadgroup", "maxcount"): "MAXCOUNT, Redis 8.10",
    ("xreadgroup", "maxsize"): "MAXSIZE, Redis 8.10",
    ("xreadgroup", "min-idle-time"): "CLAIM, Redis 8.4",
    ("xgroup|create", "keyshared"): "KEYSHARED field, Millrace's key-ordered delivery",
}

# History entries only Millrace lists: (command, version) -> why.
EXTRA_HISTORY: dict[tuple[str, str], str] = {
    ("xadd", "8.6.0"): "IDMPAUTO / IDMP, Redis 8.6",
    ("xread", "8.10.0"): "MAXCOUNT and MAXSIZE, Redis 8.10",
    ("xreadgroup", "8.4.0"): "CLAIM, Redis 8.4",
    ("xreadgroup", "8.10.0"): "MAXCOUNT and MAXSIZE, Redis 8.10",
}


# --- RESP with its types kept -------------------------------------------------------------------


class Reader:
    """A blocking RESP2/RESP3 reader that tags every value with its type byte."""

    def __init__(self, sock: socket.socket) -> None:
        self.file = sock.makefile("rb")

    def line(self) -> bytes:
        return self.file.readline()[:-2]

    def read(self):
        head = self.line()
        kind, rest = head[:1], head[1:]
        if kind in (b"+", b"-"):
            return (kind, rest)
        if kind in (b":", b","):
            return (kind, rest)
        if kind == b"_":
            return (kind, None)
        if kind in (b"$", b"="):
            size = int(rest)
            if size < 0:
                return (b"_", None)
            data = self.file.read(size + 2)[:-2]
            return (kind, data)
        if kind in (b"*", b"~", b">"):
            size = int(rest)
            if size < 0:
                return (b"_", None)
            return (kind, [self.read() for _ in range(size)])
        if kind == b"%":
            return (kind, [(self.read(), self.read()) for _ in range(int(rest))])
        raise AssertionError(f"unexpected RESP type {head!r}")


class Raw:
    """One raw connection in one protocol."""

    def __init__(self, port: int, protocol: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.reader = Reader(self.sock)
        if protocol == 3:
            self.call("HELLO", "3")

    def call(self, *args):
        self.sock.sendall(encode_command(*args))
        return self.reader.read()

    def close(self) -> None:
        self.sock.close()


def pairs(value) -> list[tuple]:
    """A map's (key, value) pairs: RESP3 maps, or RESP2's flat key, value arrays."""
    kind, items = value
    if kind == b"%":
        return items
    assert kind == b"*", value
    return list(zip(items[0::2], items[1::2], strict=True))


def text(value) -> str:
    return value[1].decode()


# --- what is compared -----------------------------------------------------------------------------


def flat_docs(reply) -> dict[str, list[tuple]]:
    """COMMAND DOCS reply -> {name: [(field, value), ...]} for commands and subcommands alike."""
    out = {}
    for name, docs in pairs(reply):
        fields = pairs(docs)
        out[text(name)] = [(text(k), v) for k, v in fields if text(k) != "subcommands"]
        for k, v in fields:
            if text(k) == "subcommands":
                out.update(flat_docs(v))
    return out


def flat_info(reply) -> dict[str, list]:
    """COMMAND INFO reply -> {name: [the nine fields before subcommands]} for commands and subcommands."""
    out = {}
    for entry in reply[1]:
        if entry[0] == b"_":
            continue
        fields = entry[1]
        out[text(fields[0])] = fields[:9]
        out.update(flat_info(fields[9]))
    return out


def differences(path: str, ours, theirs) -> list[str]:
    """Where two typed replies differ, as readable lines (first difference of each branch)."""
    if ours == theirs:
        return []
    if ours[0] == theirs[0] and ours[0] in (b"*", b"~") and len(ours[1]) == len(theirs[1]):
        out = []
        for index, (a, b) in enumerate(zip(ours[1], theirs[1], strict=True)):
            out += differences(f"{path}[{index}]", a, b)
        return out
    if ours[0] == theirs[0] == b"%" and [k for k, _ in ours[1]] == [k for k, _ in theirs[1]]:
        out = []
        for (key, a), (_, b) in zip(ours[1], theirs[1], strict=True):
            out += differences(f"{path}.{text(key)}", a, b)
        return out
    return [f"{path}: millrace {ours!r} != redis {theirs!r}"]


def argument_name(argument) -> str:
    return next(text(v) for k, v in pairs(argument) if text(k) == "name")


def without_exceptions(name: str, fields: list[tuple]) -> tuple[list[tuple], set]:
    """Millrace's docs of `name` with its listed extra arguments and history entries left out, and what was left out."""
    removed = set()
    out = []
    for field, value in fields:
        kind, items = value
        if field == "arguments":
            kept = [a for a in items if (name, argument_name(a)) not in EXTRA_ARGUMENTS]
            removed |= {(name, argument_name(a)) for a in items if (name, argument_name(a)) in EXTRA_ARGUMENTS}
            value = (kind, kept)
        elif field == "history":
            kept = [h for h in items if (name, text(h[1][0])) not in EXTRA_HISTORY]
            removed |= {(name, text(h[1][0])) for h in items if (name, text(h[1][0])) in EXTRA_HISTORY}
            value = (kind, kept)
        if value[1] or field not in ("arguments", "history"):  # Redis leaves empty lists out
            out.append((field, value))
    return out, removed


def compare_fields(name: str, ours: list[tuple], theirs: list[tuple]) -> list[str]:
    if [f for f, _ in ours] != [f for f, _ in theirs]:
        return [f"{name}: fields {[f for f, _ in ours]} != redis {[f for f, _ in theirs]}"]
    out = []
    for (field, a), (_, b) in zip(ours, theirs, strict=True):
        out += differences(f"{name}.{field}", a, b)
    return out


# --- the servers ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pair():
    yield from millrace_and_redis()


def command_list(proc) -> set[str]:
    conn = Raw(proc.port, 2)
    try:
        return {text(v) for v in conn.call("COMMAND", "LIST")[1]}
    finally:
        conn.close()


@pytest.fixture(scope="module")
def shared(pair) -> list[str]:
    ours, theirs = (command_list(proc) for proc in pair)
    assert ours - theirs == set(MILLRACE_ONLY), "MILLRACE_ONLY must list exactly the commands Redis 8.2.3 lacks"
    return sorted(ours & theirs)


def ask(proc, protocol: int, *args):
    conn = Raw(proc.port, protocol)
    try:
        return conn.call(*args)
    finally:
        conn.close()


@pytest.mark.parametrize("protocol", [2, 3])
def test_command_docs_match_redis(pair, shared, protocol):
    """Every field of every shared command's docs (arguments recursively), in Redis's order and RESP types."""
    ours, theirs = (flat_docs(ask(proc, protocol, "COMMAND", "DOCS", *shared)) for proc in pair)
    assert set(shared) <= set(ours) & set(theirs)  # a container's reply names its other subcommands too
    found = set()
    problems = []
    for name in shared:
        fields, removed = without_exceptions(name, ours[name])
        found |= removed
        problems += compare_fields(name, fields, theirs[name])
    assert not problems, f"{len(problems)} differences:\n" + "\n".join(problems)
    assert found == set(EXTRA_ARGUMENTS) | set(EXTRA_HISTORY), "every listed exception must still be needed"


@pytest.mark.parametrize("protocol", [2, 3])
def test_command_info_matches_redis(pair, shared, protocol):
    """Arity, flags, first/last key, step, ACL categories, tips and key specs of every shared command."""
    ours, theirs = (flat_info(ask(proc, protocol, "COMMAND", "INFO", *shared)) for proc in pair)
    assert set(shared) <= set(ours) & set(theirs)  # a container's reply names its other subcommands too
    labels = ("name", "arity", "flags", "first", "last", "step", "acl", "tips", "key_specs")
    problems = []
    for name in shared:
        for label, a, b in zip(labels, ours[name], theirs[name], strict=True):
            problems += differences(f"{name}.{label}", a, b)
    assert not problems, f"{len(problems)} differences:\n" + "\n".join(problems)


def test_exceptions_are_absent_from_redis(pair):
    """A listed extra argument or history entry must really be missing from Redis 8.2.3's docs."""
    commands = sorted({name for name, _ in EXTRA_ARGUMENTS} | {name for name, _ in EXTRA_HISTORY})
    theirs = flat_docs(ask(pair[1], 3, "COMMAND", "DOCS", *commands))
    for name in commands:
        fields = dict(theirs[name])
        arguments = {argument_name(a) for a in fields.get("arguments", (b"*", []))[1]}
        versions = {text(h[1][0]) for h in fields.get("history", (b"*", []))[1]}
        assert not {arg for cmd, arg in EXTRA_ARGUMENTS if cmd == name} & arguments
        assert not {v for cmd, v in EXTRA_HISTORY if cmd == name} & versions


# Tokens a handler's syntax line has that its declared tree leaves out, as Redis's docs do: (command, token) -> why.
UNDOCUMENTED_TOKENS: dict[tuple[str, str], str] = {
    ("psync", "FAILOVER"): "sent only by a primary handing over; Redis's PSYNC docs have no FAILOVER",
}


def tokens_of(arguments) -> set[str]:
    return {a.token for a in arguments if a.token} | {t for a in arguments for t in tokens_of(a.arguments)}


def test_declared_trees_keep_up_with_syntax_lines():
    """A declared tree replaces the handler's syntax line in COMMAND DOCS: an option added to the line must be declared too."""
    import server.commands  # noqa: F401  (registers every command and its docs)
    from server.commands.introspection import lookup
    from server.syntax import _TOKENS, DECLARED, _is_token, syntax_line

    drift = []
    for name, tree in sorted(DECLARED.items()):
        cmd = lookup(name.encode())
        line = syntax_line(cmd.handler, name) if cmd is not None else None
        if line is None:
            continue
        words = {w for w in _TOKENS.findall(line) if _is_token(w) and w not in "[]<>|¦..."}
        words -= {token for cmd_name, token in UNDOCUMENTED_TOKENS if cmd_name == name}
        if words != tokens_of(tree):
            drift.append(f"{name}: line only {sorted(words - tokens_of(tree))}, tree only {sorted(tokens_of(tree) - words)}")
    assert not drift, drift
