"""Stream IDs on the client side, as single ints `ms << 64 | seq` like the server's.

The pipeline is a plain client (it ships to Spark executors on its own), so it
keeps its own few lines instead of importing the server's storage package.
"""

from __future__ import annotations

SEQ_MASK = (1 << 64) - 1
MAX_ID = (SEQ_MASK << 64) | SEQ_MASK


def make_id(ms: int, seq: int) -> int:
    return (ms << 64) | seq


def format_id(stream_id: int) -> str:
    """`1700000000000-5`: the text form Redis replies with and accepts."""
    return f"{stream_id >> 64}-{stream_id & SEQ_MASK}"


def parse_id(text: str | bytes, missing_seq: int = 0) -> int:
    """Parse `ms-seq` or `ms` (seq := missing_seq); ValueError otherwise."""
    if isinstance(text, bytes):
        text = text.decode()
    ms, dash, seq = text.strip().partition("-")
    if not ms.isdigit() or (dash and not seq.isdigit()):
        raise ValueError(f"not a stream ID: {text!r}")
    value = make_id(int(ms), int(seq) if dash else missing_seq)
    if int(ms) > SEQ_MASK or (dash and int(seq) > SEQ_MASK):
        raise ValueError(f"stream ID out of range: {text!r}")
    return value


def exclusive_start(after: int) -> str:
    """XRANGE start argument for 'strictly after `after`' (`-` when nothing can precede it)."""
    return "-" if after <= 0 else "(" + format_id(after)
