"""The cheaper idempotent XADD keeps its behaviour: the same iids, the same maps, one exact effect.

A fresh idempotent add to a stream that already tracks iids propagates as one
`XADD key IDMP pid iid <id> field value ...`, which only the AOF loader and a
primary may send: it must leave a replica exactly where the old pair `XADD key
<id> ...` + `XIDMPRECORD key pid iid <id>` left it. IDMPAUTO's unrolled hash
must give the iids older files hold, and the record inlined in the steady state
the maps (and counts) Idmp.record gives.
"""

from __future__ import annotations

import random

import xxhash

import server.commands  # noqa: F401  (registers the handlers)
from server.client import Client, LoadingClient
from server.server import Server
from storage.idmp import auto_iid
from storage.stream import Stream
from tests.servers import start_millrace
from tests.test_idmp import apply, idmp_state
from tests.test_idmp_durability import fields
from tests.test_persistence import kill9


def reference_iid(fields: list[bytes]) -> bytes:
    """The documented formula, computed another way: streamed XXH3-128 of field then value, seeded
    with the field's length, the pair hashes summed modulo 2**128, big-endian."""
    total = 0
    for field, value in zip(fields[0::2], fields[1::2], strict=True):
        h = xxhash.xxh3_128(seed=len(field))
        h.update(field)
        h.update(value)
        total += h.intdigest()
    return (total % (1 << 128)).to_bytes(16, "big")


def test_auto_iid_is_the_formula_and_the_values_older_files_hold():
    rnd = random.Random(21)
    for _ in range(3000):
        pairs = rnd.randrange(1, 7)
        fields = [rnd.randbytes(rnd.randrange(0, 20)) for _ in range(2 * pairs)]
        assert auto_iid(fields) == reference_iid(fields), fields
    # computed by the release before this change (1eacfdc): AOF files and snapshots hold these
    assert auto_iid([b"f", b"v"]).hex() == "a27291d664c23753b62ab431e980268a"
    assert auto_iid([b"sensor-id", b"000000123456", b"temperature", b"10.5"]).hex() == "5c2626be7769da8a4242dfd3d17418ec"
    assert auto_iid([b"a", b"bc", b"ab", b"c", b"", b"x"]).hex() == "a6b5d289ffd69a8238e43dd39eaa9f25"


def test_the_steady_state_hashes_as_auto_iid():
    """xadd_idempotent computes a two-pair IDMPAUTO iid inline: through the server, on a stream that
    already tracks iids (the steady state), each propagated iid is the formula's, and the pinned value."""
    source = Server()
    effects: list[list[bytes]] = []
    source.effect_listeners.append(effects.extend)
    client = Client(source)
    source.clock()
    source.execute(client, [b"XADD", b"s", b"IDMPAUTO", b"p", b"*", b"f", b"v"])  # tracking from here on
    rnd = random.Random(22)
    fresh = 0
    for _ in range(1500):
        fields = [rnd.randbytes(rnd.randrange(0, 12)) for _ in range(2 * rnd.choice((1, 2, 2, 2, 3)))]
        del effects[:]
        reply = source.execute(client, [b"XADD", b"s", b"IDMPAUTO", b"p", b"*", *fields])
        if effects[0][0] == b"XADD":  # (a repeat of an earlier random list propagates its counters)
            assert effects == [[b"XADD", b"s", b"IDMP", b"p", reference_iid(fields), reply, *fields]]
            fresh += 1
    assert fresh > 1400
    del effects[:]
    sensor = [b"sensor-id", b"000000123456", b"temperature", b"10.5"]
    source.execute(client, [b"XADD", b"s", b"IDMPAUTO", b"p", b"*", *sensor])
    assert effects[0][4].hex() == "5c2626be7769da8a4242dfd3d17418ec"  # what older files hold


def run_with_effects(seed: int, steps: int) -> tuple[Server, list[list[bytes]]]:
    """Idempotent XADDs (the usual forms, which take the fast path) with repeats, expiry, small maps."""
    source = Server()
    effects: list[list[bytes]] = []
    source.effect_listeners.append(effects.extend)
    client = Client(source)
    rnd = random.Random(seed)
    source.clock()
    now = source.now
    source.execute(client, [b"XADD", b"tiny", b"*", b"f", b"v"])
    source.execute(client, [b"XCFGSET", b"tiny", b"IDMP-DURATION", b"2", b"IDMP-MAXSIZE", b"3"])
    for step in range(steps):
        now += rnd.choice([0, 1, 7, 400])
        source.now = now
        key = rnd.choice([b"tiny", b"s1", b"s2"])
        pid = rnd.choice([b"p1", b"p2", b"p3"])
        value = b"%d" % rnd.randrange(25)
        if rnd.random() < 0.5:
            argv = [b"XADD", key, b"IDMPAUTO", pid, b"*", b"n", value, b"m", b"x"]
        else:
            argv = [b"XADD", key, b"IDMP", pid, b"i%d" % rnd.randrange(25), b"*", b"n", b"%d" % step]
        reply = source.execute(client, argv)
        assert type(reply) is bytes, (argv, reply)
    return source, effects


def tracked(server: Server) -> dict:
    """Each stream's tracked-iid count as Idmp keeps it (what XINFO's iids-tracked shows)."""
    return {(db.id, key): value.idmp.tracked for db in server.keyspace.dbs for key, value in db.data.items()
            if isinstance(value, Stream) and value.idmp is not None}  # fmt: skip


def as_pairs(effects: list[list[bytes]]) -> list[list[bytes]]:
    """The effects with every `XADD key IDMP pid iid <id> ...` as the old `XADD key <id> ...` + XIDMPRECORD."""
    out = []
    for argv in effects:
        if argv[0] == b"XADD" and argv[2] == b"IDMP":
            key, pid, iid, entry_id = argv[1], argv[3], argv[4], argv[5]
            out += [[b"XADD", key, entry_id, *argv[6:]], [b"XIDMPRECORD", key, pid, iid, entry_id]]
        else:
            out.append(argv)
    return out


def test_the_single_effect_replays_as_the_old_pair():
    for seed in (1, 2, 3):
        source, effects = run_with_effects(seed, 800)
        single = sum(1 for argv in effects if argv[0] == b"XADD" and argv[2] == b"IDMP")
        assert single > 300  # the steady state is the usual case
        assert any(argv[0] == b"XCFGSET" and argv[2] == b"IDMP-EXPIRE" for argv in effects)
        ours = idmp_state(source)  # iids-duplicates too: a repeat propagates its counters (Redis 8.6.2)
        replica, old_form = Server(), Server()
        apply(replica, effects)
        apply(old_form, as_pairs(effects))
        assert idmp_state(replica) == ours
        assert idmp_state(old_form) == ours
        assert tracked(replica) == tracked(old_form) == tracked(source)  # the inlined record counts as record() does


def test_the_steady_state_propagates_one_command_and_counts_one_change():
    source = Server()
    effects: list[list[bytes]] = []
    source.effect_listeners.append(effects.extend)
    client = Client(source)
    source.clock()
    first = source.execute(client, [b"XADD", b"s", b"IDMPAUTO", b"p", b"*", b"a", b"1"])
    assert [argv[0] for argv in effects] == [b"SELECT", b"MULTI", b"XADD", b"XCFGSET", b"XIDMPRECORD", b"EXEC"]
    del effects[:]
    dirty = source.dirty
    second = source.execute(client, [b"XADD", b"s", b"IDMPAUTO", b"p", b"*", b"a", b"2"])
    third = source.execute(client, [b"XADD", b"s", b"IDMP", b"q", b"i", b"*", b"a", b"3"])
    assert effects == [
        [b"XADD", b"s", b"IDMP", b"p", auto_iid([b"a", b"2"]), second, b"a", b"2"],
        [b"XADD", b"s", b"IDMP", b"q", b"i", third, b"a", b"3"],
    ]
    assert source.dirty == dirty + 2  # one change per XADD, as Redis counts it
    assert source.execute(client, [b"XADD", b"s", b"IDMPAUTO", b"p", b"*", b"a", b"1"]) == first
    assert effects[2:] == [[b"XCFGSET", b"s", b"IIDS-ADDED", b"3", b"IIDS-DUPLICATES", b"1"]]  # a repeat: its counters
    assert source.dirty == dirty + 3  # and one change, as Redis 8.6.2 counts it (redis#14858)


def test_the_effect_form_is_refused_to_clients_and_checked_for_loaders():
    source = Server()
    client, loader = Client(source), LoadingClient(source)
    source.clock()
    refused = source.execute(client, [b"XADD", b"s", b"IDMP", b"p", b"i", b"5-1", b"f", b"v"])
    assert bytes(refused).startswith(b"ERR IDMP/IDMPAUTO can be used only with auto-generated IDs")
    assert source.keyspace.dbs[0].data.get(b"s") is None
    # from a loader, on a missing key: the entry and its iid, with this server's limits
    assert source.execute(loader, [b"XADD", b"s", b"IDMP", b"p", b"i", b"5-1", b"f", b"v"]) == b"5-1"
    stream = source.keyspace.dbs[0].data[b"s"]
    assert stream.idmp.lookup(b"p", b"i") == (5 << 64) | 1 and stream.idmp.maxsize == 100
    for argv, error in [
        ([b"XADD", b"s", b"IDMP", b"p", b"i", b"6-1", b"f", b"v"], b"ERR The pid/iid pair is already mapped to a different stream ID"),
        ([b"XADD", b"s", b"IDMP", b"", b"j", b"6-1", b"f", b"v"], b"ERR IDMP requires a non-empty producer ID"),
        ([b"XADD", b"s", b"IDMP", b"p", b"", b"6-1", b"f", b"v"], b"ERR IDMP requires a non-empty idempotent ID"),
        ([b"XADD", b"s", b"IDMP", b"p", b"j", b"5-1", b"f", b"v"], b"ERR The ID specified in XADD is equal or smaller"),
        ([b"XADD", b"s", b"IDMP", b"p", b"j", b"bad", b"f", b"v"], b"ERR Invalid stream ID"),
    ]:
        reply = source.execute(loader, argv)
        assert bytes(reply).startswith(error), (argv, reply)
    assert len(stream) == 1 and stream.idmp.tracked == 1  # nothing changed


def test_the_aof_holds_one_command_per_add_and_restarts_to_the_same_maps(tmp_path):
    args = ("--appendonly", "yes", "--appendfsync", "always", "--save", "")
    proc = start_millrace(*args, workdir=str(tmp_path))
    try:
        client = proc.client()
        ids = [client.execute_command("XADD", "s", "IDMPAUTO", "p", "*", "n", i) for i in range(20)]
        ids.append(client.execute_command("XADD", "s", "IDMP", "q", "order-1", "*", "n", "x"))
        incr = b"".join(path.read_bytes() for path in (tmp_path / "appendonlydir").glob("*.incr.aof"))
        assert incr.count(b"MULTI") == 1  # the stream's first iid only (XADD, XCFGSET, XIDMPRECORD)
        assert incr.count(b"$11\r\nXIDMPRECORD") == 1 and incr.count(b"$4\r\nIDMP\r\n") == 20
        kill9(proc)
        proc = start_millrace(*args, workdir=str(tmp_path), port=proc.port)
        client = proc.client()
        assert [client.execute_command("XADD", "s", "IDMPAUTO", "p", "*", "n", i) for i in range(20)] == ids[:20]
        assert client.execute_command("XADD", "s", "IDMP", "q", "order-1", "*", "n", "y") == ids[-1]
        assert client.xlen("s") == 21
        info = fields(client, "s")
        assert (info[b"iids-tracked"], info[b"iids-added"], info[b"pids-tracked"]) == (21, 21, 2)
    finally:
        proc.stop()
