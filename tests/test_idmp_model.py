"""storage/idmp.py's Idmp directly against a model (issue 27, README "Mutation testing").

tests/test_idmp.py drives IDMP through an in-process server and reads XINFO's
counters; the hint that decides when expiry runs (`oldest_ms`, a lower bound
of the tracked entry IDs' ms) and the snapshot round trip were left unguarded.
Here seeded random record / configure / expire calls at random
times are compared with a model of per-producer FIFOs, and after each step:

- expiry_due(now) answers the threshold whenever some tracked iid is due
  (a hint that is too high would keep expired iids forever), and None while
  nothing is tracked;
- expire(threshold) removes exactly the due iids at each FIFO's front;
- configure() says whether the limits changed (only then the server
  propagates them) and forgets every iid only then;
- Idmp.load(dump()) gives the same limits, maps, counters and a sound hint,
  with entry IDs stored as 16 big-endian bytes.
"""

from __future__ import annotations

import random

import pytest

from storage.idmp import DEFAULT_DURATION, DEFAULT_MAXSIZE, Idmp


class Model:
    def __init__(self, duration: int, maxsize: int) -> None:
        self.duration, self.maxsize = duration, maxsize
        self.fifos: dict[bytes, list[tuple[bytes, int]]] = {}
        self.added = 0

    def record(self, pid: bytes, iid: bytes, entry_id: int) -> None:
        fifo = self.fifos.setdefault(pid, [])
        fifo.append((iid, entry_id))
        del fifo[: max(len(fifo) - self.maxsize, 0)]
        self.added += 1

    def due(self, before_ms: int) -> bool:
        return any(entry_id >> 64 < before_ms for fifo in self.fifos.values() for _, entry_id in fifo)

    def expire(self, before_ms: int) -> int:
        removed = 0
        for pid in list(self.fifos):
            fifo = self.fifos[pid]
            while fifo and fifo[0][1] >> 64 < before_ms:
                fifo.pop(0)
                removed += 1
            if not fifo:
                del self.fifos[pid]
        return removed

    def maps(self) -> dict[bytes, dict[bytes, int]]:
        return {pid: dict(fifo) for pid, fifo in self.fifos.items()}


def _check(idmp: Idmp, model: Model, now: int) -> None:
    assert idmp.producers == model.maps()
    assert [list(iids.order) for iids in idmp.producers.values()] == [list(iids) for iids in idmp.producers.values()]  # Fifo's deque in step
    assert [list(iids) for iids in idmp.producers.values()] == [[iid for iid, _ in fifo] for fifo in model.fifos.values()]
    assert idmp.tracked == sum(map(len, model.fifos.values()))
    assert idmp.pids_tracked() == len(model.fifos)
    assert (idmp.duration, idmp.maxsize, idmp.iids_added) == (model.duration, model.maxsize, model.added)
    before = now - idmp.duration * 1000
    if model.due(before):
        assert idmp.expiry_due(now) == before
    if not model.fifos:
        assert idmp.expiry_due(now) is None
    if model.fifos:
        assert 0 <= idmp.oldest_ms <= min(entry_id >> 64 for fifo in model.fifos.values() for _, entry_id in fifo)


def _round_trip(idmp: Idmp, model: Model, now: int) -> Idmp:
    state = idmp.dump()
    for _pid, pairs in state["producers"]:
        for _iid, raw in pairs:
            assert type(raw) is bytes and len(raw) == 16
    assert [[pid, [[iid, entry_id.to_bytes(16, "big")] for iid, entry_id in fifo]] for pid, fifo in model.fifos.items()] == state[
        "producers"
    ]
    loaded = Idmp.load(state)
    assert loaded.iids_duplicates == idmp.iids_duplicates
    _check(loaded, model, now)
    return loaded


@pytest.mark.parametrize("seed", range(8))
def test_idmp_matches_the_model(seed: int) -> None:
    rng = random.Random(seed)
    duration, maxsize = rng.choice((1, 2, 5)), rng.choice((1, 2, 3, 6))
    idmp = Idmp(duration, maxsize)
    model = Model(duration, maxsize)
    now = rng.choice((0, 1, 1_700_000_000_000))
    entry_ms = now
    seq = 0
    for _step in range(600):
        now += rng.choice((0, 0, 1, 300, 999, 1000, 1001, 2500))
        roll = rng.random()
        if roll < 0.6:
            if rng.random() < 0.8 or entry_ms >= now:
                seq = seq + 1 if entry_ms == now else 0
                entry_ms = now
            else:
                entry_ms += 1  # an ID ahead of the clock (XADD with an explicit ID)
            entry_id = entry_ms << 64 | seq
            pid = rng.choice((b"p1", b"p2", b"p3"))
            iid = b"%d" % rng.randrange(1_000_000)
            if idmp.lookup(pid, iid) is not None:
                continue
            idmp.record(pid, iid, entry_id)
            model.record(pid, iid, entry_id)
            assert idmp.lookup(pid, iid) == entry_id
        elif roll < 0.85:
            before = idmp.expiry_due(now)
            if before is not None:
                assert idmp.expire(before) == model.expire(before)
            else:
                assert not model.due(now - idmp.duration * 1000)
        elif roll < 0.9:
            new = (rng.choice((model.duration, 1, 3)), rng.choice((model.maxsize, 2, 4)))
            changed = new != (model.duration, model.maxsize)
            assert idmp.configure(*new) is changed
            if changed:
                model.duration, model.maxsize = new
                model.fifos = {}
        elif roll < 0.95:
            idmp = _round_trip(idmp, model, now)
        else:
            threshold = now - rng.choice((0, 500, 1000, 5000))  # XIDMP-style explicit threshold
            assert idmp.expire(threshold) == model.expire(threshold)
        _check(idmp, model, now)


def test_defaults_and_an_empty_round_trip() -> None:
    idmp = Idmp()
    assert (idmp.duration, idmp.maxsize, idmp.tracked) == (DEFAULT_DURATION, DEFAULT_MAXSIZE, 0)
    assert idmp.expiry_due(10**15) is None
    loaded = Idmp.load(Idmp(7, 9).dump())
    assert (loaded.duration, loaded.maxsize, loaded.tracked, loaded.producers) == (7, 9, 0, {})
    assert loaded.expiry_due(10**15) is None
    idmp.record(b"p", b"i", 5 << 64)
    idmp.clear()
    assert idmp.expiry_due(10**15) is None


def test_iids_of_millisecond_zero_expire_on_time() -> None:
    """An entry ID at ms 0 (XADD s 0-1 is valid) gives a hint of 0, which is a hint, not "none tracked":
    recorded, loaded or left at a FIFO's front by expire, it makes expiry due as soon as 0 is too old."""
    idmp = Idmp(1, 10)
    idmp.record(b"p", b"a", 1)  # 0-1
    idmp.record(b"q", b"b", 5000 << 64)
    idmp.record(b"q", b"c", 6000 << 64)
    assert idmp.expiry_due(1000) is None  # 0 is not yet older than 1000 - 1000
    assert idmp.expiry_due(1001) == 1
    assert Idmp.load(idmp.dump()).expiry_due(1001) == 1
    idmp.record(b"p", b"d", 7000 << 64)
    assert idmp.expire(0) == 0  # nothing below 0: the hint is recomputed from the fronts (0 for p)
    assert idmp.expiry_due(1001) == 1
    assert idmp.expire(1) == 1 and idmp.producers[b"p"] == {b"d": 7000 << 64}
    assert idmp.expiry_due(1001) is None and idmp.expiry_due(6001) == 5001
