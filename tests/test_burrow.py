"""Burrow's evaluation rules (storage/burrow.py) on scripted sample sequences, and the window's sampling."""

from __future__ import annotations

import pytest

from storage.burrow import OK, REWIND, STALL, STOP, WARN, LagWindow, Sample, evaluate


def window(*rows: tuple[int, int, int]) -> list[Sample]:
    """(time s, offset, lag) rows; the offset pair is (ack floor, last-delivered-id) = (offset, offset)."""
    return [Sample(t * 1000, (o, o), lag) for t, o, lag in rows]


CASES = [
    # a healthy consumer: offsets move, lag goes down somewhere
    ("ok-progress", window((0, 10, 5), (1, 20, 8), (2, 30, 4)), 4, 3, OK),
    # zero lag anywhere in the window is OK whatever else happens
    ("ok-zero-in-window", window((0, 10, 5), (1, 5, 0), (2, 5, 7)), 7, 10, OK),
    # zero lag now is OK
    ("ok-zero-now", window((0, 10, 5), (1, 10, 5)), 0, 100, OK),
    # an offset went backwards
    ("rewind", window((0, 10, 5), (1, 20, 5), (2, 15, 9), (3, 30, 4)), 4, 3, REWIND),
    # rewind wins over stop
    ("rewind-before-stop", window((0, 10, 5), (1, 5, 9)), 9, 100, REWIND),
    # no sample for longer than the window spans
    ("stop", window((0, 10, 5), (1, 20, 4), (2, 30, 3)), 3, 5, STOP),
    # exactly the span is not yet a stop
    ("not-stop-at-span", window((0, 10, 5), (1, 20, 4), (2, 30, 3)), 3, 4, OK),
    # commits without progress
    ("stall", window((0, 10, 5), (1, 10, 6), (2, 10, 7)), 7, 2, STALL),
    # progress, but the lag never decreases
    ("warn", window((0, 10, 5), (1, 20, 5), (2, 30, 6)), 6, 2, WARN),
    # one decrease anywhere clears the warning
    ("ok-one-decrease", window((0, 10, 5), (1, 20, 6), (2, 30, 5), (3, 40, 9)), 9, 3, OK),
    # a single sample shows no trend
    ("single", window((0, 10, 5)), 5, 100, OK),
    ("empty", [], 5, 100, OK),
]


@pytest.mark.parametrize(("name", "samples", "lag", "now_s", "expected"), CASES, ids=[c[0] for c in CASES])
def test_burrow_rules(name, samples, lag, now_s, expected) -> None:
    assert evaluate(samples, lag, now_s * 1000) == expected


def test_rewind_of_last_delivered_id_alone() -> None:
    """SETID backwards with pending entries keeps the ack floor: the last-delivered-id going back is a rewind."""
    samples = [Sample(0, (5, 50), 9), Sample(1000, (5, 20), 12)]
    assert evaluate(samples, 12, 1500) == REWIND


def test_window_records_activity_only() -> None:
    win = LagWindow(size=3)
    assert win.observe(0, (1, 1), 5, activity=10)
    assert not win.observe(1000, (1, 1), 5, activity=10)  # nothing happened: no sample (a stopped consumer)
    assert win.observe(2000, (1, 1), 6, activity=11)  # a read without progress: a sample (a stall)
    assert win.observe(3000, (2, 2), 4, activity=11)  # progress without a read (an ack): a sample
    assert win.observe(4000, (3, 3), 3, activity=12)
    assert [s.time_ms for s in win.samples] == [2000, 3000, 4000]  # the oldest fell out
    assert win.complete
    assert win.status(3, 5000) == OK
    assert win.status(3, 7000) == STOP
