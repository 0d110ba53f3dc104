"""The one command table.

Each command is declared once, next to its handler, with the facts Redis's
src/commands/*.json records: name, arity, flags, key positions, group, docs.
Dispatch, arity errors, COMMAND INFO/DOCS/COUNT/LIST/GETKEYS, MULTI queuing and
read-only replicas all read this table.

Handler contract (see ARCHITECTURE.md):
- `handler(ctx, argv) -> reply` for commands without the `write` flag;
- `handler(ctx, argv) -> (reply, effects)` for `write` commands, where
  `effects` is a list of normalized argvs that reproduce the change exactly
  (empty when nothing changed);
- a handler may return a `server.blocking.Block` to wait for keys, only if
  its command has the `blocking` flag (the fast path does not look for one);
- errors are raised as `protocol.errors.ReplyError`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from protocol.errors import ReplyError, arg_text, wrong_arity

KeySpec = tuple[int, int, int]


@dataclass(slots=True, eq=False)
class Command:
    name: str  # lower case; "config|get" for a subcommand
    handler: Callable | None
    arity: int  # >0 exact argc, <0 minimum argc (as in Redis)
    flags: frozenset[str]
    keys: KeySpec = (0, 0, 0)  # first, last (negative: from the end), step
    keys_fn: Callable[[list[bytes]], list[bytes]] | None = None
    group: str = "generic"
    summary: str = ""
    since: str = "1.0.0"
    complexity: str | None = "O(1)"  # None: Redis's JSON gives none (MONITOR, PSYNC)
    subcommands: dict[bytes, Command] = field(default_factory=dict)
    parent: Command | None = None
    # derived from flags and arity once, read on the hot path
    write: bool = False
    blocking: bool = False
    min_args: int = 0  # argc bounds the arity allows
    max_args: int = 0
    loading_max_args: int = 0  # a longer argc taken from loading/replica clients only (effect-only options)
    # statistics for INFO commandstats
    calls: int = 0
    duration_ns: int = 0
    failed_calls: int = 0
    rejected_calls: int = 0
    latency_hist: dict[int, int] = field(default_factory=dict)  # µs -> calls, for LATENCY HISTOGRAM (server/latency.py)

    @property
    def usec(self) -> int:
        return self.duration_ns // 1000

    def key_positions(self, argv: list[bytes]) -> list[int]:
        """Indexes of the key arguments in argv."""
        if self.keys_fn is not None:
            return self.keys_fn(argv)
        first, last, step = self.keys
        if first == 0:
            return []
        if last < 0:
            last = len(argv) + last
        return list(range(first, min(last, len(argv) - 1) + 1, step))

    def get_keys(self, argv: list[bytes]) -> list[bytes]:
        return [argv[i] for i in self.key_positions(argv)]

    def resolve(self, argv: list[bytes]) -> Command:
        """The subcommand argv names, for container commands such as CONFIG."""
        if len(argv) < 2:
            if self.handler is not None:  # COMMAND alone is a command too
                return self
            raise wrong_arity(self.name)
        sub = self.subcommands.get(argv[1].lower())
        if sub is None:
            raise UnknownSubcommand(
                f"ERR unknown subcommand '{arg_text(argv[1][:128])}'. "
                f"Try {self.name.upper()} HELP."
            )
        return sub


class UnknownSubcommand(ReplyError):
    """No command at all to Redis (its lookup fails): INFO commandstats counts it nowhere."""


COMMANDS: dict[bytes, Command] = {}


def command(
    name: str,
    arity: int,
    flags: str = "",
    keys: KeySpec | Callable[[list[bytes]], list[int]] = (0, 0, 0),
    group: str = "generic",
    summary: str = "",
    since: str = "1.0.0",
    complexity: str | None = "O(1)",
    loading_max_args: int = 0,
    waits: bool = False,
) -> Callable[[Callable], Callable]:
    """Declare a command (or `parent|sub` subcommand) and register its handler.

    `loading_max_args`: a longer argc accepted from loading/replica clients only, for a write
    whose effect carries options clients may not send. `waits`: the handler may return a Block
    without being a Redis blocking command (SCAN waiting for its snapshot; COMMAND INFO unchanged).
    """

    def register(handler: Callable | None) -> Callable | None:
        flagset = frozenset(flags.split())
        cmd = Command(
            name=name,
            handler=handler,
            arity=arity,
            flags=flagset,
            keys=keys if isinstance(keys, tuple) else (0, 0, 0),
            keys_fn=None if isinstance(keys, tuple) else keys,
            group=group,
            summary=summary,
            since=since,
            complexity=complexity,
            write="write" in flagset,
            blocking="blocking" in flagset or waits,
            min_args=abs(arity),
            max_args=arity if arity > 0 else 2**31,
            loading_max_args=loading_max_args,
        )
        if "|" in name:
            parent_name, sub = name.split("|", 1)
            parent = COMMANDS[parent_name.encode()]
            cmd.parent = parent
            parent.subcommands[sub.encode()] = cmd
        else:
            COMMANDS[name.encode()] = cmd
        return handler

    return register


def container(name: str, group: str = "generic", summary: str = "", since: str = "1.0.0") -> None:
    """Declare a command whose work is done by subcommands (CONFIG, CLIENT, XINFO...)."""
    command(name, -2, "", group=group, summary=summary, since=since, complexity="Depends on subcommand.")(None)
