"""XGROUPLAG, `stream-exact-lag` and exact entries-read against a brute-force model (issue 23).

The model keeps every ID ever added, which are live, each group's
last-delivered-id and PEL, driven only by what the commands return. Random
workloads mix XADD, XDEL, exact and approximate trims (a trim always removes
the oldest entries, so its count tells the model which), XREADGROUP, XACK,
XGROUP SETID and CREATE at arbitrary IDs, and XSETID. After each step:

- XGROUPLAG's lag is the number of live entries after the group's
  last-delivered-id, exactly, never nil; pending, backlog = lag + pending;
- with `stream-exact-lag yes` XINFO GROUPS shows the same lag; its
  entries-read, when given, is the true count of entries ever added up to
  the group's position (Redis's convention for a group behind the first
  entry: everything before the first entry counts as read);
- a group set at an ID with no deleted entry after it gets a number, not nil.
"""

from __future__ import annotations

import random
from bisect import bisect_right

import pytest
import redis

MAX_ID = (1 << 128) - 1


def pid(text) -> int:
    text = text.decode() if isinstance(text, bytes) else text
    ms, _, seq = text.partition("-")
    return int(ms) << 64 | int(seq or 0)


def fid(value: int) -> str:
    return f"{value >> 64}-{value & ((1 << 64) - 1)}"


class Model:
    def __init__(self) -> None:
        self.live: list[int] = []
        self.ever: list[int] = []
        self.max_deleted = 0
        self.groups: dict[str, dict] = {}
        self.counted = True  # entries_added is the true count (no XSETID ENTRIESADDED yet)

    def lag(self, name: str) -> int:
        return len(self.live) - bisect_right(self.live, self.groups[name]["last"])

    def entries_read_ok(self, name: str, reported: int, entries_added: int) -> bool:
        last = self.groups[name]["last"]
        if not self.live or last < self.live[0]:
            # behind every live entry: Redis's convention counts removed entries as read (some or all,
            # depending on when the counter was last estimated), never more than all of them
            return bisect_right(self.ever, last) <= reported <= entries_added - len(self.live)
        return reported == bisect_right(self.ever, last)


def group_maps(client, key: str) -> dict[str, dict]:
    return {g[b"name"].decode(): g for g in client.execute_command("XGROUPLAG", key)}


def check(client, model: Model, key: str) -> None:
    if not model.groups:
        return
    lags = group_maps(client, key)
    infos = {g["name"].decode(): g for g in client.xinfo_groups(key)}
    entries_added = client.xinfo_stream(key)["entries-added"]
    for name, group in model.groups.items():
        got = lags[name]
        want = model.lag(name)
        assert got[b"lag"] == want, (name, got, want)
        assert got[b"pending"] == len(group["pel"])
        assert got[b"backlog"] == want + len(group["pel"])
        assert pid(got[b"last-delivered-id"]) == group["last"]
        assert infos[name]["lag"] == want
        assert infos[name]["entries-read"] == got[b"entries-read"]
        reported = got[b"entries-read"]
        if model.counted:
            if reported is not None:
                assert model.entries_read_ok(name, reported, entries_added), (name, reported, group, model.live[:3])
            last = group["last"]
            if last >= model.max_deleted and model.live and last <= model.live[-1] and last >= model.live[0]:
                assert reported is not None, (name, group)


def _random_id(rng: random.Random, model: Model, top: int) -> int:
    pick = rng.random()
    if model.live and pick < 0.5:
        return rng.choice(model.live) + rng.choice((-1, 0, 0, 1))
    if model.ever and pick < 0.8:
        return rng.choice(model.ever)
    return rng.randrange(0, top + 2)


@pytest.fixture
def c(server):
    client = server.client(protocol=3)
    client.flushall()
    client.config_set("stream-exact-lag", "yes")
    client.config_set("stream-node-max-entries", "8")
    yield client
    client.config_set("stream-exact-lag", "no")
    client.config_set("stream-node-max-entries", "100")
    client.close()


@pytest.mark.parametrize("seed", range(6))
def test_lag_matches_brute_force(c, seed: int) -> None:
    rng = random.Random(seed)
    key = "s"
    model = Model()
    c.xadd(key, {"f": "0"}, id="1-0")
    model.live.append(1 << 64)
    model.ever.append(1 << 64)
    next_ms = 2
    for step in range(400):
        op = rng.random()
        top = model.ever[-1] if model.ever else 1
        if op < 0.35:
            next_ms += rng.choice((0, 1, 3))
            new = pid(c.xadd(key, {"f": str(step)}, id=f"{next_ms}-*"))
            model.live.append(new)
            model.ever.append(new)
        elif op < 0.45 and model.live:
            victim = rng.choice(model.live)
            assert c.xdel(key, fid(victim)) == 1
            model.live.remove(victim)
            model.max_deleted = max(model.max_deleted, victim)
        elif op < 0.52:
            if rng.random() < 0.5:
                n = c.xtrim(key, maxlen=rng.randrange(0, len(model.live) + 2), approximate=rng.random() < 0.5)
            else:
                n = c.xtrim(key, minid=fid(_random_id(rng, model, top)), approximate=rng.random() < 0.5)
            del model.live[:n]
        elif op < 0.60 and len(model.groups) < 4:
            name = f"g{step}"
            at = _random_id(rng, model, top)
            c.xgroup_create(key, name, id=fid(at))
            model.groups[name] = {"last": at, "pel": set()}
        elif op < 0.68 and model.groups:
            name = rng.choice(sorted(model.groups))
            at = _random_id(rng, model, top)
            c.xgroup_setid(key, name, id=fid(at))
            model.groups[name]["last"] = at
        elif op < 0.85 and model.groups:
            name = rng.choice(sorted(model.groups))
            reply = c.xreadgroup(name, "c", {key: ">"}, count=rng.randrange(1, 6))
            got = [pid(i) for i, _ in (reply[key.encode()][0] if reply else [])]
            group = model.groups[name]
            want = [i for i in model.live if i > group["last"]][: len(got)]
            assert got == want
            if got:
                group["last"] = got[-1]
                group["pel"].update(got)
        elif op < 0.93 and model.groups:
            name = rng.choice(sorted(model.groups))
            pel = model.groups[name]["pel"]
            if pel:
                acked = rng.sample(sorted(pel), min(len(pel), rng.randrange(1, 4)))
                assert c.xack(key, name, *map(fid, acked)) == len(acked)
                pel.difference_update(acked)
        elif op < 0.96:
            # XSETID: a new last ID (and sometimes a greater max deleted ID or entries-added)
            last = max(top, model.max_deleted) + rng.choice((0, 1 << 64))
            args = ["XSETID", key, fid(last)]
            if rng.random() < 0.3:
                model.max_deleted = max(model.max_deleted, last)
                info = c.xinfo_stream(key)
                args += ["ENTRIESADDED", str(info["entries-added"] + rng.choice((0, 2))), "MAXDELETEDID", fid(last)]
                model.counted = model.counted and args[4] == str(info["entries-added"])
            c.execute_command(*args)
            next_ms = max(next_ms, (last >> 64) + 1)
        check(c, model, key)


def test_xgrouplag_fields_and_errors(c, server) -> None:
    c.xadd("k", {"f": "v"}, id="1-0")
    c.xadd("k", {"f": "v"}, id="2-0")
    c.xadd("k", {"f": "v"}, id="3-0")
    c.xgroup_create("k", "b", id="0")
    c.xgroup_create("k", "a", id="$")
    c.xreadgroup("b", "c1", {"k": ">"}, count=1)
    c.xdel("k", "2-0")
    maps = c.execute_command("XGROUPLAG", "k")
    assert [m[b"name"] for m in maps] == [b"a", b"b"]
    a, b = maps
    assert list(b) == [b"name", b"consumers", b"last-delivered-id", b"entries-read", b"lag", b"pending", b"backlog",
                       b"oldest-undelivered-ms", b"oldest-pending-idle-ms", b"lag-status"]
    assert (b[b"lag"], b[b"pending"], b[b"backlog"], b[b"entries-read"], b[b"consumers"]) == (1, 1, 2, 1, 1)
    assert (a[b"lag"], a[b"pending"], a[b"backlog"], a[b"oldest-undelivered-ms"], a[b"oldest-pending-idle-ms"]) == (0, 0, 0, 0, 0)
    now_ms = int(c.time()[0]) * 1000
    assert b[b"oldest-undelivered-ms"] >= now_ms - 3 - 1000  # entry 3-0 is as old as the epoch
    assert b[b"lag-status"] == b"OK"
    assert c.execute_command("XGROUPLAG", "k", "b")[0][b"lag"] == 1
    with pytest.raises(redis.ResponseError, match="no such key"):
        c.execute_command("XGROUPLAG", "nokey")
    with pytest.raises(redis.ResponseError, match="NOGROUP No such key 'k' or consumer group 'zz'"):
        c.execute_command("XGROUPLAG", "k", "zz")
    c.set("str", "x")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        c.execute_command("XGROUPLAG", "str")
    with pytest.raises(redis.ResponseError, match="wrong number of arguments"):
        c.execute_command("XGROUPLAG")
    info = c.execute_command("COMMAND", "INFO", "XGROUPLAG", "XBACKLOG")
    assert set(info) == {"xgrouplag", "xbacklog"}
    assert all("readonly" in entry["flags"] for entry in info.values())


def test_xinfo_groups_keeps_redis_reply_without_exact_lag(c) -> None:
    """stream-exact-lag no: XINFO GROUPS answers nil where Redis does; yes: the exact figures."""
    for ms in range(1, 6):
        c.xadd("k", {"f": "v"}, id=f"{ms}-0")
    c.xdel("k", "4-0")
    c.config_set("stream-exact-lag", "no")
    c.xgroup_create("k", "g", id="2-0")
    info = c.xinfo_groups("k")[0]
    assert (info["entries-read"], info["lag"]) == (None, None)  # Redis 7+: a tombstone after the group
    c.config_set("stream-exact-lag", "yes")
    info = c.xinfo_groups("k")[0]
    assert (info["entries-read"], info["lag"]) == (None, 2)  # the lag is exact; entries-read stays unknowable here
    full = c.xinfo_stream("k", full=True)["groups"][0]
    assert full["lag"] == 2
    c.xgroup_setid("k", "g", id="4-0")  # no tombstone after 4-0: entries-read is computed
    info = c.xinfo_groups("k")[0]
    assert (info["entries-read"], info["lag"]) == (4, 1)
    c.xgroup_create("k", "h", id="3-0")  # behind the tombstone: unknowable, as Redis
    assert c.xinfo_groups("k")[1]["entries-read"] is None
    assert c.config_get("stream-exact-lag") == {"stream-exact-lag": "yes"}
    with pytest.raises(redis.ResponseError, match="argument must be 'yes' or 'no'"):
        c.config_set("stream-exact-lag", "maybe")


def test_lag_status_follows_the_group(c) -> None:
    """Samples come from XGROUPLAG calls when the group did something: a slow reader WARNs, a SETID back REWINDs."""
    c.xgroup_create("w", "g", id="0", mkstream=True)

    def status() -> bytes:
        return c.execute_command("XGROUPLAG", "w", "g")[0][b"lag-status"]

    for _ in range(4):  # each round: 3 new entries, 1 read and acked: progress, but the backlog grows
        for _ in range(3):
            c.xadd("w", {"f": "v"})
        reply = c.xreadgroup("g", "c", {"w": ">"}, count=1)
        c.xack("w", "g", reply[b"w"][0][0][0])
        assert status() in (b"OK", b"WARN")
    assert status() == b"WARN"
    c.xgroup_setid("w", "g", id="0")
    reply = c.xreadgroup("g", "c", {"w": ">"}, count=1)
    c.xack("w", "g", reply[b"w"][0][0][0])
    assert status() == b"REWIND"
    for _ in range(12):  # reading everything: a zero backlog in the window is OK
        reply = c.xreadgroup("g", "c", {"w": ">"}, count=100)
        if reply:
            c.xack("w", "g", *[i for i, _ in reply[b"w"][0]])
        status()
    assert c.execute_command("XGROUPLAG", "w", "g")[0][b"backlog"] == 0
    assert status() == b"OK"


def test_held_back_entries_add_to_the_lag(monkeypatch) -> None:
    """The hook for key-ordered groups (issue 22): registered counters add to every group's exact lag."""
    from storage import lag as lag_module
    from storage.consumer_group import ConsumerGroup
    from storage.stream import Stream

    monkeypatch.setattr(lag_module, "_HELD_BACK", [])
    stream = Stream()
    for ms in range(1, 11):
        stream.add(ms, [b"f", b"v"])
    group = ConsumerGroup(5 << 64)
    assert lag_module.exact_lag(stream, group) == 5
    lag_module.register_held_back(lambda s, g: 2 if g is group else 0)
    lag_module.register_held_back(lambda s, g: 1)
    assert lag_module.exact_lag(stream, group) == 8
    assert lag_module.exact_lag(stream, ConsumerGroup(9 << 64)) == 2
    assert lag_module.first_undelivered_id(stream, group) == 6 << 64
    assert lag_module.first_undelivered_id(stream, ConsumerGroup(10 << 64)) is None


def test_command_docs(server) -> None:
    """COMMAND DOCS gives redis-cli the argument trees (group optional and multiple; WHERE blocks repeat)."""
    from tests.rawclient import RawConn

    client = RawConn(server.port)
    docs = client.call("COMMAND", "DOCS", "XGROUPLAG", "XBACKLOG")
    by_name = {docs[i]: dict(zip(docs[i + 1][0::2], docs[i + 1][1::2], strict=True)) for i in range(0, len(docs), 2)}

    def names(args) -> list:
        return [dict(zip(a[0::2], a[1::2], strict=True))[b"name"] for a in args]

    assert names(by_name[b"xgrouplag"][b"arguments"]) == [b"key", b"group"]
    backlog = by_name[b"xbacklog"][b"arguments"]
    assert names(backlog) == [b"key", b"group", b"start", b"count", b"milliseconds", b"cursor", b"filter"]
    where = dict(zip(backlog[-1][0::2], backlog[-1][1::2], strict=True))
    assert where[b"token"] == b"WHERE" and set(where[b"flags"]) == {b"optional", b"multiple"}
    client.close()
