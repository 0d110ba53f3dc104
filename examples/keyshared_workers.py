"""A worker pool on a KEYSHARED consumer group: watch keys move as workers come and go.

    python -m server --port 6399 &
    python examples/keyshared_workers.py --port 6399 [--seconds 20] [--keys 12]

A producer appends orders (`account` is the key) to the stream `orders`;
worker threads read the group `billing` with XREADGROUP ... BLOCK, "process"
each entry and acknowledge it. Every few seconds a worker joins or leaves
(XGROUP LEAVE: its unacknowledged entries go back to the group for their new
owner). Each second the script prints, per worker, the accounts it handled,
and checks the two promises: no account is being processed by two workers at
once, and every worker sees an account's entries in stream order. It ends
with XINFO KEYSHARED (the ring's hash ranges, draining hashes) and a summary.
"""

from __future__ import annotations

import argparse
import random
import threading
import time
from collections import defaultdict

import redis

STREAM, GROUP = "orders", "billing"


class Pool:
    def __init__(self, host: str, port: int, keys: int) -> None:
        self.host, self.port = host, port
        self.keys = [f"acct-{i}" for i in range(keys)]
        self.lock = threading.Lock()
        self.busy: dict[str, str] = {}  # account -> worker processing it right now
        self.last: dict[tuple[str, str], tuple[int, int]] = {}  # (worker, account) -> last ID seen
        self.handled: dict[str, set[str]] = defaultdict(set)  # this second's accounts per worker
        self.violations: list[str] = []
        self.processed = 0
        self.stops: dict[str, threading.Event] = {}

    def client(self) -> redis.Redis:
        return redis.Redis(host=self.host, port=self.port, decode_responses=True)

    def worker(self, name: str, stop: threading.Event) -> None:
        client = self.client()
        while not stop.is_set():
            reply = client.xreadgroup(GROUP, name, {STREAM: ">"}, count=5, block=200)
            for _key, entries in reply or []:
                for entry_id, fields in entries:
                    self.process(name, entry_id, fields["account"])
                    with self.lock:  # done with it before acknowledging: then another worker may get the account
                        self.busy.pop(fields["account"], None)
                    client.xack(STREAM, GROUP, entry_id)
        client.execute_command("XGROUP", "LEAVE", STREAM, GROUP, name)  # what a shutting-down worker does

    def process(self, name: str, entry_id: str, account: str) -> None:
        ms, seq = (int(x) for x in entry_id.split("-"))
        with self.lock:
            holder = self.busy.get(account)
            if holder not in (None, name):
                self.violations.append(f"{account} at {holder} and {name}")
            self.busy[account] = name
            last = self.last.get((name, account))
            if last is not None and (ms, seq) <= last:
                self.violations.append(f"{name} saw {account} out of order")
            self.last[(name, account)] = (ms, seq)
            self.handled[name].add(account)
            self.processed += 1
        time.sleep(0.002)  # the "work"

    def start_worker(self, name: str) -> None:
        stop = self.stops[name] = threading.Event()
        threading.Thread(target=self.worker, args=(name, stop), daemon=True).start()

    def stop_worker(self, name: str) -> None:
        self.stops.pop(name).set()
        with self.lock:  # a new membership starts with the next join
            for key in [k for k in self.last if k[0] == name]:
                del self.last[key]


def as_dict(reply) -> dict:
    """A map reply as a dict, whether the client parsed it (RESP3) or not (a flat RESP2 array)."""
    return reply if isinstance(reply, dict) else dict(zip(reply[::2], reply[1::2], strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=6379)
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--keys", type=int, default=12)
    args = parser.parse_args()
    pool = Pool(args.host, args.port, args.keys)
    admin = pool.client()
    admin.delete(STREAM)
    admin.execute_command("XGROUP", "CREATE", STREAM, GROUP, "$", "MKSTREAM", "KEYSHARED", "account")
    rng = random.Random(1)
    names = [f"worker-{i}" for i in range(1, 6)]
    for name in names[:3]:
        pool.start_worker(name)
    stop_producer = threading.Event()

    def produce() -> None:
        client = pool.client()
        n = 0
        while not stop_producer.is_set():
            client.xadd(STREAM, {"account": rng.choice(pool.keys), "amount": n})
            n += 1
            time.sleep(0.005)

    threading.Thread(target=produce, daemon=True).start()
    for second in range(1, args.seconds + 1):
        time.sleep(1)
        if second % 4 == 0:
            running = sorted(pool.stops)
            idle = [n for n in names if n not in pool.stops]
            if idle and (len(running) <= 2 or rng.random() < 0.5):
                pool.start_worker(idle[0])
                print(f"--- {idle[0]} joins")
            elif len(running) > 1:
                leaving = rng.choice(running)
                pool.stop_worker(leaving)
                print(f"--- {leaving} leaves")
        with pool.lock:
            line = "  ".join(f"{w}: {','.join(sorted(a.split('-')[1] for a in accts))}" for w, accts in sorted(pool.handled.items()))
            pool.handled.clear()
        print(f"t={second:2d}s  {line}")
    stop_producer.set()
    info = as_dict(admin.execute_command("XINFO", "KEYSHARED", STREAM, GROUP))
    print(f"members {info['members']}, deferred {info['deferred']}, draining hashes {info['draining-hashes']}")
    for consumer in info["consumers"]:
        consumer = as_dict(consumer)
        ranges = consumer["hash-ranges"]
        print(f"  {consumer['name']}: member {consumer['member']}, {len(ranges)} hash ranges, draining {len(consumer['draining-hashes'])}")
    for name in list(pool.stops):
        pool.stop_worker(name)
    print(f"processed {pool.processed} entries, {len(pool.violations)} violations of the contract")
    for violation in pool.violations[:10]:
        print("  " + violation)


if __name__ == "__main__":
    main()
