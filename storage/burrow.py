"""Burrow's lag evaluation: a verdict from a window of samples, with no thresholds.

LinkedIn's Burrow keeps, per partition, the last N committed offsets with
their lag and time, and evaluates them in this order (its
core/internal/evaluator rules):

1. the lag now is 0, or some sample in the window had lag 0 -> OK (and,
   unlike Burrow, fewer than two samples -> OK: one sample shows no trend);
2. an offset went backwards from one sample to the next -> REWIND;
3. the time since the last sample exceeds the window's span
   (now - last > last - first): the consumer stopped committing -> STOP;
4. every sample has the same offset (commits without progress) -> STALL;
5. the lag never decreased from one sample to the next -> WARN;
6. otherwise OK.

For a consumer group a sample is taken when the group showed activity (a
consumer read, claimed or acknowledged, or its position moved): its offset
is the pair (ack floor, last-delivered-id) and its lag the group's backlog.
Pure: times are passed in.
"""

from __future__ import annotations

from collections import deque
from itertools import pairwise
from typing import NamedTuple

WINDOW = 10  # Burrow's default `intervals`
OK, WARN, STALL, STOP, REWIND = "OK", "WARN", "STALL", "STOP", "REWIND"


class Sample(NamedTuple):
    time_ms: int
    offset: tuple[int, int]  # (ack floor, last-delivered-id): compared element-wise
    lag: int


def evaluate(samples: list[Sample], current_lag: int, now_ms: int) -> str:
    """The status of a window of samples (oldest first), Burrow's rules in Burrow's order."""
    if len(samples) < 2 or current_lag == 0 or any(sample.lag == 0 for sample in samples):
        return OK  # (Burrow judges a single sample too, always STOP or STALL: no trend yet, so OK here)
    pairs = list(pairwise(samples))
    if any(_went_back(before.offset, after.offset) for before, after in pairs):
        return REWIND
    first, last = samples[0].time_ms, samples[-1].time_ms
    if now_ms - last > last - first:
        return STOP
    if all(before.offset == after.offset for before, after in pairs):
        return STALL
    if all(after.lag >= before.lag for before, after in pairs):
        return WARN
    return OK


def _went_back(before: tuple[int, int], after: tuple[int, int]) -> bool:
    return after[0] < before[0] or after[1] < before[1]


class LagWindow:
    """The last WINDOW samples of one group, and what identified its last activity."""

    __slots__ = ("samples", "activity")

    def __init__(self, size: int = WINDOW) -> None:
        self.samples: deque[Sample] = deque(maxlen=size)
        self.activity: object = None

    def observe(self, now_ms: int, offset: tuple[int, int], lag: int, activity: object) -> bool:
        """Record a sample if the group did something since the last one (activity or offset changed)."""
        if self.samples and activity == self.activity and offset == self.samples[-1].offset:
            return False
        self.activity = activity
        self.samples.append(Sample(now_ms, offset, lag))
        return True

    def status(self, current_lag: int, now_ms: int) -> str:
        return evaluate(list(self.samples), current_lag, now_ms)

    @property
    def complete(self) -> bool:
        """Whether the window is full (Burrow's `complete`)."""
        return len(self.samples) == self.samples.maxlen
