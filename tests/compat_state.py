"""The state a server reports, as plain JSON values, and the workload that made tests/data/compat_cdefdd3.

The fixture was made once by the server of commit cdefdd3 (the release before
Redis 8 stream features, exact lag, KEYSHARED, retention and IDMP):

    git worktree add /tmp/old cdefdd3
    .venv/bin/python -m tests.compat_state /tmp/old tests/data/compat_cdefdd3

It runs `workload_before_rewrite`, rewrites the AOF without preamble (so the base
holds the old rewrite's command forms), runs `workload_after_rewrite` (its
effects go to the increment in the old effect forms), SAVEs (dump.mpk) and
records `capture()` of the old server in expected.json beside the files.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

DBS = (0, 3)
FAR_FUTURE_MS = 4102444800000  # 2100-01-01: a TTL no test run outlives


def workload_before_rewrite(c: redis.Redis) -> None:
    """Streams across two nodes, deletes, trims, groups with PELs and consumers, strings with TTLs."""
    for i in range(1, 151):
        c.xadd("orders", {"n": str(i), "sku": f"s{i % 7}"}, id=f"{1000 + i}-0")
    c.xdel("orders", "1003-0", "1010-0", "1120-0")
    c.xtrim("orders", minid="1002-0")
    c.xgroup_create("orders", "billing", id="0")
    c.xgroup_create("orders", "shipping", id="1100-0")
    c.xreadgroup("billing", "alice", {"orders": ">"}, count=5)
    c.xreadgroup("billing", "bob", {"orders": ">"}, count=3)
    c.xack("orders", "billing", "1002-0", "1005-0")
    c.xreadgroup("shipping", "carol", {"orders": ">"}, count=4, noack=True)
    c.xgroup_createconsumer("orders", "shipping", "dave")
    c.set("plain", "v1")
    c.set("forever", "v2", pxat=FAR_FUTURE_MS)
    c.select(3)
    c.xadd("events", {"a": "1"}, id="5-1")
    c.xadd("events", {"a": "2", "b": "x"}, id="5-2")
    c.xdel("events", "5-1", "5-2")
    c.xgroup_create("events", "g", id="$")
    c.execute_command("XSETID", "events", "9-9", "ENTRIESADDED", "12", "MAXDELETEDID", "7-0")
    c.set("db3string", "here", pxat=FAR_FUTURE_MS - 1)
    c.select(0)


def workload_after_rewrite(c: redis.Redis) -> None:
    """Writes whose effects land in the AOF increment: reads as XCLAIMs, claims, trims, TTLs."""
    c.xreadgroup("billing", "alice", {"orders": ">"}, count=2)
    c.xclaim("orders", "billing", "bob", 0, ["1004-0", "1006-0"])
    c.xautoclaim("orders", "billing", "erin", 0, "0-0", count=1)
    c.xack("orders", "shipping", "1101-0")
    c.xadd("orders", {"n": "late"}, id="2000-0", maxlen=140)
    c.xgroup_delconsumer("orders", "shipping", "dave")
    c.xadd("tiny", {"k": "v"}, id="1-1")
    c.xgroup_create("tiny", "solo", id="0", entries_read=0)
    c.set("ttl", "v3", px=10**11)  # relative: the AOF holds the absolute PXAT
    c.expire("plain", 10**9)
    c.set("soon", "gone", px=2500)  # expired by the time anyone loads the fixture


def _plain(value):
    """bytes -> str, lists and maps recursively: JSON-able."""
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    return value


def capture(c: redis.Redis) -> dict:
    """What a RESP2 client with no reply parsing sees of every key in DBS."""
    c.response_callbacks.clear()
    state: dict = {}
    for db in DBS:
        c.execute_command("SELECT", db)
        keys = sorted(k.decode() for k in c.execute_command("KEYS", "*"))
        for key in keys:
            kind = c.execute_command("TYPE", key).decode()
            item = {"type": kind, "pexpiretime": c.execute_command("PEXPIRETIME", key)}
            if kind == "string":
                item["value"] = c.execute_command("GET", key)
            else:
                item["xrange"] = c.execute_command("XRANGE", key, "-", "+")
                item["xinfo_full"] = c.execute_command("XINFO", "STREAM", key, "FULL")
                groups = c.execute_command("XINFO", "GROUPS", key)
                item["xinfo_groups"] = groups
                names = [g[b"name"] if isinstance(g, dict) else g[1] for g in groups]
                item["xpending"] = {n.decode(): c.execute_command("XPENDING", key, n) for n in names}
            state[f"{db}/{key}"] = _plain(item)
    c.execute_command("SELECT", 0)
    return state


def make(old_tree: str, out: str) -> None:
    """Run the old server of `old_tree`, apply the workload, keep its files and its replies."""
    work = tempfile.mkdtemp(prefix="compat-")
    port = 6390 + int(time.time()) % 500
    argv = [sys.executable, "-m", "server", "--port", str(port), "--dir", work, "--appendonly", "yes",
            "--appendfsync", "always", "--save", ""]
    proc = subprocess.Popen(argv, cwd=old_tree)
    try:
        c = redis.Redis(port=port)
        for _ in range(100):
            try:
                c.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.1)
        workload_before_rewrite(c)
        c.config_set("aof-use-rdb-preamble", "no")
        c.bgrewriteaof()
        while c.info("persistence")["aof_rewrite_in_progress"]:
            time.sleep(0.05)
        time.sleep(0.5)
        workload_after_rewrite(c)
        c.save()
        info = c.info("server")
        state = capture(c)
        c.shutdown(nosave=True)
    finally:
        if proc.poll() is None:
            proc.terminate()
        proc.wait(10)
    dest = Path(out)
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    shutil.copy(Path(work) / "dump.mpk", dest / "dump.mpk")
    shutil.copytree(Path(work) / "appendonlydir", dest / "appendonlydir")
    meta = {"made_by": "millrace cdefdd3", "redis_version": info["redis_version"], "state": state}
    (dest / "expected.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    make(sys.argv[1], sys.argv[2])
