"""Durability end to end: the real server saves, is killed or stopped, restarts, and holds the same state.

Each test runs a random workload over every kind of state (tests/persist_workload.py),
takes the full picture a client can see, restarts the server on the same directory
(kill -9 where the promise is about crashes) and compares the picture field by field.
"""

from __future__ import annotations

import os
import signal
import time

import redis

from tests.persist_workload import Workload, state
from tests.servers import start_millrace


def start(workdir: str, *args: str):
    return start_millrace("--enable-debug-command", "yes", *args, workdir=workdir)


def kill9(proc) -> None:
    proc.proc.send_signal(signal.SIGKILL)
    proc.proc.wait()
    proc.log.close()


def wait_for(predicate, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def no_child(client) -> bool:
    info = client.info("persistence")
    return info["rdb_bgsave_in_progress"] == 0 and info["aof_rewrite_in_progress"] == 0


def assert_restarts_with(tmp_path, proc, before: dict, *args: str, structure: bool = True) -> None:
    """kill -9 the server, start it again on the same directory, and compare the full state."""
    kill9(proc)
    proc = start(str(tmp_path), *args)
    try:
        assert state(proc.client(), structure=structure) == before
    finally:
        proc.stop()


def workload(client, seed: int, steps: int = 400, deletes: bool = True) -> Workload:
    work = Workload(client, seed, deletes=deletes)
    work.steps(steps)
    client.execute_command("SELECT", 0)
    return work


def test_save_then_kill9_loads_the_snapshot(tmp_path):
    proc = start(str(tmp_path), "--save", "")
    client = proc.client()
    workload(client, 1)
    assert client.save() is True
    before = state(client)
    assert before, "the workload left no keys"
    client.close()
    kill9(proc)
    assert (tmp_path / "dump.mpk").exists()
    proc = start(str(tmp_path), "--save", "")
    try:
        client = proc.client()
        assert state(client) == before
        info = client.info("persistence")
        assert info["rdb_changes_since_last_save"] == 0 and info["loading"] == 0
        assert info["rdb_last_load_keys_loaded"] == len(before)
    finally:
        proc.stop()


def test_debug_reload_keeps_everything(tmp_path):
    proc = start(str(tmp_path))
    try:
        client = proc.client()
        workload(client, 2)
        before = state(client)
        assert client.execute_command("DEBUG", "RELOAD") == b"OK"
        assert state(client) == before
        workload(client, 3, 200)  # the reloaded streams, groups and PELs keep working
        before = state(client)
        assert client.execute_command("DEBUG", "RELOAD") == b"OK"
        assert state(client) == before
    finally:
        proc.stop()


def test_aof_always_survives_kill9(tmp_path):
    proc = start(str(tmp_path), "--appendonly", "yes", "--appendfsync", "always", "--save", "")
    client = proc.client()
    workload(client, 4)
    before = state(client)
    kill9(proc)
    names = sorted(os.listdir(tmp_path / "appendonlydir"))
    assert names == ["appendonly.aof.1.base.mpk", "appendonly.aof.1.incr.aof", "appendonly.aof.manifest"]
    proc = start(str(tmp_path), "--appendonly", "yes", "--save", "")
    try:
        client = proc.client()
        assert state(client) == before
        # the replayed changes are counted, as Redis counts them (compared with it in test_diff_counters)
        assert client.info("persistence")["rdb_changes_since_last_save"] > 0
        assert client.execute_command("DEBUG", "LOADAOF") == b"OK"
        assert state(client) == before
        assert client.info("persistence")["rdb_changes_since_last_save"] == 0  # Redis's DEBUG LOADAOF zeroes it
    finally:
        proc.stop()


def test_bgrewriteaof_switches_files_and_keeps_state(tmp_path):
    proc = start(str(tmp_path), "--appendonly", "yes", "--save", "")
    client = proc.client()
    workload(client, 5)
    assert client.bgrewriteaof() is True
    workload(client, 6, 100)  # writes while the child works go to the new increment
    wait_for(lambda: no_child(client))
    workload(client, 7, 100)
    info = client.info("persistence")
    assert info["aof_rewrites"] == 1 and info["aof_last_bgrewrite_status"] == "ok"
    manifest = (tmp_path / "appendonlydir" / "appendonly.aof.manifest").read_text()
    assert manifest == "file appendonly.aof.2.base.mpk seq 2 type b\nfile appendonly.aof.2.incr.aof seq 2 type i\n"
    assert sorted(os.listdir(tmp_path / "appendonlydir")) == [
        "appendonly.aof.2.base.mpk", "appendonly.aof.2.incr.aof", "appendonly.aof.manifest"
    ]  # fmt: skip
    client.execute_command("CONFIG", "SET", "appendfsync", "always")
    client.set("last", "write")
    before = state(client)
    assert_restarts_with(tmp_path, proc, before, "--appendonly", "yes", "--save", "")


def test_rewrite_without_preamble_writes_commands(tmp_path):
    args = ("--appendonly", "yes", "--aof-use-rdb-preamble", "no", "--save", "", "--appendfsync", "always")
    proc = start(str(tmp_path), *args)
    client = proc.client()
    # no deletions: a PEL entry whose stream entry is gone cannot be written as a command
    # (XCLAIM drops it), the limit Redis's own preamble-less rewrite has
    workload(client, 8, deletes=False)
    assert client.bgrewriteaof() is True
    wait_for(lambda: no_child(client))
    base = tmp_path / "appendonlydir" / "appendonly.aof.2.base.aof"
    assert base.read_bytes()[:1] in (b"*", b"")  # plain RESP commands, as Redis's preamble-less base
    before = state(client, structure=False)
    assert_restarts_with(tmp_path, proc, before, *args, structure=False)


def test_bgsave_serves_clients_and_records_the_save(tmp_path):
    proc = start(str(tmp_path), "--save", "")
    client = proc.client()
    pipe = client.pipeline(transaction=False)
    for i in range(20_000):
        pipe.xadd("big", {"i": i})
    pipe.execute()
    lastsave = client.lastsave()
    time.sleep(1.05)  # LASTSAVE has a one-second resolution
    assert client.bgsave() is True
    assert client.ping() is True  # served while the child writes
    for i in range(50):
        client.xadd("during", {"i": i})
    wait_for(lambda: no_child(client))
    info = client.info("persistence")
    assert info["rdb_last_bgsave_status"] == "ok" and info["rdb_saves"] == 1
    assert client.lastsave() > lastsave
    assert info["rdb_changes_since_last_save"] == 50  # the writes made while the child worked
    kill9(proc)
    proc = start(str(tmp_path), "--save", "")
    try:
        client = proc.client()
        assert client.xlen("big") == 20_000
    finally:
        proc.stop()


def test_config_set_appendonly_writes_a_base_first(tmp_path):
    proc = start(str(tmp_path), "--save", "")
    client = proc.client()
    workload(client, 9, 200)
    assert client.config_set("appendonly", "yes") is True
    client.config_set("appendfsync", "always")
    workload(client, 10, 200)
    wait_for(lambda: no_child(client) and client.info("persistence")["aof_enabled"] == 1)
    workload(client, 11, 50)
    before = state(client)
    manifest = (tmp_path / "appendonlydir" / "appendonly.aof.manifest").read_text()
    assert manifest == "file appendonly.aof.1.base.mpk seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n"
    assert_restarts_with(tmp_path, proc, before, "--appendonly", "yes", "--save", "")


def test_sigterm_and_shutdown_save_when_save_points_are_set(tmp_path):
    proc = start(str(tmp_path))  # Redis's default save points
    client = proc.client()
    client.xadd("s", {"a": "1"}, id="5-5")
    proc.proc.send_signal(signal.SIGTERM)
    assert proc.proc.wait(10) == 0
    proc.log.close()
    assert "Saving the final RDB snapshot before exiting." in (tmp_path / "millrace.log").read_text()
    proc = start(str(tmp_path), "--save", "")
    client = proc.client()
    assert client.xrange("s") == [(b"5-5", {b"a": b"1"})]
    client.set("k", "v")
    shutdown(proc, "SAVE")  # saves although no save point is set
    proc = start(str(tmp_path), "--save", "")
    client = proc.client()
    assert client.get("k") == b"v"
    client.set("k2", "v")
    shutdown(proc, "NOSAVE")
    proc = start(str(tmp_path), "--save", "")
    try:
        client = proc.client()
        assert client.get("k2") is None and client.get("k") == b"v" and client.xlen("s") == 1
    finally:
        proc.stop()


def shutdown(proc, *options: str) -> None:
    try:
        proc.client().execute_command("SHUTDOWN", *options)
    except redis.ConnectionError:
        pass
    assert proc.proc.wait(10) == 0
    proc.log.close()


def test_dirty_counts_as_redis(oracle_server, tmp_path):
    """rdb_changes_since_last_save after each command, beside Redis 8 (save points on, so both count)."""
    proc = start(str(tmp_path), "--save", "3600 1000000")
    oracle = oracle_server.client()
    oracle.config_set("save", "3600 1000000")
    mine = proc.client()
    script = [
        ("XADD", "s", "1-0", "f", "v"), ("XADD", "s", "2-0", "f", "v"), ("XADD", "s", "3-0", "f", "v"),
        ("XADD", "s", "4-0", "f", "v"), ("XGROUP", "CREATE", "s", "g", "0"),
        ("XGROUP", "CREATECONSUMER", "s", "g", "alice"), ("XGROUP", "CREATECONSUMER", "s", "g", "bob"),
        ("XREADGROUP", "GROUP", "g", "alice", "COUNT", "3", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0"),
        ("XACK", "s", "g", "1-0", "2-0", "9-0"), ("XCLAIM", "s", "g", "bob", "0", "3-0"),
        ("XREADGROUP", "GROUP", "g", "bob", "NOACK", "STREAMS", "s", ">"),
        ("XDEL", "s", "1-0", "4-0", "7-0"), ("XTRIM", "s", "MAXLEN", "0"), ("MSET", "a", "1", "b", "2"),
        ("DEL", "a", "b", "c"), ("SET", "x", "1", "PX", "100000"), ("EXPIRE", "x", "100"), ("INCR", "n"),
        ("XGROUP", "SETID", "s", "g", "0"), ("XSETID", "s", "10-0"), ("XADD", "nope", "NOMKSTREAM", "*", "f", "v"),
        ("XGROUP", "DELCONSUMER", "s", "g", "alice"), ("XGROUP", "DESTROY", "s", "g"),
    ]  # fmt: skip
    try:
        for command in script:
            counts = []
            for client in (oracle, mine):
                client.save()
                client.execute_command(*command)
                counts.append(client.info("persistence")["rdb_changes_since_last_save"])
            assert counts[1] == counts[0], command
    finally:
        oracle.flushall()
        proc.stop()


def test_save_points_and_auto_rewrite_run_from_the_cron(tmp_path):
    """`save 1 3`: three changes and a second later a BGSAVE runs by itself; the AOF is rewritten on growth."""
    args = ("--save", "1 3", "--appendonly", "yes", "--auto-aof-rewrite-min-size", "4096", "--auto-aof-rewrite-percentage", "50")
    proc = start(str(tmp_path), *args)
    try:
        client = proc.client()
        client.set("a", "1")
        client.set("b", "2")
        time.sleep(1.3)
        assert client.info("persistence")["rdb_saves"] == 0  # two changes: under the save point
        client.set("c", "3")
        wait_for(lambda: client.info("persistence")["rdb_saves"] == 1)
        assert "3 changes in 1 seconds. Saving..." in proc.read_log()
        for i in range(100):
            client.xadd("s", {"pad": "p" * 100, "i": i})
        wait_for(lambda: client.info("persistence")["aof_rewrites"] >= 1)
        assert "Starting automatic rewriting of AOF" in proc.read_log()
        wait_for(lambda: no_child(client))
        assert client.xlen("s") == 100
    finally:
        proc.stop()


def test_flushall_with_save_points_saves_the_empty_dataset(tmp_path):
    """As Redis: otherwise the last snapshot would bring the flushed keys back after a crash."""
    proc = start(str(tmp_path), "--save", "3600 1000")
    client = proc.client()
    client.set("k", "v")
    client.save()
    client.flushall()
    kill9(proc)
    proc = start(str(tmp_path), "--save", "3600 1000")
    try:
        assert proc.client().dbsize() == 0
    finally:
        proc.stop()


def test_flush_and_save_counters_move_as_redis(oracle_server, tmp_path):
    """FLUSHALL/FLUSHDB count the keys they remove (none: nothing); with save points FLUSHALL's own save
    leaves the count at 0 and is no `rdb_saves`; SAVE counts one, BGSAVE one as soon as it starts."""
    proc = start(str(tmp_path))
    fields = ("rdb_changes_since_last_save", "rdb_saves")
    seen = []
    try:
        for client in (oracle_server.client(), proc.client()):
            client.flushall()
            client.config_set("save", "")
            client.save()
            steps = []
            base = client.info("persistence")["rdb_saves"]  # (the oracle is shared by the module's tests)

            def note(client=client, steps=steps, base=base):
                info = client.info("persistence")
                steps.append((info[fields[0]], info[fields[1]] - base))

            client.mset({"a": 1, "b": 2, "c": 3})
            client.flushall()
            note()
            client.flushall()
            client.flushdb()
            note()
            client.set("d", 1)
            client.execute_command("SELECT", 1)  # (redis-py's pool: one connection here)
            client.set("e", 1)
            client.flushdb()
            note()
            client.config_set("save", "3600 1")
            client.set("f", 1)
            client.flushall()
            note()
            client.save()
            note()
            client.set("g", 1)
            client.bgsave()
            note()  # counted when the child starts
            wait_for(lambda c=client: no_child(c))
            client.execute_command("SELECT", 0)
            client.config_set("save", "")
            client.flushall()
            seen.append(steps)
        assert seen[0] == seen[1]
    finally:
        proc.stop()


def test_debug_loadaof_reads_the_files_on_disk_as_redis(tmp_path):
    """With appendonly off DEBUG LOADAOF still replays what an earlier appendonly yes left on disk, and with
    no AOF at all empties the data and answers Redis's error."""
    from tests.servers import require_redis, start_redis

    require_redis()
    seen = []
    for kind in ("millrace", "redis"):
        for name in ("m", "m2", "r"):
            (tmp_path / name).mkdir(exist_ok=True)
        if kind == "millrace":
            proc = start(str(tmp_path / "m"), "--save", "", "--appendonly", "yes")
        else:
            proc = start_redis("--enable-debug-command", "yes", "--save", "", "--appendonly", "yes", "--dir", str(tmp_path / "r"))
        client = proc.client()
        try:
            steps = [client.set("x", 1)]
            wait_for(lambda c=client: no_child(c))
            client.config_set("appendonly", "no")
            client.set("b", 2)
            steps.append(client.execute_command("DEBUG", "LOADAOF"))
            steps.append(sorted(client.keys()))
        finally:
            proc.stop()
        empty = start(str(tmp_path / "m2")) if kind == "millrace" else start_redis("--enable-debug-command", "yes")
        client = empty.client()
        try:
            client.set("a", 1)
            try:
                steps.append(client.execute_command("DEBUG", "LOADAOF"))
            except redis.ResponseError as exc:
                steps.append(str(exc))
            steps.append(client.dbsize())
        finally:
            empty.stop()
        seen.append(steps)
    assert seen[0] == seen[1]


def _fill(client, entries: int) -> None:
    pipe = client.pipeline(transaction=False)
    for i in range(entries):
        pipe.xadd(f"s{i % 10}", {"f": i})
        if i % 10_000 == 9_999:
            pipe.execute()
    pipe.execute()


def test_bgsave_schedule_waits_for_a_rewrite(tmp_path):
    proc = start(str(tmp_path), "--save", "")
    try:
        client = proc.client()
        _fill(client, 200_000)
        for name in ("BGREWRITEAOF", "BGSAVE"):
            client.response_callbacks.pop(name, None)
        pipe = client.pipeline(transaction=False)  # one read: the rewrite is surely running when BGSAVE comes
        pipe.execute_command("BGREWRITEAOF")
        pipe.execute_command("BGSAVE")
        pipe.execute_command("BGSAVE", "SCHEDULE")
        replies = pipe.execute(raise_on_error=False)
        assert replies[0] == b"Background append only file rewriting started"
        assert str(replies[1]).startswith("Another child process is active (AOF?): can't BGSAVE right now.")
        assert replies[2] == b"Background saving scheduled"
        wait_for(lambda: client.info("persistence")["rdb_saves"] == 1 and no_child(client), timeout=60)
        assert client.info("persistence")["aof_rewrites"] == 1
    finally:
        proc.stop()


def test_bgsave_and_bgrewriteaof_inside_exec_are_scheduled(oracle_server, tmp_path):
    """Redis never forks inside EXEC: both answer "scheduled" there, and the cron then runs them."""
    proc = start(str(tmp_path), "--save", "")
    try:
        replies = []
        for client in (oracle_server.client(), proc.client()):
            for name in ("BGREWRITEAOF", "BGSAVE"):
                client.response_callbacks.pop(name, None)
            client.set("k", "v")
            before = client.info("persistence")
            pipe = client.pipeline(transaction=True)
            pipe.execute_command("BGSAVE")
            replies.append(pipe.execute())
            wait_for(lambda c=client, b=before: c.info("persistence")["rdb_saves"] > b["rdb_saves"] and no_child(c), timeout=60)
            pipe = client.pipeline(transaction=True)
            pipe.execute_command("BGREWRITEAOF")
            replies.append(pipe.execute())
            wait_for(lambda c=client, b=before: c.info("persistence")["aof_rewrites"] > b["aof_rewrites"] and no_child(c), timeout=60)
        assert replies[:2] == replies[2:] == [[b"Background saving scheduled"], [b"Background append only file rewriting scheduled"]]
    finally:
        proc.stop()


def test_a_killed_child_is_reported(tmp_path):
    proc = start(str(tmp_path), "--save", "")
    try:
        client = proc.client()
        _fill(client, 200_000)
        client.bgsave()
        children = open(f"/proc/{proc.proc.pid}/task/{proc.proc.pid}/children").read().split()
        assert len(children) == 1
        os.kill(int(children[0]), signal.SIGKILL)
        wait_for(lambda: no_child(client))
        assert client.info("persistence")["rdb_last_bgsave_status"] == "err"
        assert "Background saving terminated by signal 9" in proc.read_log()
        assert not [name for name in os.listdir(tmp_path) if name.startswith("temp-")]  # its temporary file is removed
    finally:
        proc.stop()


def test_aof_encoding_is_canonical_resp():
    """The AOF and the replication stream are RESP arrays of bulk strings, whatever the arguments hold
    (a replica counts offsets by that form); a bytearray argument is encoded as its bytes."""
    from persistence.aof import encode, encode_batch

    assert encode([b"SET", b"", b"a\r\n\0\xff"]) == b"*3\r\n$3\r\nSET\r\n$0\r\n\r\n$5\r\na\r\n\0\xff\r\n"
    assert encode([b"SETRANGE", bytearray(b"k"), b"10", bytearray(b"xy")]) == b"*4\r\n$8\r\nSETRANGE\r\n$1\r\nk\r\n$2\r\n10\r\n$2\r\nxy\r\n"
    big = b"v" * 100_000
    assert encode([big]) == b"*1\r\n$100000\r\n" + big + b"\r\n"
    assert encode_batch([[b"PING"]]) == b"*1\r\n$4\r\nPING\r\n"
    assert encode_batch([[b"MULTI"], [b"DEL", b"k"], [b"EXEC"]]) == b"*1\r\n$5\r\nMULTI\r\n*2\r\n$3\r\nDEL\r\n$1\r\nk\r\n*1\r\n$4\r\nEXEC\r\n"


def test_a_background_save_dies_with_its_server(tmp_path):
    """After kill -9 of the server, its BGSAVE child must not finish and replace dump.mpk behind a new server."""
    proc = start(str(tmp_path), "--save", "")
    client = proc.client()
    _fill(client, 300_000)
    client.bgsave()
    children = open(f"/proc/{proc.proc.pid}/task/{proc.proc.pid}/children").read().split()
    assert len(children) == 1
    kill9(proc)
    child = int(children[0])
    wait_for(lambda: not os.path.exists(f"/proc/{child}") or open(f"/proc/{child}/stat").read().split()[2] == "Z", timeout=5)
    assert not (tmp_path / "dump.mpk").exists()


def test_stale_temporary_files_are_removed_at_startup(tmp_path):
    """A save or rewrite cut short by a crash leaves a temp file nothing renames: start-up removes it."""
    aof_dir = tmp_path / "appendonlydir"
    aof_dir.mkdir()
    dead = 2**22 + 12345  # above pid_max's default: no such process
    stale = [tmp_path / f"temp-{dead}-dump.mpk", aof_dir / f"temp-rewriteaof-bg-{dead}.aof",
             aof_dir / f"temp-{dead}-temp-rewriteaof-bg-{dead}.aof", aof_dir / "temp-appendonly.aof.0.incr.aof"]  # fmt: skip
    kept = [tmp_path / "temp-notes.txt", tmp_path / f"temp-{os.getpid()}-dump.mpk"]  # not ours / a live process's
    for path in stale + kept:
        path.write_bytes(b"x")
    proc = start(str(tmp_path), "--appendonly", "yes")
    try:
        assert [path.exists() for path in stale] == [False] * len(stale)
        assert all(path.exists() for path in kept)
        assert "Removed the stale temporary file" in proc.read_log()
    finally:
        proc.stop()


def test_waitaof_waits_for_the_first_base_when_appendonly_is_turned_on(tmp_path):
    """Until CONFIG SET appendonly yes has written its first base, writes sit in a temporary increment
    no manifest names: WAITAOF's local side waits for the base (as Redis), and what it confirmed
    survives a kill -9."""
    proc = start(str(tmp_path), "--save", "")
    try:
        client = proc.client()
        for chunk in range(100):  # enough data that the first base takes a while to write
            client.mset({f"key:{chunk}:{i}": "x" * 20 for i in range(1000)})
        pipe = client.pipeline(transaction=False)
        pipe.config_set("appendonly", "yes")
        pipe.set("w", "durable")
        pipe.info("persistence")
        pipe.execute_command("WAITAOF", 1, 0, 0)
        pipe.info("persistence")
        _, _, during, waited, after = pipe.execute()
        assert waited == [1, 0]
        if during["aof_rewrite_in_progress"]:  # (a machine fast enough to finish first proves nothing here)
            assert after["aof_rewrite_in_progress"] == 0 and after["aof_enabled"] == 1
    except BaseException:
        proc.stop()
        raise
    kill9(proc)
    proc = start(str(tmp_path), "--save", "", "--appendonly", "yes")
    try:
        assert proc.client().get("w") == b"durable"
    finally:
        proc.stop()


def test_an_aof_replay_counts_no_failed_calls(tmp_path):
    """A command the replay finds failing (a file written by hand) is logged, not counted as a call or a failure."""
    proc = start(str(tmp_path), "--appendonly", "yes", "--save", "")
    proc.client().set("a", "x")
    proc.stop()
    incr = next((tmp_path / "appendonlydir").glob("*.incr.aof"))
    with open(incr, "ab") as handle:
        handle.write(b"*2\r\n$4\r\nINCR\r\n$1\r\na\r\n")
    proc = start(str(tmp_path), "--appendonly", "yes", "--save", "")
    try:
        stats = proc.client().info("commandstats")
        assert "cmdstat_incr" not in stats and "cmdstat_set" not in stats
    finally:
        proc.stop()
