"""Bad files and bad disks: refused or repaired as Redis does, never half-loaded, nothing acknowledged lost.

Truncated, corrupted and foreign snapshots stop start-up naming the file, the
offset and the reason; a truncated last AOF increment is cut and loaded
(`aof-load-truncated yes`), damage elsewhere stops start-up; the check tools
report and repair the same way. A full disk is a file-size limit put on the
running server (prlimit): writes get MISCONF under everysec and come back
when the disk does, the server exits under always (as Redis) and loses
nothing it acknowledged, a failed BGSAVE stops writes
(stop-writes-on-bgsave-error).
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time

import pytest
import redis

from persistence import aof as aoffile
from tests.servers import ROOT, free_port, start_redis
from tests.test_persistence import kill9, no_child, start, wait_for

AOF = ("--appendonly", "yes", "--appendfsync", "always", "--save", "")


def start_fails(workdir, *args: str) -> str:
    """Start a server that must refuse to start; its log."""
    argv = [sys.executable, "-m", "server", "--port", str(free_port()), "--dir", str(workdir), *args]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, timeout=30)
    assert done.returncode == 1, done.stdout
    return done.stdout.decode(errors="replace")


def tool(name: str) -> str:
    """A console script the project installs beside this Python (pip install -e .)."""
    return os.path.join(os.path.dirname(sys.executable), name)


def saved_dir(tmp_path, *args):
    proc = start(str(tmp_path), "--save", "", *args)
    client = proc.client()
    client.xadd("s", {"a": "1"}, id="1-1")
    client.set("k", "v" * 1000)
    return proc, client


# -- snapshots ---------------------------------------------------------------------


@pytest.mark.parametrize("damage", ["flip", "truncate", "foreign", "empty"])
def test_a_damaged_snapshot_stops_startup(tmp_path, damage):
    proc, client = saved_dir(tmp_path)
    client.save()
    proc.stop()
    path = tmp_path / "dump.mpk"
    data = bytearray(path.read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 0x40
    elif damage == "truncate":
        data = data[: len(data) - 7]
    elif damage == "foreign":
        data = bytearray(b"REDIS0011\xfa\tredis-ver\x057.0.15" + bytes(40))
    else:
        data = bytearray()
    path.write_bytes(bytes(data))
    log = start_fails(tmp_path, "--save", "")
    reason = {"flip": "checksum mismatch", "truncate": "checksum mismatch", "foreign": "wrong magic", "empty": "wrong magic"}[damage]
    assert f"Bad snapshot file '{path}' at offset" in log and reason in log
    assert "ready to accept connections" not in log


def test_check_snapshot_tool(tmp_path):
    proc, client = saved_dir(tmp_path)
    client.save()
    proc.stop()
    path = tmp_path / "dump.mpk"
    ok = subprocess.run([tool("millrace-check-snapshot"), str(path)], cwd=ROOT, capture_output=True, text=True)
    assert ok.returncode == 0 and "2 keys read" in ok.stdout and "snapshot looks OK" in ok.stdout
    path.write_bytes(path.read_bytes()[:-1])
    bad = subprocess.run([tool("millrace-check-snapshot"), str(path)], cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode == 1 and "SNAPSHOT ERROR DETECTED" in bad.stdout


# -- the AOF -----------------------------------------------------------------------------


def aof_dir_with_commands(tmp_path):
    proc = start(str(tmp_path), *AOF)
    client = proc.client()
    for i in range(1, 6):
        client.xadd("s", {"i": i}, id=f"{i}-0")
    with client.pipeline(transaction=True) as pipe:
        pipe.set("a", "1")
        pipe.set("b", "2")
        pipe.execute()
    client.set("last", "x")
    kill9(proc)
    return tmp_path / "appendonlydir" / "appendonly.aof.1.incr.aof"


def test_a_truncated_last_command_is_cut_and_loaded(tmp_path):
    incr = aof_dir_with_commands(tmp_path)
    data = incr.read_bytes()
    incr.write_bytes(data[:-3])  # inside the last SET
    proc = start(str(tmp_path), *AOF)
    try:
        client = proc.client()
        assert client.xlen("s") == 5 and client.get("a") == b"1" and client.get("last") is None
        log = proc.read_log()
        assert "short read while loading the AOF file" in log and "loaded anyway because aof-load-truncated is enabled" in log
        assert incr.read_bytes() == data[: data.lower().rindex(b"*3\r\n$3\r\nset")]  # cut back to the last whole command
    finally:
        proc.stop()


def test_a_transaction_cut_short_is_left_out_whole(tmp_path):
    incr = aof_dir_with_commands(tmp_path)
    data = incr.read_bytes()
    exec_at = data.rindex(b"*1\r\n$4\r\nEXEC\r\n")
    incr.write_bytes(data[:exec_at])  # MULTI, both SETs, no EXEC
    proc = start(str(tmp_path), *AOF)
    try:
        client = proc.client()
        assert client.xlen("s") == 5 and client.get("a") is None and client.get("b") is None
    finally:
        proc.stop()


def test_aof_load_truncated_no_refuses(tmp_path):
    incr = aof_dir_with_commands(tmp_path)
    incr.write_bytes(incr.read_bytes()[:-3])
    log = start_fails(tmp_path, *AOF, "--aof-load-truncated", "no")
    assert "Bad file format reading the append only file" in log and "truncated" in log


def test_corruption_before_the_end_stops_startup(tmp_path):
    incr = aof_dir_with_commands(tmp_path)
    data = bytearray(incr.read_bytes())
    at = data.index(b"$4\r\nXADD")
    data[at] = ord("#")
    incr.write_bytes(bytes(data))
    log = start_fails(tmp_path, *AOF)
    assert f"Bad file format reading the append only file '{incr}' at offset {at}" in log
    assert "expected '$'" in log


def test_a_missing_increment_stops_startup(tmp_path):
    incr = aof_dir_with_commands(tmp_path)
    incr.unlink()
    log = start_fails(tmp_path, *AOF)
    assert "The AOF file appendonly.aof.1.incr.aof doesn't exist" in log


def test_check_aof_tool_reports_and_fixes(tmp_path):
    incr = aof_dir_with_commands(tmp_path)
    manifest = tmp_path / "appendonlydir" / "appendonly.aof.manifest"

    def check(*args):
        return subprocess.run([tool("millrace-check-aof"), *args], cwd=ROOT, capture_output=True, text=True)

    good = check(str(manifest))
    assert good.returncode == 0 and "All AOF files and manifest are valid" in good.stdout
    size = len(incr.read_bytes())
    incr.write_bytes(incr.read_bytes()[:-3])
    bad = check(str(manifest))
    assert bad.returncode == 1 and "Use the --fix option" in bad.stdout
    fixed = check("--fix", str(manifest))
    assert fixed.returncode == 0 and "Successfully truncated AOF" in fixed.stdout
    assert len(incr.read_bytes()) < size - 3
    assert check(str(manifest)).returncode == 0
    data = bytearray(incr.read_bytes())
    data[data.index(b"$4\r\nXADD")] = ord("#")
    incr.write_bytes(bytes(data))
    assert check("--fix", str(manifest)).returncode == 1  # damage before the end is not cut away


# -- full disk -----------------------------------------------------------------------------


def limit_file_size(proc, size: int) -> None:
    """The soft limit only: lowering the hard one could not be undone without CAP_SYS_RESOURCE."""
    resource.prlimit(proc.proc.pid, resource.RLIMIT_FSIZE, (size, resource.prlimit(proc.proc.pid, resource.RLIMIT_FSIZE)[1]))


def test_full_disk_under_everysec_refuses_writes_then_recovers(tmp_path):
    proc = start(str(tmp_path), "--appendonly", "yes", "--appendfsync", "everysec", "--save", "")
    client = proc.client()
    incr = tmp_path / "appendonlydir" / "appendonly.aof.1.incr.aof"
    acknowledged = []
    limit_file_size(proc, 64 * 1024)
    error = None
    for i in range(200):
        try:
            client.set(f"k{i}", "x" * 1000)
            acknowledged.append(f"k{i}")
        except redis.ResponseError as exc:
            error = str(exc)
            break
    assert error == "MISCONF Errors writing to the AOF file: No space left on device"  # a short write is ENOSPC, as Redis says
    assert client.info("persistence")["aof_last_write_status"] == "err"
    with pytest.raises(redis.ResponseError, match="MISCONF"):
        client.ping()  # as Redis: PING is refused too while the disk refuses writes
    assert client.get(acknowledged[0]) == b"x" * 1000  # reads go on
    limit_file_size(proc, resource.RLIM_INFINITY)
    wait_for(lambda: client.info("persistence")["aof_last_write_status"] == "ok")
    assert client.set("after", "1") is True
    time.sleep(2.2)  # everysec: what was written a second ago is on disk
    kill9(proc)
    assert os.path.getsize(incr) > 64 * 1024
    proc = start(str(tmp_path), "--appendonly", "yes", "--save", "")
    try:
        client = proc.client()
        assert all(client.exists(key) for key in acknowledged) and client.get("after") == b"1"
    finally:
        proc.stop()


def test_full_disk_under_always_exits_and_loses_nothing_acknowledged(tmp_path):
    proc = start(str(tmp_path), *AOF)
    client = proc.client()
    acknowledged = []
    limit_file_size(proc, 64 * 1024)
    with pytest.raises(redis.ConnectionError):
        for i in range(200):
            client.xadd("s", {"v": "y" * 1000}, id=f"{i + 1}-0")
            acknowledged.append(f"{i + 1}-0".encode())
    assert proc.proc.wait(10) == 1
    proc.log.close()
    assert "Can't recover from AOF write error when the AOF fsync policy is 'always'" in (tmp_path / "millrace.log").read_text()
    proc = start(str(tmp_path), *AOF)
    try:
        ids = [entry_id for entry_id, _ in proc.client().xrange("s")]
        assert ids == acknowledged  # every acknowledged entry, and nothing that was not
    finally:
        proc.stop()


def test_a_failed_bgsave_stops_writes_until_a_save_succeeds(tmp_path):
    proc = start(str(tmp_path), "--save", "3600 1000000")
    client = proc.client()
    pipe = client.pipeline(transaction=False)
    for i in range(2000):
        pipe.set(f"key:{i}", "z" * 100)
    pipe.execute()
    limit_file_size(proc, 4096)  # the child inherits it
    client.bgsave()
    wait_for(lambda: no_child(client))
    info = client.info("persistence")
    assert info["rdb_last_bgsave_status"] == "err"
    with pytest.raises(redis.ResponseError, match="MISCONF Redis is configured to save RDB snapshots"):
        client.set("x", "1")
    assert client.get("key:1") == b"z" * 100
    client.config_set("stop-writes-on-bgsave-error", "no")
    assert client.set("x", "1") is True
    client.config_set("stop-writes-on-bgsave-error", "yes")
    limit_file_size(proc, resource.RLIM_INFINITY)
    client_ok = redis.Redis(port=proc.port)
    wait_for(lambda: _bgsave(client_ok))
    assert client.set("y", "1") is True
    proc.stop()


def _bgsave(client) -> bool:
    """Start a BGSAVE once none runs; True when the last one succeeded."""
    info = client.info("persistence")
    if info["rdb_bgsave_in_progress"]:
        return False
    if info["rdb_last_bgsave_status"] == "ok":
        return True
    try:
        client.bgsave()
    except redis.ResponseError:
        pass
    return False


# -- the increments are plain Redis commands ------------------------------------------------------


def test_increments_replay_into_redis(tmp_path):
    """The effects in the increment, sent to Debian's redis-server, give the same entries, counters and PELs.

    Millrace's one effect form Redis lacks, `XGROUP CREATECONSUMER ... SEENTIME t ACTIVETIME t`,
    is sent without its times; consumer times are left out of the comparison.
    """
    from tests.persist_workload import Workload

    proc = start(str(tmp_path), "--appendonly", "yes", "--save", "")
    client = proc.client()
    work = Workload(client, 21, dbs=2)
    work.steps(500)
    client.execute_command("SELECT", 0)
    mine = _comparable(client)
    proc.stop()
    data = (tmp_path / "appendonlydir" / "appendonly.aof.1.incr.aof").read_bytes()
    oracle = start_redis(version="7.0")
    try:
        conn = redis.Redis(port=oracle.port)
        for argv, _ in aoffile.parse_commands(data, "incr"):
            if argv[0].upper() == b"XGROUP" and argv[1].upper() == b"CREATECONSUMER":
                argv = argv[:5]
            conn.execute_command(*argv)
        conn.execute_command("SELECT", 0)
        assert _comparable(redis.Redis(port=oracle.port)) == mine
    finally:
        oracle.stop()


def _comparable(client) -> dict:
    """Entries, stream counters, groups and PELs (owner, delivery time and count) in every database."""
    for name in ("XINFO STREAM", "XINFO GROUPS", "XINFO", "XRANGE", "XPENDING"):
        client.response_callbacks.pop(name, None)
    out = {}
    for db in range(2):
        client.execute_command("SELECT", db)
        for key in sorted(client.keys()):
            if client.type(key) != b"stream":
                out[(db, key)] = client.get(key)
                continue
            info = client.execute_command("XINFO", "STREAM", key)
            info = dict(zip(info[0::2], info[1::2], strict=True)) if isinstance(info, list) else info
            counters = {name: info[name] for name in (b"length", b"last-generated-id", b"max-deleted-entry-id", b"entries-added")}
            groups = {}
            for group in client.execute_command("XINFO", "GROUPS", key):
                group = dict(zip(group[0::2], group[1::2], strict=True)) if isinstance(group, list) else group
                pel = client.execute_command("XPENDING", key, group[b"name"], "-", "+", 10_000)
                groups[group[b"name"]] = (group[b"last-delivered-id"], group[b"entries-read"], group[b"pending"], [p[:2] + p[3:] for p in pel])
            out[(db, key)] = (client.execute_command("XRANGE", key, "-", "+"), counters, groups)
    return out
