"""storage/burrow.py against a model of Burrow's rules over random windows (issue 27, README "Mutation testing").

The scripted cases of tests/test_burrow.py name each rule once; here random
windows with small values (so equal offsets, equal lags, zero lags, a gap
equal to the span and single-field rewinds all come up often) are judged by
a model written from Burrow's evaluator order, and a LagWindow fed random
observations is compared with a plain list of the samples it should keep.
"""

from __future__ import annotations

import random

import pytest

from storage.burrow import OK, REWIND, STALL, STOP, WARN, WINDOW, LagWindow, Sample, evaluate


def model_status(samples: list[Sample], current_lag: int, now_ms: int) -> str:
    if len(samples) < 2:
        return OK
    if current_lag == 0 or min(sample.lag for sample in samples) == 0:
        return OK
    for i in range(1, len(samples)):
        before, after = samples[i - 1].offset, samples[i].offset
        if after[0] < before[0] or after[1] < before[1]:
            return REWIND
    span = samples[-1].time_ms - samples[0].time_ms
    if now_ms - samples[-1].time_ms > span:
        return STOP
    if len({sample.offset for sample in samples}) == 1:
        return STALL
    if all(samples[i].lag >= samples[i - 1].lag for i in range(1, len(samples))):
        return WARN
    return OK


def _random_window(rng: random.Random) -> list[Sample]:
    samples = []
    t, floor, last = 0, rng.randrange(3), rng.randrange(3)
    for _ in range(rng.randrange(0, 6)):
        t += rng.choice((0, 1, 2))
        move = rng.random()
        if move < 0.15:
            floor -= 1
        elif move < 0.3:
            last -= 1
        elif move < 0.65:
            floor += rng.choice((0, 1))
            last += rng.choice((0, 1, 2))
        samples.append(Sample(t, (floor, last), rng.choice((0, 1, 2, 3, 3, 4))))
    return samples


@pytest.mark.parametrize("seed", range(4))
def test_evaluate_matches_the_rules(seed: int) -> None:
    rng = random.Random(seed)
    seen = set()
    for _ in range(3000):
        samples = _random_window(rng)
        lag = rng.choice((0, 1, 2, 5))
        now = (samples[-1].time_ms if samples else 0) + rng.choice((0, 1, 2, 3, 4, 6))
        want = model_status(samples, lag, now)
        assert evaluate(samples, lag, now) == want, (samples, lag, now)
        seen.add(want)
    assert seen == {OK, REWIND, STOP, STALL, WARN}


@pytest.mark.parametrize("seed", range(4))
def test_window_keeps_the_last_samples_of_activity(seed: int) -> None:
    rng = random.Random(seed)
    size = rng.choice((2, 3, WINDOW))
    window = LagWindow() if size == WINDOW else LagWindow(size)
    kept: list[Sample] = []
    activity = None
    for step in range(400):
        new_activity = rng.choice((activity, activity, step))
        offset = kept[-1].offset if kept and rng.random() < 0.5 else (rng.randrange(3), rng.randrange(3))
        lag = rng.randrange(4)
        recorded = window.observe(step, offset, lag, new_activity)
        want = not kept or new_activity != activity or offset != kept[-1].offset
        assert recorded == want
        if want:
            activity = new_activity
            kept = [*kept, Sample(step, offset, lag)][-size:]
        assert list(window.samples) == kept
        assert window.complete == (len(kept) == size)
        now = step + rng.randrange(4)
        assert window.status(lag, now) == model_status(kept, lag, now)
