"""pipeline/stream_ids.py against a model of Redis's ID text, over random seeded inputs
(in-process, no server, no Spark): `ms-seq` or `ms`, both unsigned 64-bit, ASCII digits,
surrounding whitespace allowed; the packed int `ms << 64 | seq` and its text form."""

from __future__ import annotations

import random
import re

import pytest

from pipeline.stream_ids import MAX_ID, SEQ_MASK, exclusive_start, format_id, make_id, parse_id

U64 = 2**64 - 1
EDGES = [0, 1, 2, 9, 10, 99, 2**32 - 1, 2**32, 2**63 - 1, 2**63, U64 - 1, U64, U64 + 1, 2**65, 10**20]


def model_parse(text: str, missing_seq: int) -> int | None:
    """The ID text as Redis reads it (None: refused); the int is ms * 2^64 + seq."""
    match = re.fullmatch(r"([0-9]+)(?:-([0-9]+))?", text.strip())
    if match is None:
        return None
    ms = int(match[1])
    seq = int(match[2]) if match[2] is not None else missing_seq
    if ms > U64 or (match[2] is not None and seq > U64):
        return None
    return ms * 2**64 + seq


def _text(rng: random.Random) -> str:
    pick = rng.random()
    if pick < 0.6:
        ms, seq = rng.choice(EDGES), rng.choice(EDGES)
        body = f"{ms}-{seq}" if rng.random() < 0.7 else str(ms)
    else:
        body = "".join(rng.choice("0123456789--- x+*(") for _ in range(rng.randint(0, 6)))
    pad = rng.choice(["", " ", "\t", "\n ", ""])
    return pad + body + rng.choice(["", " ", "\r\n"])


def test_constants():
    assert SEQ_MASK == U64
    assert MAX_ID == U64 * 2**64 + U64 == 2**128 - 1


@pytest.mark.parametrize("seed", range(4))
def test_parse_id_against_the_model(seed):
    rng = random.Random(seed)
    for _ in range(2000):
        text = _text(rng)
        missing = rng.choice([0, 1, 5, U64])
        want = model_parse(text, missing)
        for arg in (text, text.encode()):
            if want is None:
                with pytest.raises(ValueError, match="stream ID") as excinfo:
                    parse_id(arg, missing)
                assert repr(text) in str(excinfo.value)
            else:
                assert parse_id(arg, missing) == want, (text, missing)
        if want is not None and "-" not in text:
            assert parse_id(text) == model_parse(text, 0)  # missing_seq defaults to 0


def test_parse_id_errors_say_which():
    with pytest.raises(ValueError, match=r"^not a stream ID: '1-x'$"):
        parse_id("1-x")
    with pytest.raises(ValueError, match=r"^not a stream ID: 'x'$"):
        parse_id(b"x")
    with pytest.raises(ValueError, match=r"^stream ID out of range: '18446744073709551616-0'$"):
        parse_id("18446744073709551616-0")
    with pytest.raises(ValueError, match=r"^stream ID out of range: '0-18446744073709551616'$"):
        parse_id("0-18446744073709551616")
    with pytest.raises(ValueError, match=r"^stream ID out of range: '18446744073709551616'$"):
        parse_id("18446744073709551616")


@pytest.mark.parametrize("seed", range(2))
def test_make_format_exclusive_start(seed):
    rng = random.Random(seed)
    for _ in range(2000):
        ms = rng.choice(EDGES[:12]) if rng.random() < 0.5 else rng.randrange(2**64)
        seq = rng.choice(EDGES[:12]) if rng.random() < 0.5 else rng.randrange(2**64)
        value = make_id(ms, seq)
        assert value == ms * 2**64 + seq
        assert format_id(value) == f"{ms}-{seq}"
        assert parse_id(format_id(value)) == value
        assert exclusive_start(value) == ("-" if value == 0 else f"({ms}-{seq}")
    assert exclusive_start(0) == "-"
    assert exclusive_start(-1) == "-"
    assert exclusive_start(1) == "(0-1"
    assert exclusive_start(MAX_ID) == f"({U64}-{U64}"
    assert format_id(MAX_ID) == f"{U64}-{U64}"
    assert format_id(0) == "0-0"
