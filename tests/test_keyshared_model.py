"""KEYSHARED groups against their contract, over random workloads (seeded), checked after every step.

An in-process Server runs XADD with a few hundred keys (some entries without
the key field), `>` reads from a changing set of consumers, XACK, XCLAIM,
XAUTOCLAIM, XDEL, explicit leaves, DELCONSUMER and session timeouts as the
clock moves. After every step:

- one owner per key among pending entries;
- a consumer's first `>` deliveries of a key come in stream order (within
  one membership: a leave starts a new one; re-deliveries of what a leave
  released are exempt, since a claim may have reordered them);
- nothing is lost or doubled: every live entry up to the cursor is pending,
  deferred or acknowledged, never two of these, and an entry is delivered
  twice by `>` only after its consumer left and released it;
- a read that returned fewer entries than it asked for left nothing that a
  brute-force model says it could have had (a stalled consumer blocks only
  its own keys).

The propagated effects, replayed into a fresh server, rebuild the same state
(ring, PEL index, deferred set included), and so does a snapshot round trip.
"""

from __future__ import annotations

import random

import hiredis
import msgpack
import pytest

import server.commands  # noqa: F401  (registers the command table)
from protocol.reply import NULL_ARRAY, Error
from server.client import Client
from server.commands.keyshared import _deferred_of as deferred_of
from server.rewrite import keyspace_commands
from server.server import Server
from storage.consumer_group import dump_groups, load_groups
from storage.keyshared import NONE_KEY, point_hashes, sticky_hash
from storage.keyshared_deferred import FREE
from storage.stream import Stream
from storage.stream_id import MAX_ID, format_id, parse_strict_id
from tests.test_group_effects import assert_pels_counted, dump, replay

KEY, GROUP = b"s", b"g"
KEYS = [b"k%d" % i for i in range(300)]
CONSUMERS = [b"c%d" % i for i in range(6)]


def items_of(reply) -> list:
    """A `>` read's entries for the stream: a plain read's reply items come pre-encoded (Raw), a CLAIM read's as values."""
    if reply is NULL_ARRAY:
        return []
    items = reply[0][1]
    if isinstance(items, bytes):
        reader = hiredis.Reader()
        reader.feed(items)
        items = reader.gets()
    return items


def owner_of(pending) -> bytes | None:
    """A pending entry's consumer name; None in the NACK zone."""
    return pending.consumer.name if pending.consumer is not None else None


def keyshared_state(srv: Server) -> dict:
    """dump() plus every KEYSHARED group's configuration, ring, PEL index and deferred set (NACKed entries too)."""
    nacked = {}
    for db in srv.keyspace.dbs:  # dump() names every owner: NACKed entries are listed here instead
        for key, value in db.data.items():
            if isinstance(value, Stream):
                for name, group in value.groups.items():
                    nacked[(db.id, key, name)] = [(i, p.delivery_time, p.delivery_count) for i, p in group.pel.items() if p.consumer is None]
                    nobody = _Nobody(group.pel)
                    for i in [i for i, p in group.pel.items() if p.consumer is None]:
                        group.pel.entries[i].consumer = nobody
    try:
        state = dump(srv)
    finally:
        for db in srv.keyspace.dbs:
            for value in db.data.values():
                if isinstance(value, Stream):
                    for group in value.groups.values():
                        for p in group.pel.entries.values():
                            if type(p.consumer) is _Nobody:
                                p.consumer = None
    state["nacked"] = nacked
    for db in srv.keyspace.dbs:
        for key, value in db.data.items():
            if isinstance(value, Stream):
                for name, group in value.groups.items():
                    ks = group.keyshared
                    state[(db.id, key)]["groups"][name]["keyshared"] = None if ks is None else (
                        ks.field, ks.session_timeout, ks.lookahead, list(ks.ring.members),
                        sorted(ks.pel_hash.items()), sorted(ks.pending_hashes().items()), sorted(ks.holders().items()), sorted(ks.draining().items()),
                        sorted(ks.deferred.items()), {n: list(q) for n, q in ks.queues.items() if q},
                        {n: deferred_of(ks, n) for n in ks.ring.members},  # by owner bytes: their table is the ring's
                    )  # fmt: skip
    return state


class _Nobody:
    """Stands in for a NACKed entry's missing owner while dump() lists the PEL (its PEL: the group's)."""

    def __init__(self, pel) -> None:
        self.name = None
        self.pel = pel


def brute_owner(members: list[bytes], hash_value: int) -> bytes | None:
    """The ring's answer, by brute force: the first point >= hash (wrapping), the first joiner on a collision."""
    best = None
    for name in members:
        for point in point_hashes(name):
            rank = (point < hash_value, point)  # points >= hash first, then the wrapped ones
            if best is None or rank < best[0]:
                best = (rank, name)
    return best[1] if best else None


class Model:
    def __init__(self, seed: int, timeout: int = 4000, deletes: bool = True) -> None:
        self.rng = random.Random(seed)
        self.deletes = deletes
        self.server = Server()
        self.server.now = 1_700_000_000_000
        self.client = Client(self.server)
        self.batches: list = []
        self.server.effect_listeners.append(self.batches.append)
        self.key_of: dict[int, bytes] = {}  # every entry ever added -> its key
        self.acked: set[int] = set()
        self.last_seen: dict[tuple[bytes, bytes], int] = {}  # (consumer, key) -> last `>` delivery
        self.delivered: dict[int, bytes] = {}  # id -> consumer it was last given to by `>`
        self.released: set[int] = set()  # given back by a leave since their last `>` delivery
        self.hot = self.rng.sample(KEYS, 20)
        self.stuck = self.rng.choice(CONSUMERS)  # reads but never acknowledges
        self.run("XGROUP", "CREATE", KEY, GROUP, "0", "MKSTREAM", "KEYSHARED", "key")
        self.run("XGROUP", "SETCONFIG", KEY, GROUP, "SESSION-TIMEOUT", timeout, "LOOKAHEAD", self.rng.choice([0, 40, 400]))

    def run(self, *argv):
        argv = [a if isinstance(a, bytes) else str(a).encode() for a in argv]
        members_before = list(self.group().keyshared.ring.members) if self.group() else []
        pending_before = {i: owner_of(p) for i, p in self.group().pel.items()} if self.group() else {}
        reply = self.server.execute(self.client, argv)
        assert type(reply) is not Error, (argv, reply)
        group = self.group()
        if group is not None:
            leavers = set(members_before) - set(group.keyshared.ring.members)
            for name in leavers:
                self.left(name)
            if argv[0] == b"XGROUP":
                leavers.add(argv[4])
            after = group.pel
            self.released |= {  # given back by a leave (and maybe delivered again by this very read)
                i for i, owner in pending_before.items() if owner in leavers and (i not in after or owner_of(after[i]) != owner)
            }
        return reply

    def left(self, name: bytes) -> None:
        """A leave (explicit, DELCONSUMER, or a timeout decided in someone's read): a new membership."""
        for consumer, key in list(self.last_seen):
            if consumer == name:
                del self.last_seen[(consumer, key)]

    def stream(self) -> Stream:
        return self.client.db.data[KEY]

    def group(self):
        stream = self.client.db.data.get(KEY)
        return stream.groups.get(GROUP) if stream is not None else None

    # -- steps ---------------------------------------------------------------------

    def step(self) -> None:
        rng = self.rng
        self.server.now += rng.choice([0, 1, 10, 300, 1500])
        consumer = rng.choice(CONSUMERS)
        roll = rng.random()
        if roll < 0.35:
            for _ in range(rng.randint(1, 8)):
                key = rng.choice(self.hot) if rng.random() < 0.5 else rng.choice(KEYS)
                if rng.random() < 0.05:
                    entry_id = self.run("XADD", KEY, "*", "other", "x")
                    key = NONE_KEY
                else:
                    entry_id = self.run("XADD", KEY, "*", "key", key, "n", len(self.key_of))
                self.key_of[parse_strict_id(entry_id)] = key
        elif roll < 0.65:
            self.read(consumer, rng.choice([1, 3, 10, 0]))
        elif roll < 0.80:
            group = self.group()
            mine = [i for i, p in group.pel.items() if owner_of(p) == consumer and consumer != self.stuck]
            if mine:
                ids = rng.sample(mine, rng.randint(1, min(len(mine), 6)))
                self.run("XACK", KEY, GROUP, *[format_id(i) for i in ids])
                self.acked |= set(ids)
        elif roll < 0.85:
            self.run("XGROUP", rng.choice(["LEAVE", "LEAVE", "DELCONSUMER"]), KEY, GROUP, consumer)
        elif roll < 0.91:
            pel = list(self.group().pel.keys())
            if pel:
                ids = rng.sample(pel, min(len(pel), rng.randint(1, 3)))
                self.run("XCLAIM", KEY, GROUP, consumer, rng.choice([0, 1000]), *[format_id(i) for i in ids], *rng.choice([[], ["JUSTID"]]))
        elif roll < 0.935:
            self.run("XAUTOCLAIM", KEY, GROUP, consumer, rng.choice([0, 1000]), "0", "COUNT", rng.randint(1, 4))
        elif roll < 0.95:  # XNACK: the key's pending entries go to the NACK zone together
            pel = list(self.group().pel.keys())
            if pel:
                self.run("XNACK", KEY, GROUP, rng.choice(["SILENT", "FAIL"]), "IDS", 1, format_id(rng.choice(pel)))
        elif roll < 0.97 and self.key_of and self.deletes:
            self.run("XDEL", KEY, format_id(rng.choice(list(self.key_of))))
        else:
            self.server.now += 5000  # long enough for session timeouts

    def read(self, consumer: bytes, count: int) -> None:
        options = ["COUNT", count] if count else []
        if self.rng.random() < 0.15:  # Redis 8.10's MAXCOUNT (>= COUNT) caps a read without COUNT
            cap = self.rng.randint(count or 1, (count or 1) + 3)
            options += ["MAXCOUNT", cap]
            count = count or cap
        claim = self.rng.random() < 0.1  # Redis 8.4's CLAIM: idle pending entries first (their keys whole)
        if claim:
            options += ["CLAIM", self.rng.choice([0, 2000])]
        reply = self.run("XREADGROUP", "GROUP", GROUP, consumer, *options, "STREAMS", KEY, ">")
        items = items_of(reply)
        got = [parse_strict_id(item[0]) for item in items]
        new = [parse_strict_id(item[0]) for item in items if not claim or (item[2] == 0 and item[3] == 0)]
        assert new == sorted(new)
        for entry_id in new:
            key = self.key_of[entry_id]
            if entry_id in self.delivered:
                # a re-delivery of what a leave released (order after a claim is not promised)
                assert entry_id in self.released, "delivered twice without a release"
                self.released.discard(entry_id)
            else:
                last = self.last_seen.get((consumer, key))
                assert last is None or entry_id > last, f"{consumer} got {key} out of order"
                self.last_seen[(consumer, key)] = entry_id
            self.delivered[entry_id] = consumer
        if not count or len(got) < count:
            assert not self.deliverable(consumer), "a read left entries it could have had"

    # -- the contract ----------------------------------------------------------------

    def deliverable(self, consumer: bytes) -> list[int]:
        """By brute force: the oldest undelivered entry of each key whose hash the ring gives to consumer
        and no other consumer has pending (entries past the cursor only while the look-ahead has room)."""
        group = self.group()
        ks = group.keyshared
        stream = self.stream()
        candidates = set(ks.deferred)
        if len(ks.deferred) < ks.lookahead_limit():
            candidates |= {i for i, _ in stream.range(group.last_id + 1, MAX_ID)} - set(group.pel.keys())
        holders: dict[bytes, set[bytes]] = {}
        for entry_id, pending in group.pel.items():
            holders.setdefault(self.key_of[entry_id], set()).add(owner_of(pending))
        oldest: dict[bytes, int] = {}
        for entry_id in sorted(candidates):
            oldest.setdefault(self.key_of[entry_id], entry_id)
        out = []
        for key, entry_id in oldest.items():
            if stream.get(entry_id) is None:
                continue
            if brute_owner(ks.ring.members, sticky_hash(key)) == consumer and holders.get(key, {consumer}) <= {consumer}:
                out.append(entry_id)
        return out

    def check(self) -> None:
        group = self.group()
        ks = group.keyshared
        stream = self.stream()
        owners: dict[bytes, set[bytes]] = {}
        for entry_id, pending in group.pel.items():
            owners.setdefault(self.key_of[entry_id], set()).add(owner_of(pending))
            assert ks.pel_hash[entry_id] == sticky_hash(self.key_of[entry_id])
        assert all(len(names) == 1 for names in owners.values()), "a key pending at two consumers"
        assert_pels_counted(self.server)  # the PEL lists' bookkeeping (deliveries insert older IDs in place)
        assert len(ks.pel_hash) == len(group.pel)
        pending = set(group.pel.keys())
        deferred = set(ks.deferred)
        assert not pending & deferred and not pending & self.acked and not deferred & self.acked
        for entry_id, _fields in stream.range(0, group.last_id):
            assert entry_id in pending or entry_id in deferred or entry_id in self.acked, f"{format_id(entry_id)} lost"
        assert len(deferred - self.released) <= ks.lookahead_limit()  # a leave's release may overshoot, a scan never
        # deferred entries lie at or below the cursor, so a read's deliveries (step 1's, then the scan's) are in ID order
        assert all(entry_id <= group.last_id for entry_id in deferred)
        for block in ks.deferred.blocks:  # memory follows the set: a position no longer deferred keeps no reply item
            assert all(w is None for w, o in zip(block.wires, block.owners, strict=True) if o == FREE)
        queued = sorted(i for q in ks.queues.values() for i in q)
        assert queued == sorted(deferred)
        for name, queue in ks.queues.items():
            assert queue == sorted(queue)
            assert all(ks.ring.select(ks.deferred[i]) == name for i in queue)
        queues = ks.queues
        for name in ks.ring.members:  # XINFO KEYSHARED's per-consumer count, by owner bytes
            assert deferred_of(ks, name) == len(queues.get(name, ()))


@pytest.mark.parametrize("seed", range(12))
def test_contract_holds_at_every_step_and_effects_replay(seed):
    model = Model(seed)
    for step in range(300):
        model.step()
        model.check()
        if step % 60 == 59:
            assert keyshared_state(replay(model.batches, model.server.now)) == keyshared_state(model.server)
    # a snapshot round trip keeps every piece of KEYSHARED state
    stream = model.stream()
    copy = Stream.load(msgpack.unpackb(msgpack.packb(stream.dump()), raw=False))
    copy.groups = load_groups(msgpack.unpackb(msgpack.packb(dump_groups(stream.groups), use_bin_type=True), raw=False))
    fresh = Server()
    fresh.now = model.server.now
    fresh.keyspace.dbs[0].data[KEY] = copy
    assert keyshared_state(fresh) == keyshared_state(model.server)
    # an AOF rewrite without the snapshot preamble (the keyspace as commands) keeps the configuration,
    # ring and deferred set (deleted deferred entries too); pending entries of deleted entries are dropped
    # by any group's rewrite (XCLAIM drops them, as in Redis): see the test below for the whole state
    rewritten = replay([list(keyspace_commands(model.server.keyspace))], model.server.now)

    def kept(srv):
        ks = srv.keyspace.dbs[0].data[KEY].groups[GROUP].keyshared
        return ks.field, ks.session_timeout, ks.lookahead, ks.ring.members, sorted(ks.deferred.items())

    assert kept(rewritten) == kept(model.server)


@pytest.mark.parametrize("seed", range(3))
def test_an_aof_rewrite_rebuilds_the_same_state(seed):
    model = Model(seed, deletes=False)
    for _ in range(300):
        model.step()
    rewritten = replay([list(keyspace_commands(model.server.keyspace))], model.server.now)
    assert keyshared_state(rewritten) == keyshared_state(model.server)


def test_every_consumer_drains_everything_in_the_end():
    """Once the stuck consumer leaves and everyone reads and acknowledges, nothing is left behind."""
    model = Model(99)
    for _ in range(300):
        model.step()
    model.run("XGROUP", "LEAVE", KEY, GROUP, model.stuck)
    for _ in range(200):
        for consumer in CONSUMERS:
            if consumer == model.stuck:
                continue
            model.read(consumer, 10)
            mine = [i for i, p in model.group().pel.items() if owner_of(p) == consumer]
            if mine:
                model.run("XACK", KEY, GROUP, *[format_id(i) for i in mine])
                model.acked |= set(mine)
            model.check()
        if not model.group().pel and not model.group().keyshared.deferred and model.group().last_id >= model.stream().last_id:
            break
    group = model.group()
    assert not group.pel and not group.keyshared.deferred
    live = {i for i, _ in model.stream().range(0, MAX_ID)}
    assert live <= model.acked


def reference_take(stream, state, name, limit, caps, extra, taken, held, gone) -> int:
    """read_new's step 1 by brute force (no owner bytes, blocks or cursors): the deferred entries in ID
    order whose hash the ring gives to name, a hash draining elsewhere held with its later entries."""
    from server.commands.keyshared import _wire_item

    select = state.ring.select
    holders = state.holders()  # every pending hash -> the consumer holding it
    for entry_id, h in list(state.deferred.items()):
        if len(taken.ids) >= limit:
            break
        if select(h) != name:
            continue
        if h in held or (h in holders and holders[h] != name):
            if h not in held:
                held.add(h)
                state.blocked[h] = state.blocked.get(h, 0) + 1
            continue
        flat = stream.get(entry_id)
        if flat is None:
            gone.append(entry_id)
            state.deferred.discard(entry_id)
            continue
        wire_id = format_id(entry_id)
        if caps and not caps.admit(wire_id, flat, extra):
            return len(taken.ids)
        state.deferred.discard(entry_id)
        taken.ids.append(entry_id)
        taken.wids.append(wire_id)
        taken.wires.append(_wire_item(wire_id, flat))
        taken.hashes.append(h)
    return limit


def use_reference_paths(monkeypatch) -> None:
    """read_new with the brute-force step 1 and the per-entry scan (the ring's table, no owner bytes)."""
    import server.commands.keyshared as keyshared

    monkeypatch.setattr(keyshared, "_take_deferred", reference_take)
    monkeypatch.setattr(keyshared, "_scan_fast_applies", lambda *args: False)


@pytest.mark.parametrize("seed", range(3))
def test_the_bulk_paths_decide_as_the_entry_loop(seed, monkeypatch):
    """read_new's bulk take of deferred blocks (owner bytes, consumer cursors) and its node-span scan give
    the same state and effects as its per-entry block walk without cursors, and as a brute-force step 1
    with the per-entry scan."""
    import server.commands.keyshared as keyshared

    outcomes = []
    for mode in ("bulk", "entry", "reference"):
        if mode == "entry":
            monkeypatch.setattr(keyshared, "USE_BULK", False)
            monkeypatch.setattr(keyshared, "USE_CURSORS", False)
            monkeypatch.setattr(keyshared, "_scan_fast_applies", lambda *args: False)
        if mode == "reference":
            use_reference_paths(monkeypatch)
        model = Model(1000 + seed)
        for _ in range(250):
            model.step()
            model.check()
        outcomes.append((keyshared_state(model.server), model.batches))
    assert outcomes[0] == outcomes[1] == outcomes[2]


def test_a_rekey_that_makes_two_pending_keys_one_holds_it_at_nobody():
    """XGROUP SETCONFIG ... KEYSHARED on another field can make the keys of entries pending at two consumers
    one key: it is then pending at nobody (as after XNACK), and no reader gets its new entries until both
    are acknowledged; replayed effects and a snapshot hold the same. (The last consumer indexed used to be
    taken for the key's only holder: it got the new entry while the other still had one pending.)"""
    from storage.keyshared import HashRing

    srv = Server()
    srv.now = 1_700_000_000_000
    client = Client(srv)
    batches: list = []
    srv.effect_listeners.append(batches.append)

    def run(*argv):
        return srv.execute(client, [a if isinstance(a, bytes) else str(a).encode() for a in argv])

    ring = HashRing()
    ring.add(b"A")
    ring.add(b"B")
    key_for = {name: next(b"a%d" % i for i in range(999) if ring.select(sticky_hash(b"a%d" % i)) == name) for name in (b"A", b"B")}
    joint = next(b"k%d" % i for i in range(999) if ring.select(sticky_hash(b"k%d" % i)) == b"B")
    run("XGROUP", "CREATE", KEY, GROUP, "0", "MKSTREAM", "KEYSHARED", "a")
    for name in (b"A", b"B"):
        assert run("XREADGROUP", "GROUP", GROUP, name, "STREAMS", KEY, ">") == NULL_ARRAY  # joins
    first, second = (run("XADD", KEY, "*", "a", key_for[name], "b", joint) for name in (b"A", b"B"))
    assert [i[0] for i in items_of(run("XREADGROUP", "GROUP", GROUP, "A", "STREAMS", KEY, ">"))] == [first]
    assert [i[0] for i in items_of(run("XREADGROUP", "GROUP", GROUP, "B", "STREAMS", KEY, ">"))] == [second]
    assert run("XGROUP", "SETCONFIG", KEY, GROUP, "KEYSHARED", "b") == b"OK"
    third = run("XADD", KEY, "*", "a", key_for[b"A"], "b", joint)
    group = srv.keyspace.dbs[0].data[KEY].groups[GROUP]
    assert group.keyshared.draining() == {sticky_hash(joint): None}
    for name in (b"A", b"B"):
        assert run("XREADGROUP", "GROUP", GROUP, name, "STREAMS", KEY, ">") == NULL_ARRAY
    assert keyshared_state(replay(batches, srv.now)) == keyshared_state(srv)
    stream = srv.keyspace.dbs[0].data[KEY]
    copy = Stream.load(msgpack.unpackb(msgpack.packb(stream.dump()), raw=False))
    copy.groups = load_groups(msgpack.unpackb(msgpack.packb(dump_groups(stream.groups), use_bin_type=True), raw=False))
    fresh = Server()
    fresh.now = srv.now
    fresh.keyspace.dbs[0].data[KEY] = copy
    assert keyshared_state(fresh) == keyshared_state(srv)
    assert run("XACK", KEY, GROUP, first) == 1
    assert run("XREADGROUP", "GROUP", GROUP, "B", "STREAMS", KEY, ">") == NULL_ARRAY  # B still has one
    assert run("XACK", KEY, GROUP, second) == 1
    assert [i[0] for i in items_of(run("XREADGROUP", "GROUP", GROUP, "B", "STREAMS", KEY, ">"))] == [third]
