"""A KEYSHARED subscriber among reference-policy trims, XACKDEL, XDELEX and retention, against a brute-force model.

Seeded random workloads on the real server: a KEYSHARED group g (an AUTO
retention subscriber, members joining and leaving) and a plain group h share
a stream under `XRETENTION ... MIN-LEN 0`, with ACKED trims (XTRIM, XADD),
XACKDEL, XDELEX ACKED, XNACK and XREADGROUP ... CLAIM between. The model is only what the test itself
sent: every ID added, and what g and h acknowledged. After every step:

- nothing g has not acknowledged is gone unless the test deleted it (XDEL,
  XDELEX DELREF): ACKED and retention keep what g has pending or has not
  been given, deferred entries included (no MAX here);
- g's exact lag is the live entries g has neither pending nor acknowledged;
- every key's pending entries in g sit at one consumer.
"""

from __future__ import annotations

import random

import pytest

from tests.test_keyshared import info_map

KEYS = [f"acct-{i}" for i in range(7)]


@pytest.fixture
def c(server):
    client = server.client(decode_responses=True)
    client.flushall()
    client.config_set("stream-node-max-entries", 3)
    yield client
    client.config_set("stream-node-max-entries", 100)
    client.close()


def _pending(c, group: str) -> dict[str, str]:
    return {p["message_id"]: p["consumer"] for p in c.xpending_range("s", group, "-", "+", 10_000)}


@pytest.mark.parametrize("seed", range(4))
def test_keyshared_subscriber_keeps_what_it_needs(c, seed):
    rnd = random.Random(seed)
    c.execute_command("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM", "KEYSHARED", "k")
    c.xgroup_create("s", "h", "$")
    c.execute_command("XGROUP", "SETCONFIG", "s", "g", "SUBSCRIBER", "AUTO")
    c.execute_command("XRETENTION", "SET", "s", "CONSUMPTION", "MIN-LEN", 0)
    key_of: dict[str, str] = {}
    acked_g: set[str] = set()
    gone: set[str] = set()
    members = ["A", "B"]
    for step in range(250):
        op = rnd.random()
        if op < 0.3:
            key = rnd.choice(KEYS)
            trim = ["ACKED", "MAXLEN", "=", str(rnd.randrange(0, 6))] if rnd.random() < 0.2 else []
            key_of[c.execute_command("XADD", "s", *trim, "*", "k", key)] = key
        elif op < 0.5:
            c.xreadgroup("g", rnd.choice(members), {"s": ">"}, count=rnd.randrange(1, 4))
        elif op < 0.55:
            c.xreadgroup("h", "x", {"s": ">"}, count=rnd.randrange(1, 6))
        elif op < 0.58:
            mine = list(_pending(c, "g"))
            if mine:  # NACKs the key whole: its pending entries wait at nobody
                c.execute_command("XNACK", "s", "g", "FAIL", "IDS", 1, rnd.choice(mine))
        elif op < 0.62:  # COUNT 1 takes one pending entry of a key: the rest of the key must follow it
            c.execute_command("XREADGROUP", "GROUP", "g", rnd.choice(members), "COUNT", rnd.choice([1, 1, 3]),
                              "CLAIM", rnd.choice([0, 0, 60_000]), "STREAMS", "s", ">")
        elif op < 0.73:
            mine = list(_pending(c, "g"))
            if mine:
                ids = rnd.sample(mine, rnd.randrange(1, min(3, len(mine)) + 1))
                if rnd.random() < 0.5:
                    c.xack("s", "g", *ids)
                else:
                    c.execute_command("XACKDEL", "s", "g", rnd.choice(["ACKED", "KEEPREF"]), "IDS", len(ids), *ids)
                acked_g.update(ids)
        elif op < 0.8:
            theirs = list(_pending(c, "h"))
            if theirs:
                c.xack("s", "h", *rnd.sample(theirs, rnd.randrange(1, len(theirs) + 1)))
        elif op < 0.83:
            if key_of:
                c.execute_command("XDELEX", "s", "ACKED", "IDS", 1, rnd.choice(list(key_of)))
        elif op < 0.86:
            if key_of:  # deleted on purpose: deferred or pending, g need not keep it any more
                victim = rnd.choice(list(key_of))
                if rnd.random() < 0.5:
                    c.xdel("s", victim)
                else:
                    c.execute_command("XDELEX", "s", "DELREF", "IDS", 1, victim)
                gone.add(victim)
        elif op < 0.92:
            if rnd.random() < 0.5:
                c.execute_command("XTRIM", "s", "MAXLEN", rnd.choice(["=", "~"]), rnd.randrange(0, 8), "ACKED")
            elif key_of:
                c.execute_command("XTRIM", "s", "MINID", "=", rnd.choice(list(key_of)), "ACKED")
        elif op < 0.96 and len(members) < 4:
            members.append(f"M{step}")
            c.xreadgroup("g", members[-1], {"s": ">"}, count=1)
        elif len(members) > 1:
            c.execute_command("XGROUP", "LEAVE", "s", "g", members.pop(rnd.randrange(len(members))))
        live = {entry_id for entry_id, _ in c.xrange("s")}
        assert set(key_of) - acked_g - gone <= live, f"step {step}: g lost entries it still needs"
        pending = _pending(c, "g")
        lag = info_map(c.execute_command("XGROUPLAG", "s", "g")[0])["lag"]
        assert lag == len(live - set(pending) - acked_g), f"step {step}"
        owners: dict[str, set[str]] = {}
        for entry_id, consumer in pending.items():
            if consumer:  # a NACKed entry is pending at nobody
                owners.setdefault(key_of[entry_id], set()).add(consumer)
        assert all(len(o) == 1 for o in owners.values()), f"step {step}: a key pending at two consumers"
    assert info_map(c.execute_command("XRETENTION", "GET", "s"))["entries-lost"] == 0
