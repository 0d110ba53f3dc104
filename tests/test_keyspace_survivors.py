"""storage/keyspace.py, scan.py and glob.py against brute-force models: what the second mutation run found unguarded.

The mutation run of storage/ (issue 27, README "Mutation testing") left these
behaviours untested in-process: where a TTL equal to now is still alive
(KEYS, TYPE-style checks, active expiry), which key RANDOMKEY gives back on a
replica after its 100 tries, how many keys one active-expiry cycle removes,
SCAN steps that end in keys of equal hash, SCAN after another iteration or a
FLUSHDB dropped the snapshot, KEYS * with the empty key, and NOCASE patterns.
Each model below is written from Redis's rule, not from Millrace's code, over
seeded random workloads.
"""

from __future__ import annotations

import random
from array import array

import pytest

from storage.glob import compile_pattern, stringmatch, tokens, translate
from storage.keyspace import Database
from storage.scan import HASH_OFFSET, ScanIndex
from tests.test_glob import reference_match

NOW = 1_000_000


@pytest.fixture(autouse=True)
def _fresh_patterns():
    """compile_pattern is cached: a pattern compiled before (by another test) must not hide the matcher's code."""
    compile_pattern.cache_clear()
    yield
    Database.expiry = "delete"


# -- expiry boundaries ---------------------------------------------------------------


class TtlModel:
    """Keys with TTLs as Redis sees them: a key is expired when its time is strictly before now."""

    def __init__(self) -> None:
        self.values: dict[bytes, bytes] = {}
        self.when: dict[bytes, int] = {}
        self.order: list[bytes] = []  # the TTL table's order: set_expire on a new key appends

    def live(self, now: int) -> list[bytes]:
        return [key for key in self.values if not (key in self.when and self.when[key] < now)]


def random_db(rng: random.Random, size: int) -> tuple[Database, TtlModel]:
    db, model = Database(0), TtlModel()
    for i in range(size):
        key = b"k%d" % i if i else b""  # the empty key is a key like any other
        db.set(key, b"v%d" % i)
        model.values[key] = b"v%d" % i
        kind = rng.randrange(4)
        if kind:
            when = NOW + (-1, 0, 1)[kind - 1] * rng.randint(0, 2)
            db.set_expire(key, when)
            model.when[key] = when
            model.order.append(key)
    return db, model


def test_keys_and_is_expired_treat_a_ttl_equal_to_now_as_alive():
    """`when < now` -> `<=` in keys() and is_expired(): a key whose PTTL is 0 vanished from KEYS."""
    rng = random.Random(2701)
    for _ in range(40):
        db, model = random_db(rng, rng.randint(1, 30))
        live = model.live(NOW)
        assert db.keys(b"*", NOW) == live  # dict order, the empty key included
        assert db.keys(b"k1*", NOW) == [key for key in live if key.startswith(b"k1")]
        for key in model.values:
            assert db.is_expired(key, NOW) == (key in model.when and model.when[key] < NOW), key
        assert sorted(db.data) == sorted(model.values)  # KEYS and is_expired remove nothing


def test_keys_star_lists_the_empty_key():
    """`pattern == b"*"` -> another literal: the glob matcher never matches an empty subject, KEYS * must."""
    db = Database(0)
    db.set(b"", b"1")
    db.set(b"a", b"2")
    assert db.keys(b"*", NOW) == [b"", b"a"]
    assert db.keys(b"?", NOW) == [b"a"]


# -- RANDOMKEY ------------------------------------------------------------------------


def model_random_key(keys: list[bytes], expired: set[bytes], rng: random.Random, remove: bool) -> bytes | None:
    """Redis's dbRandomKey: pick uniformly; an expired pick is deleted (primary) and retried; on a
    replica (nothing deleted) the 100th expired pick in a row is returned as it is."""
    keys = list(keys)
    tries = 100
    while keys:
        key = keys[rng.randrange(len(keys))]
        if key not in expired:
            return key
        if remove:
            keys.remove(key)
        tries -= 1
        if not remove and tries == 0:
            return key
    return None


@pytest.mark.parametrize("mode", ["delete", "hide"])
def test_random_key_matches_the_model(mode):
    """`tries = 100` -> 101, `tries -= 2`, `tries == 1`, `tries != 0 and ...`, `or`: on a replica
    RANDOMKEY returned an expired key too early or too late."""
    rng = random.Random(27)
    for round_ in range(60):
        size = rng.randint(0, 12)
        db = Database(0)
        keys = [b"r%d" % i for i in range(size)]
        expired = set()
        for key in keys:
            db.set(key, b"v")
            if rng.random() < (0.95 if round_ % 2 else 0.5):
                db.set_expire(key, NOW - 1)
                expired.add(key)
            else:
                db.set_expire(key, NOW)  # alive: a TTL equal to now
        seed = rng.randrange(1 << 30)
        Database.expiry = mode
        try:
            got = db.random_key(NOW, random.Random(seed))
        finally:
            Database.expiry = "delete"
        assert got == model_random_key(keys, expired, random.Random(seed), mode == "delete"), (round_, mode)
        if mode == "delete" and got is not None:
            assert got not in expired


# -- active expiry ----------------------------------------------------------------------


def model_expire_cycle(model: TtlModel, now: int, per: int = 20, loops: int = 16) -> tuple[list[bytes], bool]:
    """Redis's activeExpireCycle over the TTL table in order: take `per` keys from the front, drop the
    expired ones and move the live ones to the back; go on while more than a quarter of a sample was
    expired, at most `loops` times. Returns the removed keys and whether the last sample was that stale."""
    removed: list[bytes] = []
    stale = False
    for _ in range(loops):
        if not model.order:
            return removed, False
        sample, model.order = model.order[:per], model.order[per:]
        expired = 0
        for key in sample:
            if model.when[key] < now:
                removed.append(key)
                del model.when[key]
                del model.values[key]
                expired += 1
            else:
                model.order.append(key)
        stale = 4 * expired > len(sample)
        if not stale:
            break
    return removed, stale


def test_expire_cycle_matches_the_model():
    """`when < now` -> `<=`, `expired = 1`, `+= 2`, `* 5`, `>=`, `if stale:`, `return removed, True`,
    the defaults 20 and 16: one cron tick removed other keys than Redis's cycle would, or said the
    keyspace was still stale when nothing was left."""
    rng = random.Random(16)
    for _ in range(80):
        db, model = Database(0), TtlModel()
        size = rng.choice([0, 1, 5, 19, 20, 21, 40, 80, 200, 400])
        share = rng.random()
        for i in range(size):
            key = b"e%d" % i
            db.set(key, b"v")
            model.values[key] = b"v"
            when = NOW + rng.choice([-5, -1]) if rng.random() < share else NOW + rng.choice([0, 0, 1, 9])
            db.set_expire(key, when)
            model.when[key] = when
            model.order.append(key)
        for tick in range(rng.randint(1, 6)):
            now = NOW + tick
            got = db.expire_cycle(now)
            want = model_expire_cycle(model, now)
            assert got == want, (size, share, tick)
            assert sorted(db.data) == sorted(model.values)
            assert db.expires == model.when


def test_expire_cycle_with_everything_expired_reports_nothing_left_stale():
    """`return removed, False` -> True when the table empties: the caller kept spending time on nothing."""
    db = Database(0)
    for i in range(30):
        db.set(b"x%d" % i, b"v")
        db.set_expire(b"x%d" % i, NOW - 1)
    removed, stale = db.expire_cycle(NOW)
    assert sorted(removed) == sorted(b"x%d" % i for i in range(30))
    assert stale is False and not db.data


# -- SCAN ---------------------------------------------------------------------------------


class Colliding:
    """A key whose hash the test chooses, so that equal hashes can be arranged."""

    def __init__(self, name: str, value: int) -> None:
        self.name, self.value = name, value

    def __hash__(self) -> int:
        return self.value

    def __repr__(self) -> str:
        return self.name


def test_scan_steps_ending_in_equal_hashes_finish_the_iteration():
    """`end < total` -> `<=` and `end >= total` -> `>` (IndexError), and `return 0` -> 1 (never ends)
    when the keys of equal hash that a step must not split are the last ones."""
    rng = random.Random(5)
    for _ in range(200):
        hashes = sorted(rng.choice([1, 2, 3, 7, 7, 7]) for _ in range(rng.randint(1, 9)))
        data = {Colliding(f"c{i}", h): None for i, h in enumerate(hashes)}
        index = ScanIndex(data)
        for count in range(1, len(hashes) + 2):
            cursor, seen, steps = 0, [], 0
            while True:
                cursor, keys = index.step(cursor, count)
                seen.extend(keys)
                steps += 1
                assert steps <= len(hashes) + 1
                hs = [hash(k) for k in keys]
                if cursor:
                    assert all(h < cursor - HASH_OFFSET for h in hs)  # everything below the cursor
                    assert len(keys) >= count
                if cursor == 0:
                    break
            assert sorted(seen, key=lambda k: k.name) == sorted(data, key=lambda k: k.name), (hashes, count)


def test_scan_steps_are_bounded_by_count():
    """`array("q", map(hash, keys))` -> empty: every SCAN answered all keys in one step with cursor 0."""
    db = Database(0)
    for i in range(500):
        db.set(b"s%d" % i, b"v")
    cursor, steps, found = 0, 0, []
    while True:
        cursor, keys = db.scan(cursor, 10, NOW)
        found.extend(keys)
        steps += 1
        assert len(keys) <= 10 + 2  # a step returns count keys, plus any sharing the last one's hash
        if cursor == 0:
            break
    assert steps >= 40 and sorted(found) == sorted(db.data)


def test_scan_zero_takes_a_fresh_snapshot():
    """`cursor == 0` -> `!= 0` or `== 1`: a new SCAN 0 reused the snapshot of an unfinished iteration
    and missed a key present for the whole new iteration."""
    db = Database(0)
    for i in range(50):
        db.set(b"a%d" % i, b"v")
    db.scan(0, 5, NOW)  # an iteration left unfinished
    db.set(b"late", b"v")
    cursor, found = 0, []
    while True:
        cursor, keys = db.scan(cursor, 5, NOW)
        found.extend(keys)
        if cursor == 0:
            break
    assert b"late" in found and set(found) == set(db.data)


def test_scan_continues_after_another_iteration_finished_or_a_flush():
    """`self.scan_index = None` -> "" after an iteration ends or FLUSHDB: a client still mid-iteration
    (its cursor from before) crashed the next SCAN."""
    rng = random.Random(9)
    db = Database(0)
    for i in range(300):
        db.set(b"b%d" % i, b"v")
    slow_cursor, slow_found = db.scan(0, 3, NOW)
    quick = 0
    while True:  # another client's whole iteration, in big steps
        quick, _ = db.scan(quick, 100, NOW)
        if quick == 0:
            break
    while slow_cursor:
        slow_cursor, keys = db.scan(slow_cursor, rng.randint(1, 40), NOW)
        slow_found.extend(keys)
    assert sorted(slow_found) == sorted(db.data)
    cursor, _ = db.scan(0, 3, NOW)
    db.flush()
    db.set(b"after", b"v")
    rest = []
    while cursor:
        cursor, keys = db.scan(cursor, 50, NOW)
        rest.extend(keys)
    assert set(rest) <= {b"after"}


# -- NOCASE patterns --------------------------------------------------------------------------


def reference_nocase(pattern: bytes, subject: bytes) -> bool:
    return reference_match(pattern, subject, nocase=True)


def random_pattern(rng: random.Random) -> bytes:
    """Literals, `?`, `*` and sets (plain members, ranges either way round, escapes), often unclosed."""
    edges = b"aAzZbB@[`{_-^]\\"
    out = bytearray()
    for _ in range(rng.randint(0, 4)):
        kind = rng.randrange(5)
        if kind == 0:
            out += bytes([rng.choice(edges)])
        elif kind == 1:
            out += rng.choice([b"?", b"*", b"\\A", b"\\a"])
        else:
            out += b"[" + (b"^" if rng.random() < 0.3 else b"")
            for _ in range(rng.randint(0, 3)):
                shape = rng.randrange(3)
                if shape == 0:
                    out += bytes([rng.choice(edges)])
                elif shape == 1:
                    out += bytes([rng.choice(edges), 45, rng.choice(edges)])
                else:
                    out += bytes([92, rng.choice(edges)])
            if rng.random() < 0.8:
                out += b"]"
    return bytes(out)


def test_nocase_patterns_match_the_model():
    """_set_class's case folding, its letter bounds and `tolower`, and the literal's `[xX]` in tokens():
    CONFIG GET and COMMAND LIST FILTERBY PATTERN matched other names than Redis for letters and sets."""
    rng = random.Random(2711)
    subjects = b"aAzZbB@[`{_-^]\\"
    for _ in range(8000):
        pattern = random_pattern(rng)
        subject = bytes(rng.choice(subjects) for _ in range(rng.randint(0, 3)))
        assert stringmatch(pattern, subject, nocase=True) == reference_nocase(pattern, subject), (pattern, subject)
        assert stringmatch(pattern, subject) == reference_match(pattern, subject), (pattern, subject)


def test_nocase_ranges_order_then_lower_their_bounds_like_redis():
    """Found by the model above: Millrace folded case after building the range, so `[A-z]` matched `[`
    and `[Z-a]` matched `b`, and an escaped `\\A` in a set matched `a`; Redis lowers the ordered bounds."""
    assert not stringmatch(b"[A-z]", b"[", nocase=True) and stringmatch(b"[A-z]", b"Q", nocase=True)
    assert not stringmatch(b"[Z-a]", b"b", nocase=True) and not stringmatch(b"[Z-a]", b"[", nocase=True)
    assert stringmatch(b"[^Z-a]", b"[", nocase=True)
    assert not stringmatch(b"[\\A]", b"a", nocase=True) and stringmatch(b"[\\A]", b"A", nocase=True)
    assert stringmatch(b"[A-z]", b"[") and stringmatch(b"[Z-a]", b"[")  # without NOCASE: the bytes between


def test_nocase_ranges_cover_every_letter_both_ways():
    """The letter bounds 65..90 and 97..122 of the case folding, at each end of both ranges."""
    for lo, hi in ((ord("A"), ord("Z")), (ord("a"), ord("z"))):
        for b in (lo, lo + 1, hi - 1, hi):
            for pattern in (bytes([b]), b"[%c]" % b, b"[%c-%c]" % (b, b), b"[^%c]" % b):
                for subject in (bytes([b]), bytes([b ^ 0x20]), bytes([b - 1]), bytes([b + 1])):
                    want = reference_nocase(pattern, subject)
                    assert stringmatch(pattern, subject, nocase=True) == want, (pattern, subject)


def test_sets_of_several_members_match_only_their_members():
    """`"".join` -> `"XXXX".join` of a set's members, `if lo == hi` forced to a range: `[ab]` matched X."""
    for nocase in (False, True):
        assert stringmatch(b"[ab]", b"a", nocase) and stringmatch(b"[ab]", b"b", nocase)
        assert not stringmatch(b"[ab]", b"X", nocase)
        assert not stringmatch(b"[^ab]", b"a", nocase) and stringmatch(b"[^ab]", b"X", nocase)


def test_translate_defaults_to_case_sensitive_and_keeps_nocase():
    """translate()/tokens() defaults `nocase=False` -> True, and nocase passed on (not dropped) to tokens()."""
    assert tokens(b"A") == ["\\x41"]
    assert translate(b"A") == "\\x41"
    assert translate(b"A", True) == "[\\x41\\x61]"
    assert translate(b"[A]", True) == "[\\x41\\x61]"


def test_runs_of_stars_cost_one_star_like_redis():
    """Star runs collapsed (`== 42` -> 43): 2000 stars in a row are one star for Redis's recursion limit."""
    assert stringmatch(b"*" * 2000 + b"a", b"xa")
    assert stringmatch(b"a" + b"*" * 2000 + b"b", b"ab")


def test_many_patterns_do_not_share_a_cached_mistake():
    """The same pattern compiled with and without NOCASE are different matchers."""
    assert stringmatch(b"ab", b"AB", nocase=True)
    assert not stringmatch(b"ab", b"AB")
    assert stringmatch(b"[a-c]", b"B", nocase=True)
    assert not stringmatch(b"[a-c]", b"B")


def test_scan_index_keeps_the_hashes_it_sorted_by():
    index = ScanIndex({b"x%d" % i: None for i in range(64)})
    assert list(index.hashes) == sorted(map(hash, index.keys))
    assert index.hashes == array("q", map(hash, index.keys))


# -- small rules the run found unguarded ----------------------------------------------------------


def test_type_names_as_the_type_command_reports_them():
    """type_name's default (`"none"` -> None, `"NONE"`...): TYPE of a missing key is `none`."""
    from storage.keyspace import type_name
    from storage.stream import Stream

    assert (type_name(None), type_name(b"v"), type_name(Stream())) == ("none", "string", "stream")


def test_lookup_type_expires_a_key_past_its_ttl():
    """lookup_type's `if self.expires` turned off: a command on an expired stream saw the old value."""
    from protocol.errors import ReplyError
    from storage.stream import Stream

    db = Database(0)
    db.set(b"s", Stream())
    db.set(b"k", b"v")
    db.set_expire(b"s", NOW - 1)
    assert db.lookup_type(b"s", NOW, Stream) is None and b"s" not in db.data and db.expired == [b"s"]
    with pytest.raises(ReplyError):
        db.lookup_type(b"k", NOW, Stream)


def test_set_keep_ttl_keeps_it_and_plain_set_drops_it():
    """set()'s `not keep_ttl and self.expires` (-> or): SET ... KEEPTTL lost the key's TTL."""
    db = Database(0)
    db.set(b"k", b"1")
    db.set_expire(b"k", NOW + 50)
    db.set(b"k", b"2", keep_ttl=True)
    assert db.ttl(b"k") == NOW + 50
    db.set(b"k", b"3")
    assert db.ttl(b"k") is None and db.data[b"k"] == b"3"


def test_sixteen_databases_by_default():
    """Keyspace's default (16 -> 17): Redis's `databases 16`."""
    from storage.keyspace import Keyspace

    assert len(Keyspace()) == 16


def test_scan_with_a_cursor_on_a_fresh_database():
    """Database's scan_index starting as None (-> ""): SCAN with a cursor from before a restart crashed."""
    db = Database(0)
    for i in range(20):
        db.set(b"c%d" % i, b"v")
    cursor, found = 1 << 62, []
    while True:
        cursor, keys = db.scan(cursor, 5, NOW)
        found.extend(keys)
        if cursor == 0:
            break
    assert set(found) <= set(db.data)
