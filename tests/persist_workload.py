"""A random workload over every kind of state Millrace persists, and a full picture of that state.

`Workload.step()` sends one random command through redis-py: strings with and
without TTLs, counters, streams with explicit IDs, deletions, trims and XSETID,
consumer groups read, acknowledged and claimed, in several databases and
sometimes inside MULTI/EXEC. `state()` reads back everything a client can see:
each key's type, absolute expiry and value, and for streams XINFO STREAM FULL
(every entry, counter, group, PEL entry with its owner, delivery time and count,
and every consumer with its seen-time and active-time) plus XINFO GROUPS' lag.
"""

from __future__ import annotations

import random

import redis

STREAMS = [b"s1", b"s2", b"s3"]
STRINGS = [b"k1", b"k2", b"k3", b"n"]
GROUPS = [b"g1", b"g2"]
CONSUMERS = [b"alice", b"bob", b"carol"]


class Workload:
    def __init__(self, client: redis.Redis, seed: int, dbs: int = 3, deletes: bool = True) -> None:
        self.r = client
        self.deletes = deletes  # XDEL, XTRIM and MAXLEN, which can leave PEL entries whose entry is gone
        self.rng = random.Random(seed)
        self.dbs = dbs
        self.next_ms = 1_000

    def run(self, *argv):
        try:
            return self.r.execute_command(*argv)
        except redis.ResponseError as exc:
            return exc

    def new_id(self) -> str:
        self.next_ms += self.rng.choice([0, 1, 1, 5])
        return f"{self.next_ms}-*" if self.rng.random() < 0.5 else "*"

    def some_id(self) -> str:
        return f"{self.rng.randint(900, self.next_ms + 2)}-{self.rng.randint(0, 2)}"

    def step(self) -> None:
        rng = self.rng
        roll = rng.random()
        key = rng.choice(STREAMS)
        group = rng.choice(GROUPS)
        consumer = rng.choice(CONSUMERS)
        if roll < 0.03:
            self.run("SELECT", rng.randrange(self.dbs))
        elif roll < 0.12:
            skey = rng.choice(STRINGS)
            ttl = rng.choice([[], [], ["EX", rng.randint(100, 10_000)], ["PX", rng.randint(100_000, 900_000)]])
            self.run("SET", skey, rng.randbytes(rng.randint(0, 40)), *ttl)
        elif roll < 0.16:
            self.run(rng.choice(["INCR", "DECR"]), "n")
        elif roll < 0.18:
            self._expire_like()
        elif roll < 0.42 or (not self.deletes and roll < 0.47):
            trim = rng.choice([[], [], [], ["MAXLEN", "~", rng.randint(0, 150)], ["MAXLEN", rng.randint(5, 60)]])
            trim = trim if self.deletes else []
            fields = [b"f", rng.randbytes(rng.randint(0, 12))] * rng.randint(1, 2)
            self.run("XADD", key, *trim, self.new_id(), *fields)
        elif roll < 0.45:
            self.run("XDEL", key, *[self.some_id() for _ in range(rng.randint(1, 3))])
        elif roll < 0.47:
            self.run("XTRIM", key, "MAXLEN", rng.randint(0, 40))
        elif roll < 0.48:
            self.run("XSETID", key, f"{self.next_ms + 1}-0", "ENTRIESADDED", 10_000, "MAXDELETEDID", f"{self.next_ms}-0")
            self.next_ms += 1
        elif roll < 0.53:
            self.run("XGROUP", "CREATE", key, group, rng.choice(["0", "$", self.some_id()]), *rng.choice([[], ["MKSTREAM"], ["ENTRIESREAD", rng.randint(0, 5)]]))
        elif roll < 0.55:
            self.run("XGROUP", "SETID", key, group, rng.choice(["0", "$", self.some_id()]))
        elif roll < 0.56:
            self.run("XGROUP", rng.choice(["DESTROY", "CREATECONSUMER", "DELCONSUMER"]), key, group, *([consumer] if rng.random() < 0.7 else []))
        elif roll < 0.72:
            extra = ["NOACK"] if rng.random() < 0.15 else []
            self.run("XREADGROUP", "GROUP", group, consumer, "COUNT", rng.randint(1, 8), *extra, "STREAMS", key, rng.choice([">", ">", ">", "0"]))
        elif roll < 0.80:
            self.run("XACK", key, group, *[self.some_id() for _ in range(rng.randint(1, 4))])
        elif roll < 0.85:
            self.run("XCLAIM", key, group, consumer, 0, *[self.some_id() for _ in range(rng.randint(1, 3))], *rng.choice([[], ["JUSTID"], ["RETRYCOUNT", 7]]))
        elif roll < 0.88:
            self.run("XAUTOCLAIM", key, group, consumer, 0, "0", "COUNT", rng.randint(1, 5))
        elif roll < 0.92:
            with self.r.pipeline(transaction=True) as pipe:
                pipe.execute_command("XADD", key, "*", "m", "1")
                pipe.execute_command("SET", rng.choice(STRINGS), "in-multi")
                try:
                    pipe.execute()
                except redis.ResponseError:
                    pass
        else:
            self.run("XADD", key, self.new_id(), "a", rng.randint(0, 99), "b", "x")

    def _expire_like(self):
        rng = self.rng
        op = rng.choice(["EXPIRE", "PEXPIREAT", "PERSIST", "DEL"])
        key = rng.choice(STRINGS + STREAMS)
        if op == "EXPIRE":
            return self.run(op, key, rng.randint(1000, 9000))
        if op == "PEXPIREAT":
            return self.run(op, key, 4_000_000_000_000 + rng.randint(0, 10**6))
        return self.run(op, key)

    def steps(self, n: int) -> None:
        for _ in range(n):
            self.step()


def state(client: redis.Redis, dbs: int = 16, structure: bool = True) -> dict:
    """Everything a client can see, per database and key (node structure left out if not `structure`)."""
    picture = {}
    for name in ("XINFO STREAM", "XINFO GROUPS", "XINFO", "KEYS", "TYPE"):  # compare what the server sent
        client.response_callbacks.pop(name, None)
    for db in range(dbs):
        client.execute_command("SELECT", db)
        for key in sorted(client.execute_command("KEYS", "*")):
            kind = client.execute_command("TYPE", key)
            expire = client.execute_command("PEXPIRETIME", key)
            if kind in (b"string", "string"):
                value = client.execute_command("GET", key)
            else:
                full = client.execute_command("XINFO", "STREAM", key, "FULL", "COUNT", "0")
                value = _plain(full)
                if not structure:
                    value = {k: v for k, v in value.items() if k not in (b"radix-tree-keys", b"radix-tree-nodes")}
                value[b"groups-lag"] = client.execute_command("XINFO", "GROUPS", key)
            picture[(db, key)] = (kind, expire, value)
    client.execute_command("SELECT", 0)
    return picture


def _plain(reply) -> dict:
    """A map reply (RESP3, or RESP2's flat list of names and values) as a dict; the values stay as sent."""
    if isinstance(reply, dict):
        return dict(reply)
    return dict(zip(reply[0::2], reply[1::2], strict=True))
