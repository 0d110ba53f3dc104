"""XGROUP SETCONFIG key group option [value ...] [option [value ...] ...]: per-group settings.

Options are parsed in one place: each feature registers its options with
`setconfig_option` (a parse step that reads its values from a Cursor and an
apply step), so SETCONFIG stays one command whatever features add. Every
option is parsed and checked before any is applied, so an error changes
nothing; the effect is the command with each option in its parsed, upper-case
form (deterministic: applying it anywhere gives the same state).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from protocol.errors import ReplyError, arg_text
from protocol.reply import OK

from ..command import command
from .args import Cursor
from .groups import _xgroup_prologue


@dataclass(frozen=True)
class SetConfigOption:
    """parse(ctx, stream, group, cursor) -> (value, normalized args); apply(ctx, stream, name, group, value)."""

    parse: Callable
    apply: Callable


SETCONFIG_OPTIONS: dict[bytes, SetConfigOption] = {}


def setconfig_option(name: bytes, parse: Callable, apply: Callable) -> None:
    """Register an XGROUP SETCONFIG option (upper-case name)."""
    SETCONFIG_OPTIONS[name] = SetConfigOption(parse, apply)


@command("xgroup|setconfig", -6, "write", keys=(2, 2, 1), group="stream", summary="Sets a consumer group's settings.", since="8.2.0")
def xgroup_setconfig(ctx, argv):
    """XGROUP SETCONFIG key group option [value ...] [option [value ...] ...] -> OK"""
    stream, group, _mkstream, _entries_read = _xgroup_prologue(ctx, argv[:4], True)
    cursor = Cursor(argv, 4)
    parsed = []
    seen = set()
    while cursor:
        word = cursor.next()
        name = word.upper()
        option = SETCONFIG_OPTIONS.get(name)
        if option is None:
            raise ReplyError(f"ERR Unrecognized XGROUP SETCONFIG option '{arg_text(word)}'")
        if name in seen:
            raise ReplyError(f"ERR XGROUP SETCONFIG option '{arg_text(word)}' given twice")
        seen.add(name)
        value, normalized = option.parse(ctx, stream, group, cursor)
        parsed.append((option, value, normalized))
    effect = [b"XGROUP", b"SETCONFIG", argv[2], argv[3]]
    for option, value, normalized in parsed:
        option.apply(ctx, stream, argv[3], group, value)
        effect += normalized
    return OK, [effect]
