"""Stream IDs as single integers: `ms << 64 | seq`.

Redis IDs are two unsigned 64-bit numbers compared as a pair; packing them into
one Python int keeps that order, makes comparison and bisect cheap and costs
one object per ID. `0` is 0-0, `MAX_ID` is 18446744073709551615-18446744073709551615.

Parsing follows Redis's streamGenericParseIDOrReply: each half goes through
string2ull, which first tries a canonical signed 64-bit integer and then falls
back to C's strtoull (so ` 5`, `+5` and `007` are accepted, as in Redis).
"""

from __future__ import annotations

from protocol.errors import ReplyError

SEQ_BITS = 64
SEQ_MASK = (1 << 64) - 1
U64_MAX = SEQ_MASK
MIN_ID = 0
MAX_ID = (U64_MAX << 64) | U64_MAX
INVALID_ID = "ERR Invalid stream ID specified as stream command argument"
_SPACES = b" \t\n\v\f\r"
_LLONG_MAX = (1 << 63) - 1


def make_id(ms: int, seq: int) -> int:
    return (ms << 64) | seq


def split_id(stream_id: int) -> tuple[int, int]:
    return stream_id >> 64, stream_id & SEQ_MASK


def format_id(stream_id: int) -> bytes:
    """The wire form, b'1700000000000-0'."""
    return b"%d-%d" % (stream_id >> 64, stream_id & SEQ_MASK)


# Formatting ints is the costly part of writing IDs, and on the hot paths (an XADD's
# reply, one XREADGROUP delivery) the milliseconds repeat and the sequences are small.
_SEQ_TEXT = [b"%d" % seq for seq in range(4096)]
_MS_TEXT: list = [-1, b"-1-"]  # the last milliseconds formatted, with their '-'


def format_ms_seq(ms: int, seq: int) -> bytes:
    """format_id of ms-seq, reusing the last milliseconds' text and the table of small sequences."""
    last = _MS_TEXT
    if last[0] != ms:
        last[:] = ms, b"%d-" % ms
    return last[1] + _SEQ_TEXT[seq] if seq < 4096 else last[1] + b"%d" % seq


def format_ids(entry_ids: list[int]) -> list[bytes]:
    """format_id of each of these increasing IDs, the milliseconds formatted once when they share them."""
    ms = entry_ids[0] >> 64
    base = ms << 64
    if entry_ids[-1] - base < 4096:  # increasing: all have these milliseconds and a small sequence
        prefix, seqs = b"%d-" % ms, _SEQ_TEXT
        return [prefix + seqs[entry_id - base] for entry_id in entry_ids]
    return [b"%d-%d" % (entry_id >> 64, entry_id & SEQ_MASK) for entry_id in entry_ids]


def _string2ull(text: bytes) -> int | None:
    """Redis's string2ull: an unsigned 64-bit value, or None when invalid."""
    if text.isdigit():  # canonical, or with leading zeros that strtoull accepts
        value = int(text)
        return value if value <= U64_MAX else None
    if text[:1] == b"-" and text[1:].isdigit() and text[1:2] != b"0" and int(text[1:]) <= _LLONG_MAX + 1:
        return None  # string2ll succeeds with a negative number: rejected
    # strtoull: optional leading spaces, an optional sign, then digits to the end.
    i, n = 0, len(text)
    while i < n and text[i] in _SPACES:
        i += 1
    negative = False
    if i < n and text[i] in b"+-":
        negative = text[i] == 45
        i += 1
    digits = text[i:]
    if not digits or not digits.isdigit():
        return None
    value = int(digits)
    if value > U64_MAX:
        return None
    return (-value) & U64_MAX if negative else value


def parse_id(arg: bytes, missing_seq: int = 0, strict: bool = False) -> int:
    """Parse `ms-seq`, `ms` (seq := missing_seq), and unless strict `-` and `+`."""
    if len(arg) > 127:
        raise ReplyError(INVALID_ID)
    if arg == b"-" or arg == b"+":
        if strict:
            raise ReplyError(INVALID_ID)
        return MIN_ID if arg == b"-" else MAX_ID
    ms_text, dash, seq_text = arg.partition(b"-")
    ms = _string2ull(ms_text)
    if ms is None:
        raise ReplyError(INVALID_ID)
    if not dash:
        return (ms << 64) | missing_seq
    seq = _string2ull(seq_text)
    if seq is None:
        raise ReplyError(INVALID_ID)
    return (ms << 64) | seq


def parse_strict_id(arg: bytes, missing_seq: int = 0) -> int:
    """An explicit ID where `-` and `+` are not allowed (XDEL, XSETID, MINID...)."""
    return parse_id(arg, missing_seq, strict=True)


def parse_xadd_id(arg: bytes) -> tuple[int, int | None]:
    """XADD's explicit ID: (ms, seq), or (ms, None) for the `ms-*` form."""
    if arg.endswith(b"-*") and len(arg) <= 127:
        ms = _string2ull(arg[:-2]) if b"-" not in arg[:-2] else None
        if ms is None:
            raise ReplyError(INVALID_ID)
        return ms, None
    stream_id = parse_strict_id(arg)
    return stream_id >> 64, stream_id & SEQ_MASK
