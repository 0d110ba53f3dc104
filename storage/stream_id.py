"""Stream IDs as single integers: `ms << 64 | seq`.

Redis IDs are two unsigned 64-bit numbers compared as a pair; packing them into
one Python int keeps that order, makes comparison and bisect cheap and costs
one object per ID. `0` is 0-0, `MAX_ID` is 18446744073709551615-18446744073709551615.
"""

from __future__ import annotations

from protocol.errors import ReplyError

SEQ_BITS = 64
SEQ_MASK = (1 << 64) - 1
U64_MAX = SEQ_MASK
MIN_ID = 0
MAX_ID = (U64_MAX << 64) | U64_MAX
INVALID_ID = "ERR Invalid stream ID specified as stream command argument"


def make_id(ms: int, seq: int) -> int:
    return (ms << 64) | seq


def split_id(stream_id: int) -> tuple[int, int]:
    return stream_id >> 64, stream_id & SEQ_MASK


def format_id(stream_id: int) -> bytes:
    """The wire form, b'1700000000000-0'."""
    return b"%d-%d" % (stream_id >> 64, stream_id & SEQ_MASK)


def _u64(text: bytes) -> int:
    """An unsigned 64-bit decimal as Redis's string2ull accepts it."""
    if not text or not text.isdigit() or len(text) > 20:
        raise ReplyError(INVALID_ID)
    value = int(text)
    if value > U64_MAX:
        raise ReplyError(INVALID_ID)
    return value


def parse_id(arg: bytes, missing_seq: int = 0) -> int:
    """Parse `ms-seq`, `ms` (seq := missing_seq), `-` and `+`; raise Redis's error otherwise."""
    if arg == b"-":
        return MIN_ID
    if arg == b"+":
        return MAX_ID
    ms, dash, seq = arg.partition(b"-")
    if not dash:
        return make_id(_u64(ms), missing_seq)
    return make_id(_u64(ms), _u64(seq))
