"""COMMAND DOCS argument specs, read from the syntax line of a handler's docstring.

Handlers start their docstring with the command's syntax as redis.io writes it
(`CONFIG SET parameter value [parameter value ...]`). Turning that line into
Redis's argument maps (name, type, token, flags, nested arguments) keeps the
one command table the only description of a command, and gives redis-cli
what it needs for its hints and HELP.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from protocol.reply import Map, Set, Simple

_TOKENS = re.compile(r"\.\.\.|[\[\]<>|¦]|[^\s\[\]<>|¦]+")
_INTEGER_NAMES = {
    "count", "timeout", "index", "numkeys", "db", "seconds", "milliseconds", "port", "client-id", "id-or-count",
    "idmp-duration", "idmp-maxsize", "cursor", "increment", "decrement", "offset", "index1", "index2", "numreplicas",
    "numlocal", "bits", "destination-db", "maxage", "entries-added", "ms", "min-match-len",
}  # fmt: skip
_PIPE, _LOOSE, _DOTS = "|", "¦", "..."  # `a|b` binds words, `a b | c d` binds phrases


@dataclass
class Arg:
    name: str
    type: str
    token: str | None = None
    flags: list[str] = field(default_factory=list)
    arguments: list[Arg] = field(default_factory=list)
    since: str | None = None
    display: bool | str = False  # a str is shown instead of the name (`ip:port`); pure tokens always show one
    deprecated_since: str | None = None

    def reply(self, keys: list[int] | None = None) -> Map:
        """Redis's argument map; `keys` numbers the key arguments in order (Redis's key_spec_index)."""
        keys = keys if keys is not None else [0, 0]
        out = Map({b"name": self.name.encode(), b"type": self.type.encode()})
        if self.type not in ("oneof", "block"):
            out[b"display_text"] = (self.display if isinstance(self.display, str) else self.name).encode()
        if self.type == "key":
            next_key, last_spec = keys
            out[b"key_spec_index"] = min(next_key, last_spec)
            keys[0] += 1
        if self.token is not None:
            out[b"token"] = self.token.encode()
        if self.since is not None:
            out[b"since"] = self.since.encode()
        if self.flags:
            out[b"flags"] = Set([Simple(f.encode()) for f in self.flags])
        if self.deprecated_since is not None:
            out[b"deprecated_since"] = self.deprecated_since.encode()
        if self.arguments:
            out[b"arguments"] = [a.reply(keys) for a in self.arguments]
        return out


def _is_token(word: str) -> bool:
    return not any(c.islower() for c in word)


def _word(word: str) -> Arg:
    if _is_token(word):
        return Arg(word.lower() if word.isalnum() else word, "pure-token", token=word)
    if word in ("key", "source", "destination") or word.endswith("key") or re.fullmatch(r"key\d+", word):
        kind = "key"
    elif word.startswith("unix-time"):
        kind = "unix-time"
    elif word == "pattern":
        kind = "pattern"
    elif word in _INTEGER_NAMES:
        kind = "integer"
    else:
        kind = "string"
    return Arg(word, kind)


def _merge_pipes(items: list, pipe: str = _PIPE) -> list:
    """`a | b | c` among the items becomes one oneof argument."""
    out: list = []
    index = 0
    while index < len(items):
        item = items[index]
        if item == pipe and out and index + 1 < len(items) and isinstance(out[-1], Arg):
            left = out.pop()
            right = items[index + 1]
            if left.type == "oneof" and getattr(left, "_open", False):
                left.arguments.append(right)
                out.append(left)
            else:
                choice = Arg(left.name, "oneof", arguments=[left, right])
                choice._open = True  # type: ignore[attr-defined]
                out.append(choice)
            index += 2
            continue
        out.append(item)
        index += 1
    for item in out:
        if isinstance(item, Arg) and hasattr(item, "_open"):
            del item._open  # type: ignore[attr-defined]
    return out


def _attach_tokens(items: list) -> list:
    """`LIMIT count` becomes an argument `count` with the token LIMIT."""
    out: list = []
    index = 0
    while index < len(items):
        item = items[index]
        nxt = items[index + 1] if index + 1 < len(items) else None
        after = items[index + 2] if index + 2 < len(items) else None
        if (
            isinstance(item, Arg)
            and item.type == "pure-token"
            and isinstance(nxt, Arg)
            and nxt.type not in ("pure-token", "oneof", "block")
            and nxt.token is None
            and after != _PIPE
        ):
            nxt.token = item.token
            out.append(nxt)
            index += 2
            continue
        out.append(item)
        index += 1
    return out


def _sequence(tokens: list[str], pos: int, closer: str | None) -> tuple[list, int]:
    items: list = []
    while pos < len(tokens):
        tok = tokens[pos]
        pos += 1
        if tok == closer:
            break
        if tok == "[":
            inner, pos = _sequence(tokens, pos, "]")
            if inner and inner[-1] == _DOTS:
                repeated = inner[:-1]
                args = [i for i in items[-len(repeated):] if isinstance(i, Arg)] if repeated else []
                if repeated and [a.name for a in args] == [r.name for r in repeated if isinstance(r, Arg)]:
                    if len(args) == 1:
                        args[0].flags.append("multiple")
                    else:
                        del items[-len(repeated):]
                        items.append(Arg("data", "block", flags=["multiple"], arguments=args))  # Redis's name for them
                    continue
                if len(repeated) == 1 and isinstance(repeated[0], Arg):  # `[channel ...]`: zero or more
                    repeated[0].flags.append("multiple")
                inner = repeated
            node = _group(inner)
            if node is not None:
                node.flags.insert(0, "optional")
                items.append(node)
        elif tok == "<":
            inner, pos = _sequence(tokens, pos, ">")
            node = _group(inner)
            if node is not None:
                items.append(node)
        elif tok in (_PIPE, _LOOSE, _DOTS):
            items.append(tok)
        else:
            items.append(_word(tok))
    items = _merge_pipes(_attach_tokens(_merge_pipes(items)), _LOOSE)
    return items, pos


def _group(items: list) -> Arg | None:
    args = [i for i in items if isinstance(i, Arg)]
    if not args:
        return None
    if len(args) == 1:
        return args[0]
    return Arg(args[0].name, "block", arguments=args)


def syntax_line(handler, full_name: str) -> str | None:
    """The arguments part of the handler's syntax line, if its docstring starts with one."""
    doc = (getattr(handler, "__doc__", None) or "").strip()
    if not doc:
        return None
    line = doc.splitlines()[0]
    line = re.split(r" -> |: | \(|\. ", line, maxsplit=1)[0].rstrip(".")
    words = full_name.upper().replace("|", " ").split()
    head = line.split()
    if head[: len(words)] != words:
        return None
    return " ".join(head[len(words) :])


# Argument trees declared in full (Redis's JSON names: `condition`, `strategy`, blocks with tokens),
# for commands whose docs must match Redis's exactly; see server/commands/stream_docs.py and redis_docs.py.
DECLARED: dict[str, list[Arg]] = {}
# COMMAND DOCS `doc_flags` (`deprecated`, `syscmd`) and, for deprecated commands, (deprecated_since, replaced_by).
DOC_FLAGS: dict[str, tuple[str, ...]] = {}
DEPRECATED: dict[str, tuple[str, str]] = {}
# COMMAND DOCS `history`: (version, what changed), oldest first, as Redis's JSON lists them.
HISTORY: dict[str, list[tuple[str, str]]] = {}


def arguments(handler, full_name: str, key_specs: int = 1) -> list[Map]:
    """Redis's COMMAND DOCS `arguments` for a command, [] when its syntax is unknown or empty.

    The nth key argument refers to the nth of the command's `key_specs` key specs (the last one
    when there are fewer specs than key arguments, as LCS's key1 and key2 share one range)."""
    keys = [0, max(key_specs - 1, 0)]
    declared = DECLARED.get(full_name)
    if declared is not None:
        return [item.reply(keys) for item in declared]
    text = syntax_line(handler, full_name)
    if not text:
        return []
    items, _ = _sequence(_TOKENS.findall(re.sub(r"\s+\|\s+", " ¦ ", text)), 0, None)
    return [item.reply(keys) for item in items if isinstance(item, Arg)]
