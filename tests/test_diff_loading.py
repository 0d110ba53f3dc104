"""While an AOF loads at start-up, against Redis 8.2.3: clients are answered, with LOADING where a
command may not run yet, and INFO shows the load's progress.

Redis 8.2.3 writes the AOF (no RDB preamble, so both servers replay commands), each server starts
on its own copy with `key-load-delay` (Redis's test knob: a pause after each replayed command), and
a client asks while the load runs.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import redis

from tests.rawclient import RawConn, encode_command
from tests.servers import ROOT, free_port, redis_server_path, require_redis

KEYS = 4000
DELAY_US = 1000  # about 4 s of loading on either server, a turn of the event loop each second
ARGS = ("--appendonly", "yes", "--aof-use-rdb-preamble", "no", "--key-load-delay", str(DELAY_US))


@pytest.fixture(scope="module")
def aof_dir(tmp_path_factory) -> str:
    """An appendonlydir Redis 8.2.3 wrote: KEYS SETs."""
    require_redis()
    workdir = str(tmp_path_factory.mktemp("source"))
    proc = start("redis", workdir, "--appendonly", "yes", "--aof-use-rdb-preamble", "no", "--save", "")
    try:
        client = wait_loaded(proc)
        pipe = client.pipeline(transaction=False)
        for index in range(KEYS):
            pipe.set(f"key:{index}", "v")
        pipe.execute()
        client.close()
    finally:
        stop(proc)
    return os.path.join(workdir, "appendonlydir")


def start(kind: str, workdir: str, *args: str) -> subprocess.Popen:
    port = free_port()
    if kind == "redis":
        argv = [redis_server_path(), "--port", str(port), "--bind", "127.0.0.1", "--dir", workdir, *args]
    else:
        argv = [sys.executable, "-m", "server", "--port", str(port), "--dir", workdir, *args]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=open(os.path.join(workdir, f"{kind}.log"), "wb"), stderr=subprocess.STDOUT)
    proc.port = port
    return proc


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def connect(proc: subprocess.Popen) -> RawConn:
    deadline = time.monotonic() + 20
    while True:
        try:
            return RawConn(proc.port, timeout=10)
        except OSError:
            assert time.monotonic() < deadline and proc.poll() is None, "the server did not listen"
            time.sleep(0.02)


def wait_loaded(proc: subprocess.Popen) -> redis.Redis:
    deadline = time.monotonic() + 60
    while True:
        try:
            client = redis.Redis(port=proc.port, socket_timeout=10)
            client.ping()
            return client
        except redis.ConnectionError:  # refused, or LOADING (BusyLoadingError)
            assert time.monotonic() < deadline and proc.poll() is None, "the server did not load"
            time.sleep(0.05)


def persistence(conn: RawConn) -> dict[str, str]:
    text = conn.call("INFO", "persistence").decode()
    return dict(line.split(":", 1) for line in text.split("\r\n") if ":" in line)


def copy_of(aof_dir: str, tmp_path, kind: str) -> str:
    workdir = str(tmp_path / kind)
    shutil.copytree(aof_dir, os.path.join(workdir, "appendonlydir"))
    return workdir


def loading_story(kind: str, aof_dir: str, tmp_path) -> list:
    """What a client sees while the load runs, and once it is done."""
    proc = start(kind, copy_of(aof_dir, tmp_path, kind), *ARGS)
    try:
        conn = connect(proc)
        # one write: both servers read a client's requests between steps of the load, all of them at once
        asked = [
            ("PING",), ("DBSIZE",), ("GET", "key:1"), ("CONFIG", "GET", "appendonly"), ("MULTI",), ("SET", "k", "v"), ("EXEC",),
            # a setting that changes which commands are checked must not let writes through mid-load
            ("CONFIG", "SET", "maxmemory", "0"), ("SET", "a", "1"), ("CONFIG", "SET", "save", ""), ("GET", "a"),
        ]  # fmt: skip
        conn.send(b"".join(encode_command(*args) for args in [("INFO", "persistence"), *asked]))
        text = conn.read().decode()
        info = dict(line.split(":", 1) for line in text.split("\r\n") if ":" in line)  # (answered between steps: some bytes are loaded)
        assert info["loading"] == "1", "the load ended before the first question: raise KEYS or DELAY_US"
        seen = [
            *(plain(conn.read()) for _ in asked),
            info["aof_enabled"],
            [name for name in info if name.startswith("loading")],
        ]
        total, loaded, perc = int(info["loading_total_bytes"]), int(info["loading_loaded_bytes"]), float(info["loading_loaded_perc"])
        assert total == sum(os.path.getsize(os.path.join(aof_dir, name)) for name in os.listdir(aof_dir) if name.endswith(".aof"))
        assert 0 < loaded < total and perc == pytest.approx(loaded * 100 / total, abs=0.01)
        conn.close()
        client = wait_loaded(proc)
        seen += [client.dbsize(), client.get("a"), persistence_loading(client)]
        client.close()
        return seen
    finally:
        stop(proc)


def plain(reply):
    """A reply as a comparable value (hiredis's error objects compare by identity)."""
    return f"-{reply}" if isinstance(reply, Exception) else reply


def persistence_loading(client: redis.Redis) -> list[str]:
    return [name for name in client.info("persistence") if name.startswith("loading")]


def test_a_loading_server_answers_as_redis(aof_dir, tmp_path):
    ours, theirs = loading_story("millrace", aof_dir, tmp_path / "ours"), loading_story("redis", aof_dir, tmp_path / "theirs")
    assert ours == theirs
    assert theirs[:2] == ["-LOADING Redis is loading the dataset in memory"] * 2
    assert theirs[-3:] == [KEYS, None, ["loading"]]


@pytest.mark.parametrize("how", ["SHUTDOWN SAVE", "SIGTERM"])
def test_a_shutdown_while_loading_saves_nothing(aof_dir, tmp_path, how):
    """Half the data must never become the snapshot: Redis exits without saving while it loads."""
    seen = []
    for kind in ("millrace", "redis"):
        workdir = copy_of(aof_dir, tmp_path / kind, kind)
        proc = start(kind, workdir, *ARGS, "--save", "3600 1")
        try:
            conn = connect(proc)
            assert persistence(conn)["loading"] == "1"
            if how == "SIGTERM":
                proc.send_signal(signal.SIGTERM)
            else:
                conn.send(encode_command("SHUTDOWN", "SAVE"))
            assert proc.wait(30) == 0
            conn.close()
        finally:
            stop(proc)
        seen.append(sorted(name for name in os.listdir(workdir) if not name.endswith(".log")))
    assert seen[0] == seen[1] == ["appendonlydir"]


def test_a_subscriber_and_a_monitor_during_the_load(aof_dir, tmp_path):
    """processCommand's order: the subscribed-context check comes before LOADING, LOADING before a monitor's."""
    seen = []
    for kind in ("millrace", "redis"):
        proc = start(kind, copy_of(aof_dir, tmp_path / kind, kind), *ARGS)
        try:
            subscriber, monitor = connect(proc), connect(proc)
            subscriber.send(encode_command("SUBSCRIBE", "ch") + encode_command("GET", "a") + encode_command("DBSIZE"))
            monitor.send(encode_command("MONITOR") + encode_command("GET", "a") + encode_command("SET", "a", "1"))
            seen.append([plain(subscriber.read()) for _ in range(3)] + [plain(monitor.read()) for _ in range(3)])
            assert persistence(connect(proc))["loading"] == "1", "the load ended before the questions: raise KEYS or DELAY_US"
        finally:
            stop(proc)
    assert seen[0] == seen[1]


def test_appendonly_cannot_be_switched_during_the_load(aof_dir, tmp_path):
    """A rewrite would write half the data as the base, and the AOF opens after the load whatever the
    setting says: Millrace refuses the switch until the load is done (Redis 8.2.3 leaves the AOF on)."""
    proc = start("millrace", copy_of(aof_dir, tmp_path, "millrace"), *ARGS)
    try:
        conn = connect(proc)
        conn.send(encode_command("CONFIG", "SET", "appendonly", "no") + encode_command("CONFIG", "GET", "appendonly") + encode_command("INFO", "persistence"))
        refused, setting = plain(conn.read()), conn.read()
        assert "loading:1" in conn.read().decode()
        assert refused.startswith("-ERR CONFIG SET failed (possibly related to argument 'appendonly')") and setting == [b"appendonly", b"yes"]
        client = wait_loaded(proc)
        assert client.config_get("appendonly") == {"appendonly": "yes"} and client.info("persistence")["aof_enabled"] == 1
    finally:
        stop(proc)
