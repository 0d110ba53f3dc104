"""storage/glob.py against a table of Redis pattern cases and a step-by-step model of stringmatchlen."""

from __future__ import annotations

import random

import pytest

from storage.glob import compile_pattern, stringmatch


@pytest.fixture(autouse=True)
def _fresh_patterns():
    """compile_pattern is cached: a pattern another test compiled first must not skip the translation under test."""
    compile_pattern.cache_clear()


# (pattern, subject, matches) — checked against Redis 7 with KEYS where the rule is a quirk.
TABLE = [
    (b"*", b"anything", True),
    (b"*", b"", False),  # Redis's loop never runs for an empty subject (KEYS/SCAN special-case "*")
    (b"", b"", True),
    (b"", b"a", False),
    (b"**", b"", False),
    (b"a*", b"a", True),
    (b"a*", b"abc", True),
    (b"a*", b"ba", False),
    (b"*a", b"bca", True),
    (b"*a", b"ab", False),
    (b"a*b*c", b"axxbyyc", True),
    (b"a*b*c", b"axxbyy", False),
    (b"?", b"a", True),
    (b"?", b"ab", False),
    (b"??", b"ab", True),
    (b"h?llo", b"hello", True),
    (b"h?llo", b"hllo", False),
    (b"h[ae]llo", b"hallo", True),
    (b"h[ae]llo", b"hillo", False),
    (b"h[^e]llo", b"hallo", True),
    (b"h[^e]llo", b"hello", False),
    (b"h[a-b]llo", b"hbllo", True),
    (b"h[a-b]llo", b"hcllo", False),
    (b"h[b-a]llo", b"hallo", True),  # reversed ranges are swapped
    (b"[]", b"a", False),  # an empty set matches nothing
    (b"[]a]", b"]a]", False),
    (b"[]a]", b"a]", False),
    (b"[^]", b"x", True),  # a negated empty set matches any byte
    (b"[^]", b"", False),
    (b"[abc", b"b", True),  # an unclosed set runs to the end
    (b"[abc", b"bc", False),
    (b"[a-]", b"a", True),  # '-' takes the ']' as the end of a range a..]
    (b"[a-]", b"^", True),
    (b"[a-]", b"-", False),
    (b"[\\]]", b"]", True),
    (b"[\\^a]", b"^", True),
    (b"[a\\-z]", b"-", True),
    (b"[a\\-z]", b"b", False),
    (b"\\*", b"*", True),
    (b"\\*", b"a", False),
    (b"\\?x", b"?x", True),
    (b"a\\", b"a\\", True),  # a trailing backslash is literal
    (b"[\\", b"\\", True),
    (b"\\[a]", b"[a]", True),
    (b"*[0-9]", b"key7", True),
    (b"*[0-9]", b"key", False),
    (b"user:*:name", b"user:42:name", True),
    (b"user:*:name", b"user:42:mail", False),
    (b"a.c", b"abc", False),  # regex metacharacters are literal
    (b"a+", b"aa", False),
    (b"(x)", b"(x)", True),
    (b"*\n*", b"a\nb", True),  # any byte, newlines included
    (b"\xff*", b"\xff\x00", True),
]


@pytest.mark.parametrize(("pattern", "subject", "expected"), TABLE)
def test_table(pattern, subject, expected):
    assert stringmatch(pattern, subject) is expected


def _same(b: int) -> int:
    return b


def _lower(b: int) -> int:
    return b + 32 if 65 <= b <= 90 else b


def reference_match(pattern: bytes, subject: bytes, nocase: bool = False) -> bool:
    """Redis's stringmatchlen walked byte by byte (recursive on '*'), the model to compare with.

    With nocase, tolower() on both sides of every comparison, as stringmatchlen(..., nocase=1)
    does: a range's bounds are ordered first and lowered after; an escaped byte in a set
    compares exactly."""
    low = _lower if nocase else _same

    def match(p: int, s: int) -> bool:
        n, m = len(pattern), len(subject)
        while p < n and s < m:
            c = pattern[p]
            if c == 42:  # '*'
                while p + 1 < n and pattern[p + 1] == 42:
                    p += 1
                if p + 1 == n:
                    return True
                return any(match(p + 1, start) for start in range(s, m))
            if c == 63:  # '?'
                s += 1
            elif c == 91:  # '['
                p += 1
                negate = p < n and pattern[p] == 94
                if negate:
                    p += 1
                hit = False
                while True:
                    if p < n and pattern[p] == 92 and n - p >= 2:
                        p += 1
                        hit |= pattern[p] == subject[s]
                    elif p < n and pattern[p] == 93:
                        break
                    elif p >= n:
                        p -= 1
                        break
                    elif n - p >= 3 and pattern[p + 1] == 45:
                        lo, hi = sorted((pattern[p], pattern[p + 2]))
                        hit |= low(lo) <= low(subject[s]) <= low(hi)
                        p += 2
                    else:
                        hit |= low(pattern[p]) == low(subject[s])
                    p += 1
                if hit == negate:
                    return False
                s += 1
            else:
                if c == 92 and n - p >= 2:
                    p += 1
                    c = pattern[p]
                if low(c) != low(subject[s]):
                    return False
                s += 1
            p += 1
            if s == m:
                while p < n and pattern[p] == 42:
                    p += 1
                break
        return p >= n and s == m

    return match(0, 0)


@pytest.mark.parametrize(("pattern", "subject", "expected"), TABLE)
def test_reference_model_agrees_with_table(pattern, subject, expected):
    assert reference_match(pattern, subject) is expected


def test_random_patterns_match_the_model():
    rng = random.Random(7)
    alphabet = b"ab-^]\\[*?"
    for _ in range(4000):
        pattern = bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 7)))
        subject = bytes(rng.choice(b"ab-^]\\[") for _ in range(rng.randint(0, 5)))
        assert stringmatch(pattern, subject) == reference_match(pattern, subject), (pattern, subject)


def test_compiled_patterns_are_cached():
    assert compile_pattern(b"k*") is compile_pattern(b"k*")


def test_nocase():
    assert stringmatch(b"MAX*", b"maxmemory", nocase=True)
    assert stringmatch(b"[A-C]x", b"bX", nocase=True)
    assert not stringmatch(b"MAX*", b"maxmemory")


def test_many_stars_match_in_linear_time():
    """A backtracking matcher would take ages here; the segment matcher answers at once."""
    subject = b"a" * 20000
    assert not stringmatch(b"*a*a*a*a*a*a*a*a*a*a*a*a*b", subject)
    assert stringmatch(b"*a*a*a*a*a*a*a*a*a*a*a*a*", subject)
    assert stringmatch(b"a*a?a*[a]", subject)


def test_star_nesting_limit_like_redis():
    assert not stringmatch(b"*x" * 1001, b"x" * 1001)  # Redis's recursion limit: no match
    assert stringmatch(b"*x" * 1000, b"x" * 1000)
    assert stringmatch(b"x*" * 1001, b"x" * 1001)  # a trailing star costs no recursion


def test_translate_gives_one_equivalent_regex():
    import re

    for pattern, subject, expected in TABLE:
        if subject:
            compiled = re.compile(translate_pattern(pattern).encode("latin-1"), re.DOTALL)
            assert (compiled.fullmatch(subject) is not None) is expected, (pattern, subject)


def translate_pattern(pattern: bytes) -> str:
    from storage.glob import translate

    return translate(pattern)
