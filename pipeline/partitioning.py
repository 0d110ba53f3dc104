"""Split ID ranges of streams into Spark input partitions.

A partition is an exact, half-open ID range `(after, upto]` of one stream. A
stream's range is cut at evenly spaced points of the ID space between its
first and last entry in range, which follows event time for `*` IDs; streams
share `numPartitions` in proportion to their length, at least one each.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition


@dataclass
class StreamRange(InputPartition):
    """Entries of `stream` with `after < id <= upto`."""

    stream: str
    after: int
    upto: int


@dataclass(frozen=True)
class Span:
    """A stream's range to read, with the IDs of its first and last entry inside it (for cutting)."""

    stream: str
    after: int
    upto: int
    first_id: int
    last_id: int
    weight: int


def share_out(total: int, weights: list[int]) -> list[int]:
    """`total` split in proportion to `weights` (largest remainders first), at least 1 each."""
    n = len(weights)
    total = max(total, n)
    if sum(weights) <= 0:
        weights = [1] * n
    whole = sum(weights)
    exact = [total * w / whole for w in weights]
    shares = [max(1, int(e)) for e in exact]
    while sum(shares) > total:
        shares[max(range(n), key=lambda k: shares[k])] -= 1
    for k in sorted(range(n), key=lambda k: shares[k] - exact[k])[: total - sum(shares)]:
        shares[k] += 1
    return shares


def cut(span: Span, parts: int) -> list[StreamRange]:
    """`parts` consecutive ranges covering `span.after < id <= span.upto`."""
    lo = max(span.after, span.first_id - 1)
    hi = min(span.upto, span.last_id)
    if hi <= lo:
        return []
    parts = max(1, min(parts, hi - lo))
    bounds = [lo + (hi - lo) * i // parts for i in range(parts + 1)]
    bounds[0], bounds[-1] = span.after, span.upto
    return [StreamRange(span.stream, bounds[i], bounds[i + 1]) for i in range(parts) if bounds[i + 1] > bounds[i]]


def plan(spans: list[Span], num_partitions: int | None) -> list[StreamRange]:
    spans = [s for s in spans if min(s.upto, s.last_id) > max(s.after, s.first_id - 1)]
    if not spans:
        return []
    counts = share_out(num_partitions or len(spans), [s.weight for s in spans])
    return [part for span, n in zip(spans, counts, strict=True) for part in cut(span, n)]
