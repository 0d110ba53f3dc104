"""storage/claim.py directly against a model of claim order (issue 27, README "Mutation testing").

tests/test_claim_model.py predicts XREADGROUP ... CLAIM's replies through an
in-process server; has_claimable, next_claimable (what a blocked CLAIM read
waits for), nacked_count (XINFO) and XNACK's FORCE entries were left without an
in-process check. Here a ConsumerGroup takes seeded random deliveries, XNACKs
in every mode (FORCE too), XCLAIM-style transfers, acks, entries leaving the
PEL behind the NACK zone's back, and a clock that sometimes steps back (a
delivery time in the future); after each step:

- claim order is the NACK zone in NACK order, then the owned entries with
  delivery time <= now - min-idle-time (every one for 0, future ones too) by
  (delivery time, ID); has_claimable says whether it is empty;
- next_claimable is 0 with a NACK zone, else the oldest owned delivery time
  plus min-idle-time, None when nothing is owned;
- nacked_count is the zone's size, stale IDs not counted;
- XNACK sets the delivery time 0 and the count by mode: the given retry
  count, SILENT one less (not below 0), FAIL unchanged, FATAL LLONG_MAX; an
  entry FORCE creates starts from count 0.
"""

from __future__ import annotations

import random
from contextlib import closing

import pytest

from storage import claim
from storage.claim import LLONG_MAX
from storage.consumer_group import ConsumerGroup


class Model:
    def __init__(self) -> None:
        self.owned: dict[int, tuple[bytes, int, int]] = {}  # id -> (consumer, delivery time, count)
        self.zone: dict[int, int] = {}  # NACKed id -> count, in NACK order

    def order(self, now: int, min_idle: int) -> list[int]:
        owned = [(t, i) for i, (_c, t, _n) in self.owned.items() if not min_idle or t <= now - min_idle]
        return list(self.zone) + [i for _t, i in sorted(owned)]

    def next_claimable(self, min_idle: int) -> int | None:
        if self.zone:
            return 0
        if not self.owned:
            return None
        return min(t for _c, t, _n in self.owned.values()) + min_idle


def _listed(group: ConsumerGroup, now: int, min_idle: int) -> list[int]:
    """claim_order's IDs without claiming them: it consumes timeline records, so they are put back after."""
    saved = None if group.timeline is None else list(group.timeline)
    got = [entry_id for entry_id, _ in claim.claim_order(group, now, min_idle)]
    if saved is not None:
        group.timeline = saved
    return got


def _check(group: ConsumerGroup, model: Model, now: int, rng: random.Random) -> None:
    assert claim.nacked_count(group) == len(model.zone)
    for min_idle in (0, rng.choice((1, 15, 40, 10**6))):
        want = model.order(now, min_idle)
        assert claim.has_claimable(group, now, min_idle) == bool(want)
        assert _listed(group, now, min_idle) == want, (min_idle, now)
        assert claim.next_claimable(group, min_idle) == model.next_claimable(min_idle)
    for entry_id, (name, delivery_time, count) in model.owned.items():
        pending = group.pel[entry_id]
        assert (pending.consumer.name, pending.delivery_time, pending.delivery_count) == (name, delivery_time, count)
    for entry_id, count in model.zone.items():
        pending = group.pel[entry_id]
        assert (pending.consumer, pending.delivery_time, pending.delivery_count) == (None, 0, count)


@pytest.mark.parametrize("seed", range(10))
def test_claim_functions_match_the_model(seed: int) -> None:
    rng = random.Random(seed)
    group = ConsumerGroup(0)
    model = Model()
    now = 1000
    next_id = 1
    names = [b"a", b"b", b"c"]
    for _step in range(250):
        now += rng.choice((0, 1, 5, 20, -30))  # -30: the clock stepped back
        roll = rng.random()
        pending_ids = list(model.owned) + list(model.zone)
        if roll < 0.3:
            consumer = group.consumer(rng.choice(names), now)[0]
            for _ in range(rng.randrange(1, 4)):
                group.add_pending(next_id << 64, consumer, now)
                model.owned[next_id << 64] = (consumer.name, now, 1)
                next_id += 1
        elif roll < 0.5:
            force = rng.random() < 0.3
            entry_id = rng.randrange(1, next_id + 1) << 64 if force else rng.choice(pending_ids or [1 << 64])
            mode = rng.choice((b"SILENT", b"FAIL", b"FATAL"))
            retry = rng.choice((None, None, 0, 7))
            exists = force and entry_id < next_id << 64
            known = entry_id in model.owned or entry_id in model.zone
            got = claim.nack(group, entry_id, mode, retry, exists)
            if not known and not exists:
                assert got is None
                continue
            if entry_id in model.owned:
                count = model.owned.pop(entry_id)[2]
            else:
                count = model.zone.pop(entry_id, 0)
            if retry is not None:
                count = retry
            elif mode == b"SILENT":
                count = max(count - 1, 0)
            elif mode == b"FATAL":
                count = LLONG_MAX
            model.zone[entry_id] = count
            assert got is group.pel[entry_id]
        elif roll < 0.65 and pending_ids:
            # XCLAIM: to a consumer, re-timed (now, or a given time), count + 1
            entry_id = rng.choice(pending_ids)
            consumer = group.consumer(rng.choice(names), now)[0]
            pending = group.transfer(entry_id, group.pel[entry_id], consumer)
            at = rng.choice((now, now - 10, now + 10))
            group.retime(entry_id, pending, at)
            pending.delivery_count = claim.next_count(pending.delivery_count)
            count = model.owned[entry_id][2] if entry_id in model.owned else model.zone.pop(entry_id)
            model.owned.pop(entry_id, None)
            model.owned[entry_id] = (consumer.name, at, min(count + 1, LLONG_MAX))
        elif roll < 0.8 and pending_ids:
            # XREADGROUP ... CLAIM: take the first k in claim order, each claimed as it is given
            min_idle = rng.choice((0, 0, 10, 40))
            consumer = group.consumer(rng.choice(names), now)[0]
            k = rng.randrange(1, 4)
            want = model.order(now, min_idle)[:k]
            got = []
            with closing(claim.claim_order(group, now, min_idle)) as order:
                for entry_id, pending in order:
                    got.append(entry_id)
                    pending = group.transfer(entry_id, pending, consumer)
                    group.retime(entry_id, pending, now)
                    pending.delivery_count = claim.next_count(pending.delivery_count)
                    if len(got) == k:
                        break
            assert got == want
            for entry_id in got:
                count = model.owned.pop(entry_id)[2] if entry_id in model.owned else model.zone.pop(entry_id)
                model.owned[entry_id] = (consumer.name, now, min(count + 1, LLONG_MAX))
        elif roll < 0.9 and pending_ids:
            acked = rng.sample(pending_ids, min(len(pending_ids), rng.randrange(1, 3)))
            assert group.ack_many(acked) == [True] * len(acked)
            for entry_id in acked:
                model.owned.pop(entry_id, None)
                model.zone.pop(entry_id, None)
        elif model.zone:
            # a NACKed entry leaves the PEL by a path that does not tell the zone: the zone forgets it
            entry_id = rng.choice(list(model.zone))
            group.pel.pop(entry_id)
            del model.zone[entry_id]
        _check(group, model, now, rng)


def test_force_creates_an_entry_counted_zero_in_every_mode() -> None:
    for mode, count in ((b"SILENT", 0), (b"FAIL", 0), (b"FATAL", LLONG_MAX)):
        group = ConsumerGroup(0)
        assert claim.nack(group, 5 << 64, mode, None, False) is None
        assert claim.nacked_count(group) == 0
        pending = claim.nack(group, 5 << 64, mode, None, True)
        assert (pending.consumer, pending.delivery_time, pending.delivery_count) == (None, 0, count)
        assert list(group.nacked) == [5 << 64] and claim.nacked_count(group) == 1
    assert claim.next_count(LLONG_MAX) == LLONG_MAX and claim.next_count(3) == 4
