"""Redis glob-style patterns (KEYS, SCAN MATCH, CONFIG GET...), as stringmatchlen reads them.

A pattern is compiled once into an equivalent regular expression (cached),
so matching a whole keyspace runs at regex speed. The translation follows
Redis's matcher rule by rule, including its quirks:

- `*` any run of bytes, `?` any one byte, `\\x` the byte x literally;
- `[abc]` `[^abc]` `[a-z]` sets: a reversed range `[z-a]` is the same range,
  `\\` escapes inside a set, `[]` matches nothing and `[^]` any one byte;
  a set missing its `]` runs to the end of the pattern (`[a-]` is the range
  from `a` down to `]`, because `-` takes the byte after it, whatever it is);
- a trailing lone `\\` matches a backslash;
- the empty string is matched only by the empty pattern (Redis's loop never
  runs for an empty subject, so even `*` fails; KEYS and SCAN special-case a
  pattern of exactly `*` before they get here).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

Matcher = Callable[[bytes], bool]


def _byte(b: int) -> str:
    return f"\\x{b:02x}"


def _set_class(members: list[tuple[int, int]], negate: bool, nocase: bool) -> str:
    """A regex for one byte in (or, negated, not in) the given inclusive ranges."""
    if nocase:
        extra = []
        for lo, hi in members:
            for b in range(lo, hi + 1):
                if 65 <= b <= 90 or 97 <= b <= 122:
                    other = b ^ 0x20
                    extra.append((other, other))
        members = members + extra
    if not members:
        return "[\\x00-\\xff]" if negate else "(?!)"
    body = "".join(_byte(lo) if lo == hi else f"{_byte(lo)}-{_byte(hi)}" for lo, hi in members)
    return f"[{'^' if negate else ''}{body}]"


def translate(pattern: bytes, nocase: bool = False) -> str:
    """The regex source (over latin-1 text of bytes) equivalent to a Redis pattern."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == 42:  # '*'
            while i + 1 < n and pattern[i + 1] == 42:
                i += 1
            out.append("[\\x00-\\xff]*")
        elif c == 63:  # '?'
            out.append("[\\x00-\\xff]")
        elif c == 91:  # '['
            i += 1
            negate = i < n and pattern[i] == 94  # '^'
            if negate:
                i += 1
            members: list[tuple[int, int]] = []
            while i < n:
                c = pattern[i]
                if c == 92 and n - i >= 2:  # '\' escapes the next byte
                    i += 1
                    members.append((pattern[i], pattern[i]))
                elif c == 93:  # ']'
                    break
                elif n - i >= 3 and pattern[i + 1] == 45:  # 'a-z'
                    lo, hi = c, pattern[i + 2]
                    if lo > hi:
                        lo, hi = hi, lo
                    members.append((lo, hi))
                    i += 2
                else:
                    members.append((c, c))
                i += 1
            out.append(_set_class(members, negate, nocase))
        else:
            if c == 92 and n - i >= 2:  # '\x' is x
                i += 1
                c = pattern[i]
            if nocase and (65 <= c <= 90 or 97 <= c <= 122):
                out.append(f"[{_byte(c)}{_byte(c ^ 0x20)}]")
            else:
                out.append(_byte(c))
        i += 1
    return "".join(out)


@lru_cache(maxsize=1024)
def compile_pattern(pattern: bytes, nocase: bool = False) -> Matcher:
    """A predicate `match(subject) -> bool` for one pattern; compiled once and cached."""
    if not pattern:
        return lambda subject: not subject
    fullmatch = re.compile(translate(pattern, nocase).encode("latin-1"), re.DOTALL).fullmatch

    def match(subject: bytes) -> bool:
        return bool(subject) and fullmatch(subject) is not None

    return match


def stringmatch(pattern: bytes, subject: bytes, nocase: bool = False) -> bool:
    """Does subject match the Redis glob pattern?"""
    return compile_pattern(pattern, nocase)(subject)
