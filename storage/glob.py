"""Redis glob-style patterns (KEYS, SCAN MATCH, CONFIG GET...), as stringmatchlen reads them.

A pattern is compiled once (cached) into regular expressions for the pieces
between its stars, so matching a whole keyspace runs at regex speed and in
linear time. The translation follows Redis's matcher rule by rule, including
its quirks:

- `*` any run of bytes, `?` any one byte, `\\x` the byte x literally;
- `[abc]` `[^abc]` `[a-z]` sets: a reversed range `[z-a]` is the same range,
  `\\` escapes inside a set, `[]` matches nothing and `[^]` any one byte;
  a set missing its `]` runs to the end of the pattern (`[a-]` is the range
  from `a` down to `]`, because `-` takes the byte after it, whatever it is);
- a trailing lone `\\` matches a backslash;
- NOCASE (CONFIG GET, COMMAND LIST FILTERBY PATTERN) compares tolower() of
  both bytes, and of a range's bounds after ordering them (`[Z-a]` is then
  empty, `[A-z]` is `[a-z]`); an escaped byte inside a set stays exact;
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


def _lower(b: int) -> int:
    """C's tolower() in the C locale, which stringmatchlen uses for NOCASE."""
    return b + 32 if 65 <= b <= 90 else b


def _folded(lo: int, hi: int) -> list[tuple[int, int]]:
    """The bytes c with lo <= tolower(c) <= hi, as ranges: Redis lowers a set's bounds and the byte
    it compares, after putting the bounds in order (so `[Z-a]` is empty and `[A-z]` is `[a-z]`)."""
    lo, hi = _lower(lo), _lower(hi)
    out: list[tuple[int, int]] = []
    for c in range(256):
        if lo <= _lower(c) <= hi:
            if out and out[-1][1] == c - 1:
                out[-1] = (out[-1][0], c)
            else:
                out.append((c, c))
    return out


def _set_class(members: list[tuple[int, int]], negate: bool) -> str:
    """A regex for one byte in (or, negated, not in) the given inclusive ranges."""
    if not members:
        return "[\\x00-\\xff]" if negate else "(?!)"
    body = "".join(_byte(lo) if lo == hi else f"{_byte(lo)}-{_byte(hi)}" for lo, hi in members)
    return f"[{'^' if negate else ''}{body}]"


STAR = None  # a '*' among the tokens


def tokens(pattern: bytes, nocase: bool = False) -> list[str | None]:
    """The pattern as STAR markers (runs collapsed) and one-byte regex pieces."""
    out: list[str | None] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == 42:  # '*'
            while i + 1 < n and pattern[i + 1] == 42:
                i += 1
            out.append(STAR)
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
                if c == 92 and n - i >= 2:  # '\' escapes the next byte, compared as it is even with NOCASE
                    i += 1
                    members.append((pattern[i], pattern[i]))
                elif c == 93:  # ']'
                    break
                elif n - i >= 3 and pattern[i + 1] == 45:  # 'a-z'
                    lo, hi = c, pattern[i + 2]
                    if lo > hi:
                        lo, hi = hi, lo
                    members.extend(_folded(lo, hi) if nocase else [(lo, hi)])
                    i += 2
                else:
                    members.extend(_folded(c, c) if nocase else [(c, c)])
                i += 1
            out.append(_set_class(members, negate))
        else:
            if c == 92 and n - i >= 2:  # '\x' is x
                i += 1
                c = pattern[i]
            if nocase and (65 <= c <= 90 or 97 <= c <= 122):
                out.append(f"[{_byte(c)}{_byte(c ^ 0x20)}]")
            else:
                out.append(_byte(c))
        i += 1
    return out


def translate(pattern: bytes, nocase: bool = False) -> str:
    """One regex source equivalent to a Redis pattern (for reading; matching uses segments)."""
    return "".join("[\\x00-\\xff]*" if token is STAR else token for token in tokens(pattern, nocase))


def _compile(pieces: list[str]):
    return re.compile("".join(pieces).encode("latin-1"), re.DOTALL)


@lru_cache(maxsize=1024)
def compile_pattern(pattern: bytes, nocase: bool = False) -> Matcher:
    """A predicate `match(subject) -> bool` for one pattern; compiled once and cached.

    Every token but '*' matches exactly one byte, so the pieces between stars
    have fixed lengths: the first must match at the start, the last at the
    end, and the middle ones are found left to right by regex search (the
    leftmost place is always the best). That is linear-time matching, where
    one backtracking regex with many stars could take polynomial time on a
    hostile KEYS pattern. Like Redis (its recursion limit), a pattern with
    more than 1000 stars that are not trailing matches nothing.
    """
    if not pattern:
        return lambda subject: not subject
    parts = tokens(pattern, nocase)
    if STAR not in parts:
        fullmatch = _compile(parts).fullmatch
        return lambda subject: fullmatch(subject) is not None
    segments: list[list[str]] = [[]]
    for token in parts:
        if token is STAR:
            segments.append([])
        else:
            segments[-1].append(token)
    if len(segments) - 1 - (not segments[-1]) > 1000:
        return lambda subject: False
    first, middle, last = segments[0], segments[1:-1], segments[-1]
    first_match = _compile(first).match if first else None
    last_match = _compile(last).fullmatch if last else None
    middle_search = [_compile(segment).search for segment in middle if segment]
    needed = len(first) + len(last) + sum(len(segment) for segment in middle)
    head, tail = len(first), len(last)

    def match(subject: bytes) -> bool:
        size = len(subject)
        if not subject or size < needed:
            return False
        if first_match is not None and first_match(subject) is None:
            return False
        end = size - tail
        if last_match is not None and last_match(subject, end) is None:
            return False
        position = head
        for search in middle_search:
            found = search(subject, position, end)
            if found is None:
                return False
            position = found.end()
        return True

    return match


def stringmatch(pattern: bytes, subject: bytes, nocase: bool = False) -> bool:
    """Does subject match the Redis glob pattern?"""
    return compile_pattern(pattern, nocase)(subject)
