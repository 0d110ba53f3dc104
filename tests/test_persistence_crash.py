"""kill -9 in the middle of a write load under `appendfsync always`: nothing acknowledged is lost, nothing invented.

Writers add entries with IDs they choose and record every one the server
acknowledged; a consumer reads, acknowledges and claims through a group while
another client trims a stream of its own. The server is killed at several
random moments, restarted on the same directory each time, and checked:
every acknowledged entry is there, every entry there was sent by a writer, and
the group's state is consistent. (`make crash-test` runs many more kills.)
"""

from __future__ import annotations

import random
import threading
import time

import redis

from tests.test_persistence import kill9, start

ARGS = ("--appendonly", "yes", "--appendfsync", "always", "--save", "")


class Load:
    def __init__(self, port: int, seed: int, acked: dict, sent: dict) -> None:
        self.port = port
        self.seed = seed
        self.stop = threading.Event()
        self.acked: dict[bytes, set[bytes]] = acked  # shared by every round: entries outlive restarts
        self.sent: dict[bytes, set[bytes]] = sent
        self.threads = [threading.Thread(target=self.writer, args=(n,), daemon=True) for n in range(3)]
        self.threads += [threading.Thread(target=self.consumer, daemon=True), threading.Thread(target=self.trimmer, daemon=True)]

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=5)

    def writer(self, n: int) -> None:
        key = f"log:{n}".encode()
        acked, sent = self.acked.setdefault(key, set()), self.sent.setdefault(key, set())
        client = self.client()
        seq = int(time.time() * 1000) * 1000 + n  # unique across runs: each restart continues past the last ID
        try:
            while not self.stop.is_set():
                seq += 3
                entry_id = f"{seq}-0".encode()
                sent.add(entry_id)
                client.xadd(key, {"n": n}, id=entry_id)
                acked.add(entry_id)
        except (redis.ConnectionError, redis.TimeoutError):
            pass

    def consumer(self) -> None:
        client = self.client()
        rng = random.Random(self.seed)
        try:
            client.xgroup_create("work", "g", "0", mkstream=True)
        except redis.ResponseError:
            pass
        except (redis.ConnectionError, redis.TimeoutError):
            return
        try:
            while not self.stop.is_set():
                client.xadd("work", {"job": rng.randint(0, 9)}, maxlen=200, approximate=False)
                got = client.xreadgroup("g", rng.choice(["c1", "c2"]), {"work": ">"}, count=3)
                for _, entries in got:
                    ids = [entry_id for entry_id, _ in entries]
                    if rng.random() < 0.7 and ids:
                        client.xack("work", "g", *ids)
                    elif ids:
                        client.xclaim("work", "g", "c3", 0, ids)
        except (redis.ConnectionError, redis.TimeoutError):
            pass

    def trimmer(self) -> None:
        client = self.client()
        try:
            while not self.stop.is_set():
                client.xadd("trimmed", {"x": 1}, maxlen=50, approximate=True)
                client.xtrim("trimmed", maxlen=20)
        except (redis.ConnectionError, redis.TimeoutError):
            pass

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def join(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(10)


def check(client: redis.Redis, load: Load) -> int:
    """Assert the invariants; the number of acknowledged entries checked."""
    checked = 0
    for key, acked in load.acked.items():
        present = {entry_id for entry_id, _ in client.xrange(key)}
        assert acked <= present, f"{len(acked - present)} acknowledged entries of {key!r} lost"
        assert present <= load.sent[key], f"{key!r} holds entries no writer sent"
        checked += len(acked)
    if client.exists("work"):
        stream = client.xinfo_stream("work")
        for group in client.xinfo_groups("work"):
            assert group["entries-read"] is None or group["entries-read"] <= stream["entries-added"]
            pending = client.xpending_range("work", group["name"], "-", "+", 10_000)
            last = tuple(map(int, group["last-delivered-id"].split(b"-")))
            assert all(tuple(map(int, p["message_id"].split(b"-"))) <= last for p in pending)
            assert len(pending) == group["pending"]
    return checked


def test_kill9_under_load_loses_nothing_acknowledged(tmp_path):
    rng = random.Random(7)
    checked = 0
    acked: dict[bytes, set[bytes]] = {}
    sent: dict[bytes, set[bytes]] = {}
    for round_ in range(3):
        proc = start(str(tmp_path), *ARGS)
        load = Load(proc.port, round_, acked, sent)
        before = sum(map(len, acked.values()))
        load.start()
        time.sleep(rng.uniform(0.3, 1.2))
        kill9(proc)
        load.join()
        assert sum(map(len, acked.values())) > before, "the load wrote nothing before the kill"
        proc = start(str(tmp_path), *ARGS)
        try:
            checked = check(proc.client(), load)
        finally:
            kill9(proc)
    assert checked > 100
