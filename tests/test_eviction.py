"""maxmemory-policy evicts, as Redis 8.2.3 does (server/eviction.py), where every policy used to answer
as noeviction: OOM on writes Redis takes after evicting.

Memory figures differ between the two servers (Millrace's is its data's size, see server/maxmemory.py),
so each server's limit is set from its own empty-server figure plus the same margin, and the tests
compare what is evicted, never how much. The LFU counters are compared exactly with lfu-log-factor 0,
where every access counts one (the logarithm's randomness gone).
"""

from __future__ import annotations

import subprocess
import time

import pytest
import redis as redis_py

from tests.servers import millrace_and_redis
from tests.test_persistence import wait_for

MARGIN = 2_000_000
VALUE = "v" * 1000


@pytest.fixture(scope="module")
def pair():
    """Millrace and Redis 8.2.3, in that order."""
    yield from millrace_and_redis()


def fresh(proc, policy: str) -> redis_py.Redis:
    client = proc.client(protocol=2)
    client.config_set("maxmemory", 0)
    client.flushall()
    client.config_set("maxmemory-policy", policy)
    client.config_set("lfu-log-factor", 10)
    client.config_resetstat()
    memory = client.info("memory")  # the empty server's memory (Millrace: its start-up figure, as its meter counts)
    client.empty_memory = memory["used_memory_startup"] if "millrace_version" in client.info("server") else memory["used_memory"]
    return client


def limit(client: redis_py.Redis, margin: int = MARGIN) -> None:
    """maxmemory at the empty server's memory plus margin."""
    client.config_set("maxmemory", client.empty_memory + margin)


def write(client: redis_py.Redis, prefix: str, count: int, **kw) -> int:
    """SET prefix0..count-1; the number of OOM refusals."""
    refused = 0
    for i in range(count):
        try:
            client.set(f"{prefix}{i}", VALUE, **kw)
        except redis_py.ResponseError as exc:
            assert str(exc).startswith("command not allowed when used memory"), exc
            refused += 1
    return refused


def alive(client: redis_py.Redis, prefix: str, count: int) -> int:
    pipe = client.pipeline(transaction=False)
    for i in range(count):
        pipe.exists(f"{prefix}{i}")
    return sum(pipe.execute())


@pytest.mark.parametrize("policy", ["allkeys-lru", "allkeys-lfu", "allkeys-random"])
def test_allkeys_policies_evict_instead_of_refusing(pair, policy):
    seen = []
    for proc in pair:
        client = fresh(proc, policy)
        try:
            limit(client)
            refused = write(client, "k", 6000)  # ~6 MB against a 2 MB margin
            evicted = client.info("stats")["evicted_keys"]
            seen.append((refused, evicted > 1000, evicted + client.dbsize() == 6000))
        finally:
            client.config_set("maxmemory", 0)
    assert seen[0] == seen[1] == (0, True, True)


@pytest.mark.parametrize("policy", ["volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl"])
def test_volatile_policies_evict_only_keys_with_a_ttl_then_refuse(pair, policy):
    seen = []
    for proc in pair:
        client = fresh(proc, policy)
        try:
            write(client, "keep", 300)  # no TTL: never a candidate
            write(client, "vol", 600, ex=1000)
            limit(client, MARGIN + 1_000_000)
            refused = write(client, "new", 6000)
            stats = client.info("stats")
            seen.append((alive(client, "keep", 300), alive(client, "vol", 600), stats["evicted_keys"] >= 600, refused > 1000))
        finally:
            client.config_set("maxmemory", 0)
    assert seen[0] == seen[1] == (300, 0, True, True)


def test_volatile_ttl_evicts_the_nearest_expiry_first(pair):
    seen = []
    for proc in pair:
        client = fresh(proc, "volatile-ttl")
        try:
            write(client, "soon", 1000, ex=100)
            write(client, "late", 1000, ex=100_000)
            limit(client, MARGIN + 500_000)
            write(client, "new", 1000)
            evicted = client.info("stats")["evicted_keys"]
            soon_gone, late_gone = 1000 - alive(client, "soon", 1000), 1000 - alive(client, "late", 1000)
            seen.append((evicted > 0, soon_gone > 4 * late_gone))
        finally:
            client.config_set("maxmemory", 0)
    assert seen[0] == seen[1] == (True, True)


@pytest.mark.parametrize("policy", ["allkeys-lru", "allkeys-lfu"])
def test_keys_in_use_outlive_the_others(pair, policy):
    """LRU/LFU: keys read all along stay while keys written once go. Both servers keep a larger share of
    the hot keys than of the cold; Millrace keeps nearly all. (Redis's LRU clock counts whole seconds, so
    among keys used within the same second its sampled pick is a draw: it loses a third of them here.)"""
    kept = []
    for proc in pair:
        client = fresh(proc, policy)
        try:
            write(client, "hot", 100)
            for batch in range(10):
                write(client, f"cold{batch}:", 100)
            time.sleep(1.1)
            for i in range(100):
                client.get(f"hot{i}")
            limit(client)
            for batch in range(10, 60):
                write(client, f"cold{batch}:", 100)
                for _ in range(2):
                    for i in range(100):
                        client.get(f"hot{i}")
            cold = sum(alive(client, f"cold{batch}:", 100) for batch in range(60))
            assert client.info("stats")["evicted_keys"] > 1000
            kept.append((alive(client, "hot", 100) / 100, cold / 6000))
        finally:
            client.config_set("maxmemory", 0)
    (millrace_hot, millrace_cold), (redis_hot, redis_cold) = kept
    assert redis_hot > redis_cold and millrace_hot > millrace_cold
    assert millrace_hot >= 0.95 and millrace_cold < 0.5


COUNTED = [  # (key, command): the key's LFU counter after the command, each from a fresh 5
    ("k", ["GET", "k"]), ("k", ["SET", "k", "v"]), ("k", ["SET", "k", "v", "GET"]), ("k", ["GETSET", "k", "v"]),
    ("k", ["APPEND", "k", "x"]), ("k", ["MGET", "k", "k"]), ("k", ["TYPE", "k"]), ("k", ["EXISTS", "k"]),
    ("k", ["TTL", "k"]), ("k", ["OBJECT", "ENCODING", "k"]), ("k", ["EXPIRE", "k", "100"]), ("k", ["TOUCH", "k"]),
    ("k", ["WATCH", "k"]),
    ("s", ["XADD", "s", "*", "f", "v"]), ("s", ["XLEN", "s"]), ("s", ["XRANGE", "s", "-", "+"]),
    ("s", ["XREAD", "STREAMS", "s", "0"]), ("s", ["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"]),
    ("s", ["XACK", "s", "g", "1-1"]), ("s", ["XINFO", "STREAM", "s"]), ("s", ["XTRIM", "s", "MAXLEN", "5"]),
    ("k2", ["RENAME", "k", "k2"]), ("k2", ["COPY", "k", "k2"]),
]  # fmt: skip


def lfu_counters(proc) -> list:
    client = fresh(proc, "allkeys-lfu")
    client.config_set("lfu-log-factor", 0)  # every access counts one
    seen = []
    for key, command in COUNTED:
        client.flushall()
        client.set("k", "v")
        client.xadd("s", {"f": "v"}, id="1-1")
        client.xgroup_create("s", "g", "0")
        client.execute_command(*command)
        seen.append((" ".join(command), client.object("freq", key)))
    client.set("x", "v")
    client.execute_command("CLIENT", "NO-TOUCH", "ON")
    client.get("x")
    seen.append(("NO-TOUCH GET", client.object("freq", "x")))
    client.touch("x")  # TOUCH counts even then
    seen.append(("NO-TOUCH TOUCH", client.object("freq", "x")))
    client.execute_command("CLIENT", "NO-TOUCH", "OFF")
    client.set("y", "v")
    client.get("y")
    client.get("y")
    client.delete("y")
    client.set("y", "v")  # a new key: its counter starts again, the deleted key's does not carry over
    seen.append(("DEL then SET", client.object("freq", "y")))
    client.config_set("lfu-log-factor", 10)
    return seen


def test_lfu_counters_count_accesses_as_redis(pair):
    """OBJECT FREQ follows Redis's LFU counter (redis-cli --hotkeys reads it): a new key at 5, one per
    lookup (two for the commands that look up twice), none for TYPE/EXISTS/TTL/OBJECT."""
    millrace, redis = (lfu_counters(proc) for proc in pair)
    assert millrace == redis
    assert ("GET k", 6) in millrace and ("TYPE k", 5) in millrace


def test_idletime_under_an_lru_policy(pair):
    seen = []
    for proc in pair:
        client = fresh(proc, "allkeys-lru")
        client.set("idle", "v")
        client.set("busy", "v")
        time.sleep(2.2)
        client.get("busy")
        seen.append((client.object("idletime", "idle") >= 2, client.object("idletime", "busy")))
    assert seen[0] == seen[1] == (True, 0)


def test_redis_cli_hotkeys_finds_the_hot_key(pair):
    """redis-cli --hotkeys scans OBJECT FREQ under an LFU policy (it listed nothing: every FREQ was 0)."""
    millrace = pair[0]
    client = fresh(millrace, "allkeys-lfu")
    for i in range(50):
        client.set(f"cool{i}", "v")
    client.set("hottest", "v")
    for _ in range(300):
        client.get("hottest")
    out = subprocess.run(["redis-cli", "-p", str(millrace.port), "--hotkeys"], capture_output=True, text=True, timeout=30).stdout
    listed = [line for line in out.splitlines() if "hot key found with counter" in line]
    assert listed and '"hottest"' in listed[0], out


def test_an_eviction_is_a_del_for_replicas_watch_and_notifications():
    """Evicted keys leave the replica too (their DELs are propagated), an `evicted` event is
    published, and a replica (replica-ignore-maxmemory yes) evicts nothing of its own."""
    from tests.servers import start_millrace

    primary = start_millrace()
    replica = start_millrace("--replicaof", "127.0.0.1", str(primary.port), "--maxmemory", "1mb", "--maxmemory-policy", "allkeys-random")
    try:
        source, copy = fresh(primary, "allkeys-random"), replica.client(protocol=2)
        wait_for(lambda: copy.info("replication")["master_link_status"] == "up")
        source.config_set("notify-keyspace-events", "Ee")
        events = source.pubsub()
        events.psubscribe("__keyevent@0__:evicted")
        assert events.get_message(timeout=1)["type"] == "psubscribe"
        watcher = source.pipeline(transaction=True)
        write(source, "k", 100)
        watcher.watch("k0")
        limit(source)
        assert write(source, "more", 4000) == 0
        evicted = source.info("stats")["evicted_keys"]
        assert evicted > 1000
        assert source.wait(1, 5000) == 1
        wait_for(lambda: copy.dbsize() == source.dbsize())
        assert copy.info("stats")["evicted_keys"] == 0  # its keys went by the primary's DELs
        assert sorted(copy.keys()) == sorted(source.keys())
        messages = []
        while (message := events.get_message(timeout=0.5)) is not None:
            messages.append(message["data"])
        assert len(messages) == evicted
        if source.exists("k0") == 0:  # k0 evicted: the WATCH fails as after a DEL
            watcher.multi()
            watcher.set("k0", "x")
            with pytest.raises(redis_py.WatchError):
                watcher.execute()
        events.close()
    finally:
        replica.stop()
        primary.stop()


def used_now(client: redis_py.Redis, keys: list[str]) -> int:
    """The memory the server's maxmemory check sees now: Redis's used_memory; Millrace's start-up figure
    plus MEMORY USAGE of every key (what its meter measures)."""
    if "millrace_version" not in client.info("server"):
        return client.info("memory")["used_memory"]
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.memory_usage(key)
    return client.info("memory")["used_memory_startup"] + sum(size or 0 for size in pipe.execute())


def test_writes_that_add_nothing_evict_nothing(pair):
    """Overwrites of the same size, SET NX on a key that exists, and a WRONGTYPE write change no memory:
    they used to count their arguments as growth, and evicted live keys for it."""
    seen = []
    for proc in pair:
        client = fresh(proc, "allkeys-lru")
        try:
            write(client, "k", 1000)
            client.xadd("stream", {"f": "v"})
            time.sleep(1.1)  # Millrace's meter measures the keys exactly
            client.config_set("maxmemory", used_now(client, [f"k{i}" for i in range(1000)] + ["stream"]) + 300_000)
            for _ in range(2000):
                client.set("k0", VALUE)
            write(client, "k", 1000, nx=True)
            for _ in range(500):
                with pytest.raises(redis_py.ResponseError):
                    client.xadd("k1", {"f": "v"})
            seen.append((client.info("stats")["evicted_keys"], client.dbsize()))
        finally:
            client.config_set("maxmemory", 0)
    assert seen[0] == seen[1] == (0, 1001)


def test_keys_moved_in_are_eviction_candidates(pair):
    """Keys MOVEd into a database are candidates there (they were not listed, so only the keys used
    there since were sampled: the hot ones went first)."""
    seen = []
    for proc in pair:
        client = fresh(proc, "allkeys-lru")
        other = proc.client(protocol=2, db=1)
        try:
            write(client, "cold", 3000)
            pipe = client.pipeline(transaction=False)
            for i in range(3000):
                pipe.move(f"cold{i}", 1)
            pipe.execute()
            time.sleep(1.1)  # the moved keys are idle for a second
            for i in range(100):
                other.set(f"hot{i}", VALUE)
            for i in range(100):
                other.get(f"hot{i}")
            limit(client, 1_500_000)
            refused = write(client, "new", 200)
            seen.append((refused, client.info("stats")["evicted_keys"] > 1000, alive(other, "hot", 100)))
        finally:
            client.config_set("maxmemory", 0)
            other.flushall()
            other.close()
    assert seen[0] == seen[1] == (0, True, 100)


def test_keys_loaded_at_start_up_are_eviction_candidates(tmp_path):
    """Keys read from the AOF at start-up are sampled like any other (they were not listed: only the
    keys used since were, so the hot keys went first)."""
    from tests.servers import start_millrace

    args = ("--appendonly", "yes", "--maxmemory-policy", "allkeys-lru")
    server = start_millrace(*args, workdir=str(tmp_path))
    try:
        write(server.client(protocol=2), "cold", 3000)
    finally:
        server.stop()
    server = start_millrace(*args, workdir=str(tmp_path))
    try:
        client = fresh_limits(server)
        assert client.dbsize() == 3000
        for i in range(100):
            client.set(f"hot{i}", VALUE)
        limit(client, 1_500_000)
        assert write(client, "new", 200) == 0
        assert client.info("stats")["evicted_keys"] > 1000 and alive(client, "hot", 100) == 100
    finally:
        server.stop()


def fresh_limits(proc) -> redis_py.Redis:
    """fresh() without the FLUSHALL: the server's start-up figure as the empty server's memory."""
    client = proc.client(protocol=2)
    client.empty_memory = client.info("memory")["used_memory_startup"]
    return client


def test_a_replica_told_not_to_ignore_maxmemory_evicts_too():
    """replica-ignore-maxmemory no: the replica evicts while it applies its primary's writes, as Redis's
    (it grew past its maxmemory)."""
    from tests.servers import start_millrace

    primary = start_millrace()
    replica = start_millrace("--replicaof", "127.0.0.1", str(primary.port), "--maxmemory", "1",
                             "--maxmemory-policy", "allkeys-random", "--replica-ignore-maxmemory", "no")  # fmt: skip
    try:
        source, copy = primary.client(protocol=2), replica.client(protocol=2)
        wait_for(lambda: copy.info("replication")["master_link_status"] == "up")
        time.sleep(1.1)  # the replica's meter has measured: it is over its maxmemory from now on
        write(source, "k", 500)
        assert source.wait(1, 5000) == 1
        assert source.dbsize() == 500
        assert copy.dbsize() <= 1 and copy.info("stats")["evicted_keys"] >= 499
    finally:
        replica.stop()
        primary.stop()


def test_a_deletion_makes_room_at_once(pair):
    """DEL and UNLINK take their keys' size off at once: the room counted for the next writes, where they
    evicted live keys (the meter only saw the deletion at its next measure)."""
    seen = []
    for proc in pair:
        client = fresh(proc, "allkeys-lru")
        try:
            write(client, "k", 1000)
            time.sleep(1.1)  # Millrace's meter has measured the keys
            client.config_set("maxmemory", used_now(client, [f"k{i}" for i in range(1000)]) + 100_000)
            client.delete(*[f"k{i}" for i in range(250)])
            client.unlink(*[f"k{i}" for i in range(250, 500)])
            write(client, "new", 300)
            seen.append((client.info("stats")["evicted_keys"], client.dbsize()))
        finally:
            client.config_set("maxmemory", 0)
    assert seen[0] == seen[1] == (0, 800)


def test_a_client_pause_holds_evictions(pair):
    """CLIENT PAUSE WRITE holds evictions, as Redis's PAUSE_ACTION_EVICT: a held write evicted keys (and
    moved the replication offset a failover waits on) before the pause held it."""
    import threading

    seen = []
    for proc in pair:
        client = fresh(proc, "allkeys-random")
        try:
            write(client, "k", 1000)
            time.sleep(1.1)
            client.client_pause(3000, all=False)
            client.config_set("maxmemory", used_now(client, [f"k{i}" for i in range(1000)]) - 500_000)
            results = []
            writer = threading.Thread(target=lambda out=results, proc=proc: out.append(proc.client(protocol=2).set("new", "v")))
            writer.start()
            time.sleep(0.5)
            during = (client.dbsize(), client.info("stats")["evicted_keys"])
            client.client_unpause()
            writer.join()
            seen.append((during, client.info("stats")["evicted_keys"] > 0, results))  # ("new" itself may be evicted since)
        finally:
            client.client_unpause()
            client.config_set("maxmemory", 0)
    assert seen[0] == seen[1] == ((1000, 0), True, [True])


def test_a_replica_ignoring_maxmemory_never_answers_oom():
    """replica-ignore-maxmemory yes: Redis's performEvictions answers EVICT_OK on the replica, so a write
    gets READONLY on a read-only replica and runs on a writable one (both got OOM)."""
    from tests.servers import start_millrace

    primary = start_millrace()
    replica = start_millrace("--replicaof", "127.0.0.1", str(primary.port), "--maxmemory", "1")
    try:
        copy = replica.client(protocol=2)
        wait_for(lambda: copy.info("replication")["master_link_status"] == "up")
        time.sleep(1.1)  # measured: over its maxmemory
        with pytest.raises(redis_py.ReadOnlyError):
            copy.set("k", "v")
        copy.config_set("replica-read-only", "no")
        assert copy.set("k", "v") and copy.info("stats")["evicted_keys"] == 0
    finally:
        replica.stop()
        primary.stop()


@pytest.mark.parametrize("policy", ["noeviction", "allkeys-lru"])
def test_a_flush_makes_room_at_once(pair, policy):
    """After FLUSHALL a write is taken at once (it got OOM until the next measure: nothing left to evict)."""
    seen = []
    for proc in pair:
        client = fresh(proc, policy)
        try:
            limit(client, 1_500_000)
            refused = write(client, "k", 3000)
            client.flushall()
            seen.append((refused > 0 if policy == "noeviction" else refused == 0, client.set("fresh", "v")))
        finally:
            client.config_set("maxmemory", 0)
    assert seen[0] == seen[1] == (True, True)
