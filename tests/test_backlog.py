"""XBACKLOG against a model scan, with cursors continued across writes (issue 23).

The model knows the live entries (with their fields), the group's
last-delivered-id and PEL from what the commands returned. A call's
positions are, in ID order from its start, the PEL IDs (live or not) and the
live entries after last-delivered-id; the first COUNT of them are examined.
Filters are judged by an independent matcher (fnmatch over latin-1 for the
glob subset used here). Between cursor calls the workload keeps writing, so
each call is checked against the model as it is at that call.
"""

from __future__ import annotations

import fnmatch
import random

import pytest
import redis

from tests.test_lag import fid, pid

VALUES = [b"alpha", b"Alpha", b"beta", b"a\x00b", b"", b"ab*", b"\xff\xfe"]
PATTERNS = [b"a*", b"*b*", b"?lpha", b"[ab]*", b"*\x00*", b"\xff*"]


class Model:
    def __init__(self) -> None:
        self.entries: dict[int, dict[bytes, bytes]] = {}
        self.last = 0
        self.pel: set[int] = set()

    def positions(self, start: int) -> list[int]:
        out = {i for i in self.pel if i >= start}
        out |= {i for i in self.entries if i > self.last and i >= start}
        return sorted(out)

    def floor(self) -> int:
        return min(min(self.pel), self.last + 1) if self.pel else self.last + 1


def judge(fields: dict[bytes, bytes], filters: list[tuple]) -> str:
    verdict = "accepted"
    for name, op, value, nocase in filters:
        got = fields.get(name)
        if op == "EXISTS":
            if got is None and verdict == "accepted":
                verdict = "rejected"
            continue
        if got is None:
            return "missing-field"
        if op == "EQ":
            ok = got == value
        else:
            subject, pattern = got.decode("latin-1"), value.decode("latin-1")
            if nocase:
                subject, pattern = subject.lower(), pattern.lower()
            ok = bool(subject) and fnmatch.fnmatchcase(subject, pattern)
        if not ok and verdict == "accepted":
            verdict = "rejected"
    return verdict


def expected(model: Model, start: int, count: int, filters: list[tuple]) -> dict:
    positions = model.positions(start)
    taken = positions[:count]
    out = {"entries": 0, "accepted": 0, "rejected": 0, "missing-field": 0, "pending": 0, "deleted-pending": 0}
    for i in taken:
        if i not in model.entries:
            out["deleted-pending"] += 1
            continue
        out["entries"] += 1
        out["pending"] += i in model.pel
        out[judge(model.entries[i], filters)] += 1
    more = len(positions) > count
    out["first-id"] = fid(taken[0]).encode() if taken else None
    out["last-id"] = fid(taken[-1]).encode() if taken else None
    out["aborted"] = int(more)
    out["abort-reason"] = b"count" if more else b"done"
    out["cursor"] = fid(taken[-1]).encode() if more else b"0"
    return out


def random_filters(rng: random.Random) -> tuple[list[str], list[tuple]]:
    args, filters = [], []
    for _ in range(rng.choice((0, 1, 1, 2))):
        name = rng.choice((b"k", b"k", b"n"))
        op = rng.choice(("EQ", "MATCH", "MATCH", "EXISTS"))
        if op == "EXISTS":
            args += [b"WHERE", name, b"EXISTS"]
            filters.append((name, op, b"", False))
        elif op == "EQ":
            value = rng.choice(VALUES)
            args += [b"WHERE", name, b"EQ", value]
            filters.append((name, op, value, False))
        else:
            pattern, nocase = rng.choice(PATTERNS), rng.random() < 0.3
            args += [b"WHERE", name, b"MATCH", pattern] + ([b"NOCASE"] if nocase else [])
            filters.append((name, op, pattern, nocase))
    return args, filters


def write(rng: random.Random, c, model: Model, key: str) -> None:
    op = rng.random()
    if op < 0.45:
        fields = {}
        if rng.random() < 0.8:
            fields[b"k"] = rng.choice(VALUES)
        if rng.random() < 0.5:
            fields[b"n"] = rng.choice(VALUES)
        fields = fields or {b"x": b"1"}
        new = pid(c.xadd(key, fields))
        model.entries[new] = fields
    elif op < 0.6 and model.entries:
        victim = rng.choice(sorted(model.entries))
        c.xdel(key, fid(victim))
        del model.entries[victim]
    elif op < 0.8:
        reply = c.xreadgroup("g", "c", {key: ">"}, count=rng.randrange(1, 8))
        got = [pid(i) for i, _ in (reply[0][1] if reply else [])]
        if got:
            model.last = got[-1]
            model.pel.update(got)
    elif op < 0.92 and model.pel:
        acked = rng.sample(sorted(model.pel), min(len(model.pel), rng.randrange(1, 4)))
        c.xack(key, "g", *map(fid, acked))
        model.pel.difference_update(acked)
    elif op < 0.96:
        ids = sorted(model.entries)
        at = rng.choice(ids) if ids and rng.random() < 0.8 else 0
        c.xgroup_setid(key, "g", id=fid(at))  # backwards too: pending entries then lie after it
        model.last = at
    else:
        n = c.xtrim(key, maxlen=max(len(model.entries) - rng.randrange(0, 4), 0))
        for i in sorted(model.entries)[:n]:
            del model.entries[i]


@pytest.mark.parametrize("seed", range(5))
def test_backlog_matches_model_scan(r2, seed: int) -> None:
    rng = random.Random(seed)
    key = "s"
    model = Model()
    r2.xgroup_create(key, "g", id="0", mkstream=True)
    for _ in range(60):
        write(rng, r2, model, key)
    for _round in range(25):
        cursor = None
        for _call in range(40):
            count = rng.choice((1, 2, 3, 7, 50))
            args, filters = random_filters(rng)
            argv = [b"XBACKLOG", key, b"g", b"COUNT", count, b"TIMEOUT", 1000] + args
            if cursor is None:
                start = model.floor()
                if rng.random() < 0.3:
                    start = rng.choice(sorted(model.entries)) if model.entries else 0
                    argv += [b"FROM", fid(start)]
            else:
                argv += [b"CURSOR", cursor]
                start = pid(cursor) + 1
            reply = r2.execute_command(*argv)
            got = dict(zip(reply[0::2], reply[1::2], strict=True))
            got = {k.decode(): v for k, v in got.items()}
            elapsed = float(got.pop("elapsed-ms"))
            assert 0 <= elapsed < 1000
            assert got == expected(model, start, count, filters), (argv, start)
            cursor = got["cursor"]
            for _ in range(rng.randrange(0, 3)):  # writes between the calls of one scan
                write(rng, r2, model, key)
            if cursor == b"0":
                break
        write(rng, r2, model, key)


def test_backlog_options_and_errors(r2) -> None:
    r2.xadd("s", {"f": "v"}, id="1-0")
    r2.xgroup_create("s", "g", id="0")
    errors = [
        (["COUNT", "0"], "COUNT must be between 1"),
        (["COUNT", "x"], "COUNT is not an integer"),
        (["TIMEOUT", "0"], "TIMEOUT must be between 1 and 1000"),
        (["TIMEOUT", "1001"], "TIMEOUT must be between 1 and 1000"),
        (["FROM"], "syntax error"),
        (["FROM", "zz"], "Invalid stream ID"),
        (["CURSOR", "abc"], "Invalid stream ID"),
        (["FROM", "1", "CURSOR", "1-0"], "FROM and a non-zero CURSOR"),
        (["WHERE", "f"], "syntax error"),
        (["WHERE", "f", "EQ"], "syntax error"),
        (["WHERE", "f", "LIKE", "x"], "syntax error"),
        (["WHERE", "f", "EQ", "v", "NOCASE"], "syntax error"),
        (["BOGUS"], "syntax error"),
    ]
    for extra, message in errors:
        with pytest.raises(redis.ResponseError, match=message):
            r2.execute_command("XBACKLOG", "s", "g", *extra)
    with pytest.raises(redis.ResponseError, match="NOGROUP"):
        r2.execute_command("XBACKLOG", "s", "nope")
    with pytest.raises(redis.ResponseError, match="no such key"):
        r2.execute_command("XBACKLOG", "missing", "g")
    # CURSOR 0 starts over, like SCAN; FROM ACKFLOOR is the default start
    a = r2.execute_command("XBACKLOG", "s", "g", "CURSOR", "0")
    b = r2.execute_command("XBACKLOG", "s", "g", "FROM", "ACKFLOOR")
    assert a[:-2] == b[:-2] and a[1] == 1


def test_backlog_is_read_only(r2, server) -> None:
    """No idle time, delivery count or counter changes; nothing is propagated (the replication offset stays)."""
    for i in range(50):
        r2.xadd("s", {"f": str(i)})
    r2.xgroup_create("s", "g", id="0")
    r2.xreadgroup("g", "c", {"s": ">"}, count=10)
    before = r2.xinfo_stream("s", full=True)  # absolute delivery and seen times, counts, counters
    offset = r2.info("replication")["master_repl_offset"]
    r2.execute_command("XBACKLOG", "s", "g", "WHERE", "f", "MATCH", "1*")
    after = r2.xinfo_stream("s", full=True)
    assert before == after
    assert r2.info("replication")["master_repl_offset"] == offset


def test_backlog_time_budget_aborts_with_a_cursor(r2) -> None:
    """A scan that cannot finish in TIMEOUT stops with abort-reason time and a cursor that continues it."""
    pipe = r2.pipeline(transaction=False)
    for i in range(60000):
        pipe.xadd("big", {"f": f"value-{i}"})
    pipe.execute()
    r2.xgroup_create("big", "g", id="0")
    reply = r2.execute_command("XBACKLOG", "big", "g", "COUNT", 10**9, "TIMEOUT", 1, "WHERE", "f", "MATCH", "*9*")
    got = dict(zip(reply[0::2], reply[1::2], strict=True))
    assert got[b"aborted"] == 1 and got[b"abort-reason"] == b"time"
    assert 0 < got[b"entries"] < 60000
    total, cursor, calls = got[b"entries"], got[b"cursor"], 1
    while cursor != b"0":
        reply = r2.execute_command("XBACKLOG", "big", "g", "COUNT", 10**9, "TIMEOUT", 1, "CURSOR", cursor)
        got = dict(zip(reply[0::2], reply[1::2], strict=True))
        total += got[b"entries"]
        cursor = got[b"cursor"]
        calls += 1
    assert total == 60000 and calls > 1
