"""XCOUNT key start end: how many live entries lie in an ID range, in O(log n) (issue 23).

Without a consumer group nothing counts the live entries after an arbitrary
position: XLEN counts them all, and entries-added minus a reader's own
entries-read counts deleted entries too (wrong after XDEL or a trim). A
client that tracks its position itself (the Spark source without option
`group`) needs exactly `XCOUNT key (last-read-id +`.

The range is XRANGE's to the letter (the same parser, so `-`, `+`,
incomplete IDs, `(` exclusive bounds and the error texts are XRANGE's); the
count comes from the stream's Fenwick tree of live counts per node
(storage/rank.py): two prefix sums and a bisect inside at most two nodes,
never a walk of the entries. Read-only, fast, propagates nothing.
"""

from __future__ import annotations

from storage.rank import count_live

from ..command import command
from .stream_args import parse_interval_end, parse_interval_start, read_stream


@command(
    "xcount", 4, "readonly fast", keys=(1, 1, 1), group="stream", since="7.4.0",
    summary="Returns the number of messages in a stream within a range of IDs.",
    complexity="O(log N) with N being the number of nodes of the stream, plus a bisect within at most two nodes.",
)  # fmt: skip
def xcount(ctx, argv):
    """XCOUNT key start end"""
    # XRANGE's order: both bounds are parsed (and refused) before the key is looked up
    start = parse_interval_start(argv[2])
    end = parse_interval_end(argv[3])
    stream = read_stream(ctx, argv[1])
    if stream is None or start > end:
        return 0
    return count_live(stream, start, end)
