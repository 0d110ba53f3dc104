"""Persistence beside Redis 8.2.3 when the disk or the files are not what they should be.

Each test takes the same steps on Millrace and on redis-server 8.2.3 and compares
what a client or an operator sees: replies, INFO fields, exit codes, the log line
that says why. A full disk is a file-size limit put on the running server
(prlimit); both ignore SIGXFSZ (Redis inherits it ignored from this process, see
`sigxfsz_ignored`), so the limit makes writes fail with EFBIG and kills no one.
Children are held with SIGSTOP where a test needs one still running: nothing
here depends on how fast the machine is.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import types

import pytest
import redis

import bench.harness as harness
from persistence import aof as aoffile
from persistence.aof_writer import AofWriter
from tests.servers import ROOT, ServerProcess, free_port, redis_server_path, require_redis, start_millrace, start_redis
from tests.test_persistence import kill9, no_child, wait_for
from tests.test_persistence_faults import limit_file_size

# appendfsync no: MISCONF as under everysec, and no background fsync for a write to wait behind (both
# servers postpone a write up to 2 s while one runs, and a full disk would then refuse a megabyte at once)
AOF_FULL_DISK = ("--appendonly", "yes", "--appendfsync", "no", "--save", "")


@pytest.fixture(autouse=True)
def oracle():
    require_redis()


@pytest.fixture
def sigxfsz_ignored(monkeypatch):
    """Servers started by this test keep SIGXFSZ ignored (Python's children get it reset by default):
    a file-size limit then fails the write with EFBIG, as a full disk fails it, instead of killing
    Redis. Millrace, a Python process, ignores it by itself."""
    popen = functools.partial(subprocess.Popen, restore_signals=False)
    monkeypatch.setattr(harness, "subprocess", types.SimpleNamespace(Popen=popen, STDOUT=subprocess.STDOUT))


def both(*args: str):
    """Millrace and Redis with the same arguments."""
    mine = start_millrace("--enable-debug-command", "yes", *args)
    try:
        theirs = start_redis("--enable-debug-command", "yes", *args)
    except BaseException:
        mine.stop()
        raise
    return mine, theirs


def reply(client, *command):
    """The reply, or the error's text: what the comparison is about."""
    try:
        return client.execute_command(*command)
    except redis.ResponseError as exc:
        return f"-{exc}"


def same(procs, *command, **kw):
    """Send command to each server; assert the replies are equal and return Redis's."""
    answers = [reply(proc.client(**kw), *command) for proc in procs]
    assert answers[0] == answers[1], (command, answers)
    return answers[1]


def info(proc, *fields: str, **kw) -> dict:
    section = proc.client(**kw).info("persistence")
    return {field: section[field] for field in fields}


def fill_until_refused(client) -> dict:
    """Until the AOF refuses: a transaction that overwrites one of four keys with 1000 bytes and
    APPENDs its number to `log`. The increment grows, the data stays small (a rewrite's base fits
    under the same limit), and a write applied twice shows in `log`. The values acknowledged."""
    acknowledged = {}
    for i in range(1000):
        pipe = client.pipeline(transaction=True)
        pipe.set(f"k{i % 4}", f"{i}".ljust(1000, "x"))
        pipe.append("log", f"{i},")
        try:
            pipe.execute()
        except redis.ResponseError:  # MISCONF (the write before it could not be written)
            return acknowledged
        acknowledged[f"k{i % 4}"] = f"{i}".ljust(1000, "x").encode()
        acknowledged["log"] = acknowledged.get("log", b"") + f"{i},".encode()
    raise AssertionError("the AOF never refused a write")


def run_server(binary: str, workdir: str, *args: str, timeout: float = 60):
    """A server that should exit at start-up: its exit code and output (None: it started and was stopped)."""
    if binary == "millrace":
        argv = [sys.executable, "-m", "server", "--port", str(free_port()), "--dir", workdir, *args]
    else:
        argv = [redis_server_path(), "--port", str(free_port()), "--bind", "127.0.0.1", "--dir", workdir, *args]
    try:
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, ""
    return done.returncode, (done.stdout + done.stderr).decode(errors="replace")


def restart_redis(proc, *args: str) -> ServerProcess:
    proc.stop()
    return start_redis(*args, "--dir", proc.dir)


# -- a full disk: rewrites, MISCONF, shutdown -------------------------------------------------------


def test_bgrewriteaof_on_a_full_disk_starts_and_its_increment_takes_the_writes(sigxfsz_ignored):
    """Redis starts the rewrite although the old increment refuses writes: the new increment takes
    what was left unwritten and writes go on. A short write is reported as ENOSPC, as Redis's
    flushAppendOnlyFile does. One difference, on purpose: Redis 8.2.3 starts the new increment with
    that leftover and no SELECT, so a restart also puts the write in db 0 (here it was for db 3);
    Millrace names the database first."""
    procs = mine, theirs = both(*AOF_FULL_DISK)
    try:
        acknowledged = []
        for proc in procs:
            limit_file_size(proc, 64 * 1024)
            acknowledged.append(fill_until_refused(proc.client(db=3)))
        assert same(procs, "SET", "z", "1") == "-MISCONF Errors writing to the AOF file: No space left on device"
        assert same(procs, "PING") == "-MISCONF Errors writing to the AOF file: No space left on device"
        assert same(procs, "BGREWRITEAOF") is True
        for proc in procs:
            client = proc.client()
            wait_for(lambda client=client: no_child(client) and client.info("persistence")["aof_last_write_status"] == "ok")
        fields = ("aof_last_write_status", "aof_last_bgrewrite_status", "aof_rewrites", "aof_rewrites_consecutive_failures")
        assert info(mine, *fields) == info(theirs, *fields) == {"aof_last_write_status": "ok", "aof_last_bgrewrite_status": "ok", "aof_rewrites": 1, "aof_rewrites_consecutive_failures": 0}
        assert same(procs, "SET", "after", "1", db=3) is True
        kill9(mine)
        mine = start_millrace(*AOF_FULL_DISK, workdir=mine.dir)
        theirs = restart_redis(theirs, *AOF_FULL_DISK)
        procs = mine, theirs
        for proc, values in zip(procs, acknowledged, strict=True):
            client = proc.client(db=3)
            assert {key: client.get(key) for key in values} == values  # every acknowledged write, once, in its database
            assert client.get("after") == b"1"
        assert mine.client().dbsize() == 0
    finally:
        for proc in procs:
            proc.stop()


def test_a_failed_rewrite_keeps_what_the_full_disk_refused(sigxfsz_ignored):
    """The rewrite starts but its base cannot be written (it is larger than the limit): the old
    base and increments stay the AOF, and what the full disk refused is in one of them, once."""
    procs = mine, theirs = both(*AOF_FULL_DISK)
    try:
        acknowledged = []
        for proc in procs:
            client = proc.client()
            client.set("big", os.urandom(100_000))  # no compression makes it small in Redis's base
            client.bgrewriteaof()
            wait_for(lambda client=client: no_child(client))
            limit_file_size(proc, 32 * 1024)
            acknowledged.append(fill_until_refused(client))
        assert same(procs, "BGREWRITEAOF") is True
        for proc in procs:
            client = proc.client()
            wait_for(lambda client=client: no_child(client) and client.info("persistence")["aof_last_write_status"] == "ok")
        fields = ("aof_last_write_status", "aof_last_bgrewrite_status", "aof_rewrites")
        assert info(mine, *fields) == info(theirs, *fields) == {"aof_last_write_status": "ok", "aof_last_bgrewrite_status": "err", "aof_rewrites": 2}
        big = [proc.client().get("big") for proc in procs]
        kill9(mine)
        mine = start_millrace(*AOF_FULL_DISK, workdir=mine.dir)
        theirs = restart_redis(theirs, *AOF_FULL_DISK)
        procs = mine, theirs
        for proc, values, value in zip(procs, acknowledged, big, strict=True):
            client = proc.client()
            assert {key: client.get(key) for key in values} == values and client.get("big") == value
        assert same(procs, "DBSIZE") == 6
    finally:
        for proc in procs:
            proc.stop()


def test_an_automatic_rewrite_on_a_full_disk_keeps_the_cron_running(sigxfsz_ignored):
    """The cron's rewrite met the same failing flush and raised: the cron stopped for good (no child
    reaped, no key actively expired). Now it starts the rewrite, as Redis's cron does."""
    procs = mine, theirs = both(*AOF_FULL_DISK, "--auto-aof-rewrite-percentage", "0")
    try:
        for proc in procs:
            limit_file_size(proc, 64 * 1024)
            fill_until_refused(proc.client())
        assert same(procs, "CONFIG", "SET", "auto-aof-rewrite-min-size", "1024", "auto-aof-rewrite-percentage", "100") == b"OK"
        for proc in procs:
            client = proc.client()
            wait_for(lambda client=client: (lambda i: i["aof_rewrites"] == 1 and i["aof_rewrite_in_progress"] == 0 and i["aof_last_write_status"] == "ok")(client.info("persistence")))
        fields = ("aof_last_write_status", "aof_last_bgrewrite_status", "aof_rewrites")
        assert info(mine, *fields) == info(theirs, *fields)
        assert same(procs, "SET", "ttl", "1", "PX", "1") is True
        for proc in procs:  # the cron expires it (no read touches it) and reaps a BGSAVE child
            client = proc.client()
            wait_for(lambda client=client: client.dbsize() == 5)
        assert same(procs, "BGSAVE") is True
        for proc in procs:
            client = proc.client()
            wait_for(lambda client=client: no_child(client))
        fields = ("rdb_last_bgsave_status", "rdb_saves")
        assert info(mine, *fields) == info(theirs, *fields) == {"rdb_last_bgsave_status": "ok", "rdb_saves": 1}
    finally:
        for proc in procs:
            proc.stop()


def test_shutdown_nosave_exits_0_while_the_aof_cannot_be_written(sigxfsz_ignored):
    """The last flush fails at exit: Redis logs it and exits 0 (Millrace's shutdown hook raised, and the
    exit was reported as a listening-socket failure, code 1)."""
    procs = both(*AOF_FULL_DISK)
    try:
        for proc in procs:
            limit_file_size(proc, 64 * 1024)
            fill_until_refused(proc.client())
        codes = []
        for proc in procs:
            proc.client().shutdown(nosave=True)  # redis-py returns once the connection closes
            codes.append(proc.proc.wait(30))
        assert codes == [0, 0]
        log = procs[0].read_log()
        assert "ready to exit, bye bye" in log and "listening socket" not in log
    finally:
        for proc in procs:
            proc.stop()


class _Os:
    """The os module, but for its write."""

    def __init__(self, write) -> None:
        self.write = write

    def __getattr__(self, name: str):
        return getattr(os, name)


def test_aof_write_errors_report_as_redis(tmp_path, monkeypatch):
    """A write that fails outright reports its errno; one that wrote part of the buffer reports
    ENOSPC (Redis's flushAppendOnlyFile) and leaves no part of a command in the file."""
    writer = AofWriter(str(tmp_path / "incr.aof"))
    writer.feed([[b"SET", b"k", b"v" * 100]])
    calls = []

    def part_then_efbig(fd, data):
        calls.append(len(data))
        if len(calls) == 1:
            return os.write(fd, bytes(data[:60]))
        raise OSError(errno.EFBIG, os.strerror(errno.EFBIG))

    monkeypatch.setattr("persistence.aof_writer.os", _Os(part_then_efbig))
    assert writer.flush("everysec") is False
    assert writer.write_error.errno == errno.ENOSPC and os.path.getsize(writer.path) == 0
    assert writer.flush("everysec") is False  # this time the first write fails
    assert writer.write_error.errno == errno.EFBIG
    monkeypatch.setattr("persistence.aof_writer.os", os)
    assert writer.flush("everysec") is True and writer.write_error is None
    writer.close()
    assert (tmp_path / "incr.aof").read_bytes() == aoffile.encode([b"SET", b"k", b"v" * 100])


# -- what was acknowledged loads back ----------------------------------------------------------------


def _raw(proc, request: bytes, size: int = 0) -> bytes:
    """Send request on a socket of its own; the reply's first `size` bytes (or its first read)."""
    with socket.create_connection(("127.0.0.1", proc.port), timeout=300) as sock:
        sock.sendall(request)
        data = sock.recv(1 << 16)
        while len(data) < size:
            chunk = sock.recv(1 << 20)
            if not chunk:
                break
            data += chunk
        return data


def test_a_command_with_more_arguments_than_a_million_loads_back():
    """An XADD of 1,048,577 arguments is acknowledged by both and written to the AOF; Redis loads it
    back, and the loader took no count above 2**20."""
    pairs = (1 << 19) - 1
    request = b"*%d\r\n$4\r\nXADD\r\n$1\r\ns\r\n$3\r\n1-1\r\n" % (3 + 2 * pairs) + b"$1\r\nf\r\n$1\r\nv\r\n" * pairs
    args = ("--appendonly", "yes", "--appendfsync", "always", "--save", "")
    procs = mine, theirs = both(*args)
    try:
        for proc in procs:
            assert _raw(proc, request) == b"$3\r\n1-1\r\n"
        kill9(mine)
        port = free_port()  # a slow machine may need a while to parse a million arguments twice
        argv = [sys.executable, "-m", "server", "--port", str(port), "--dir", mine.dir, *args]
        mine = ServerProcess(argv, port, mine.dir, "millrace", ready_timeout=600)
        theirs = restart_redis(theirs, *args)
        procs = mine, theirs
        assert same(procs, "XLEN", "s") == 1
        entry = b"*1\r\n*2\r\n$3\r\n1-1\r\n*%d\r\n" % (2 * pairs) + b"$1\r\nf\r\n$1\r\nv\r\n" * pairs
        for proc in procs:
            assert _raw(proc, b"*4\r\n$6\r\nXRANGE\r\n$1\r\ns\r\n$1\r\n-\r\n$1\r\n+\r\n", len(entry)) == entry
    finally:
        for proc in procs:
            proc.stop()


def test_a_declared_count_costs_nothing_before_its_bytes():
    """`*2000000000` and then the end of the file is a truncated command (cut under aof-load-truncated),
    found without building anything; a count no client may send is refused."""
    good = aoffile.encode([b"SET", b"a", b"1"])
    end, error = aoffile.valid_prefix(good + b"*2000000000\r\n$3\r\nSET\r\n", "incr")
    assert end == len(good) and error.truncated
    end, error = aoffile.valid_prefix(good + b"*99999999999\r\n$3\r\nSET\r\n", "incr")
    assert end == len(good) and not error.truncated and "invalid argument count" in error.reason


def _check_aof(path: str) -> subprocess.CompletedProcess:
    """millrace-check-aof, from this tree."""
    code = "import sys; from persistence.check import main_aof; main_aof(sys.argv[1:])"
    return subprocess.run([sys.executable, "-c", code, path], cwd=ROOT, capture_output=True, text=True)


def _aof_incr(workdir: str) -> str:
    directory = os.path.join(workdir, "appendonlydir")
    return os.path.join(directory, sorted(name for name in os.listdir(directory) if name.endswith(".incr.aof"))[-1])


def test_aof_annotations_are_skipped_and_written_as_redis():
    """Redis skips `#` lines in an increment and, under aof-timestamp-enabled yes, writes `#TS:<unix
    seconds>` before the first command of each second; Millrace refused the first and never wrote
    the second."""
    args = ("--appendonly", "yes", "--appendfsync", "always", "--save", "")
    procs = mine, theirs = both(*args)
    try:
        assert same(procs, "CONFIG", "SET", "aof-timestamp-enabled", "yes") == b"OK"
        assert same(procs, "SET", "a", "1") is True
        for proc in procs:
            data = open(_aof_incr(proc.dir), "rb").read()
            assert re.search(rb"#TS:\d+\r\n(\*2\r\n\$6\r\nSELECT\r\n\$1\r\n0\r\n)?\*3\r\n\$3\r\nSET\r\n\$1\r\na\r\n", data), data
        kill9(mine)
        theirs.stop()
        for proc in procs:  # an annotation written by hand, as a tool would
            with open(_aof_incr(proc.dir), "ab") as handle:
                handle.write(b"#TS:1700000000\r\n" + aoffile.encode([b"SET", b"c", b"1"]))
        mine = start_millrace(*args, workdir=mine.dir)
        theirs = start_redis(*args, "--dir", theirs.dir)
        procs = mine, theirs
        assert sorted(mine.client().keys()) == sorted(theirs.client().keys()) == [b"a", b"c"]
    finally:
        for proc in procs:
            proc.stop()
    check = _check_aof(_aof_incr(mine.dir))
    assert check.returncode == 0 and "is valid" in check.stdout


def test_a_torn_annotation_at_the_end_is_cut_as_a_truncated_command(tmp_path):
    """Half an annotation line is a write the crash cut: under aof-load-truncated yes it is cut off,
    so what is appended next starts on a line of its own."""
    args = ("--appendonly", "yes", "--appendfsync", "always", "--save", "")
    proc = start_millrace(*args, workdir=str(tmp_path))
    proc.client().set("a", "1")
    kill9(proc)
    incr = _aof_incr(str(tmp_path))
    size = os.path.getsize(incr)
    with open(incr, "ab") as handle:
        handle.write(b"#TS:17000")
    proc = start_millrace(*args, workdir=str(tmp_path))
    try:
        assert proc.client().get("a") == b"1"
        assert os.path.getsize(incr) == size
    finally:
        proc.stop()


# -- the manifest ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("appendonly", ["yes", "no"])
def test_an_empty_manifest_stops_startup(appendonly):
    """A 0-byte manifest beside intact files: Redis refuses to start (whatever appendonly says).
    Millrace started empty, overwrote the base and appended to the old increment, and the next
    restart brought the old keys back beside the new ones."""
    outputs = []
    for who in ("millrace", "redis"):
        proc = (start_millrace if who == "millrace" else start_redis)("--appendonly", "yes", "--appendfsync", "always")
        proc.client().set("old", "v")
        proc.stop()
        manifest = os.path.join(proc.dir, "appendonlydir", "appendonly.aof.manifest")
        open(manifest, "wb").close()
        code, output = run_server(who, proc.dir, "--appendonly", appendonly, "--save", "")
        assert code == 1, (who, output)
        outputs.append(output)
        if who == "millrace":  # and the check tool says why
            outputs.append(_check_aof(manifest).stdout)
        shutil.rmtree(proc.dir, ignore_errors=True)
    assert all("Found an empty AOF manifest" in output for output in outputs)


def test_a_manifest_naming_no_file_stops_startup(tmp_path):
    """Only comments: Redis would start anew and overwrite `appendonly.aof.1.base`, appending to the
    old `.1.incr`; Millrace refuses instead (README, Persistence)."""
    proc = start_millrace("--appendonly", "yes", "--appendfsync", "always", "--save", "", workdir=str(tmp_path))
    proc.client().set("old", "v")
    proc.stop()
    (tmp_path / "appendonlydir" / "appendonly.aof.manifest").write_bytes(b"# nothing here\n")
    code, output = run_server("millrace", str(tmp_path), "--appendonly", "yes", "--save", "")
    assert code == 1 and "The AOF manifest names no base or incr file" in output
    check = _check_aof(str(tmp_path / "appendonlydir" / "appendonly.aof.manifest"))
    assert check.returncode == 1 and "The AOF manifest names no base or incr file" in check.stdout


# -- start-up file errors ----------------------------------------------------------------------------------


def _dbfilename_is_a_directory(workdir):
    os.mkdir(os.path.join(workdir, "dump.x"))
    return ("--dbfilename", "dump.x", "--save", ""), "Short read or OOM loading DB. Unrecoverable error, aborting now."


def _appenddirname_is_a_file(workdir):
    open(os.path.join(workdir, "appendonlydir"), "wb").close()
    return ("--appendonly", "yes", "--save", ""), "Can't open or create append-only dir appendonlydir: Not a directory"


def _manifest_is_a_directory(workdir):
    os.makedirs(os.path.join(workdir, "appendonlydir", "appendonly.aof.manifest"))
    return ("--appendonly", "yes", "--save", ""), "Error trying to rename the temporary AOF manifest file temp-appendonly.aof.manifest into appendonly.aof.manifest: Is a directory"


@pytest.mark.parametrize("case", [_dbfilename_is_a_directory, _appenddirname_is_a_file, _manifest_is_a_directory])
def test_startup_file_errors_exit_with_redis_words(case):
    """An OSError at start-up left the loader as a listening-socket failure ('Could not create server
    TCP listening socket *:port: Is a directory'); Redis names the file."""
    for who in ("millrace", "redis"):
        workdir = tempfile.mkdtemp(prefix="parity-")
        try:
            args, line = case(workdir)
            code, output = run_server(who, workdir, *args)
            assert code == 1 and line in output, (who, output)
            assert "listening socket" not in output
        finally:
            shutil.rmtree(workdir, ignore_errors=True)


def test_appendonly_in_a_read_only_dir_exits_with_redis_words():
    """`dir` the server may not write (as root, file modes bind only without CAP_DAC_OVERRIDE)."""
    prefix = []
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("root ignores file modes, and setpriv is not here to drop CAP_DAC_OVERRIDE")
        prefix = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--"]
    for who in ("millrace", "redis"):
        workdir = tempfile.mkdtemp(prefix="parity-ro-")
        os.chmod(workdir, 0o555)
        try:
            if who == "millrace":
                argv = [sys.executable, "-m", "server", "--port", str(free_port()), "--dir", workdir]
            else:
                argv = [redis_server_path(), "--port", str(free_port()), "--bind", "127.0.0.1", "--dir", workdir]
            done = subprocess.run([*prefix, *argv, "--appendonly", "yes", "--save", ""], cwd=ROOT, capture_output=True, timeout=60)
            output = (done.stdout + done.stderr).decode(errors="replace")
            assert done.returncode == 1 and "Can't open or create append-only dir appendonlydir: Permission denied" in output, (who, output)
        finally:
            os.chmod(workdir, 0o755)
            shutil.rmtree(workdir, ignore_errors=True)


# -- CONFIG SET appendonly, save, hidden configs -------------------------------------------------------


def test_appendonly_yes_that_cannot_start_is_refused_and_undone():
    """The AOF directory cannot be made (a file has its name): Redis replies its error, keeps
    appendonly no and every other value of the same CONFIG SET; Millrace dropped the connection
    (the listener's OSError) and CONFIG GET then said yes."""
    procs = mine, theirs = both("--save", "")
    try:
        for proc in procs:
            open(os.path.join(proc.dir, "appendonlydir"), "wb").close()
        error = same(procs, "CONFIG", "SET", "maxmemory-samples", "7", "appendonly", "yes")
        assert error == "-CONFIG SET failed (possibly related to argument 'appendonly') - Unable to turn on AOF. Check server logs."
        assert same(procs, "CONFIG", "GET", "appendonly") == {b"appendonly": b"no"}
        assert same(procs, "CONFIG", "GET", "maxmemory-samples") == {b"maxmemory-samples": b"5"}
        fields = ("aof_enabled", "aof_rewrite_in_progress", "aof_last_bgrewrite_status")
        assert info(mine, *fields) == info(theirs, *fields) == {"aof_enabled": 0, "aof_rewrite_in_progress": 0, "aof_last_bgrewrite_status": "err"}
        assert same(procs, "BGREWRITEAOF") == "-Can't execute an AOF background rewriting. Please check the server logs for more information."
        assert same(procs, "SET", "a", "1") is True
        assert "Can't open or create append-only dir appendonlydir: Not a directory" in mine.read_log()
    finally:
        for proc in procs:
            proc.stop()


SAVE_VALUES = ["0 1", "0 0", "1 -0", "01 +1", "1 -5", "1 \t5", "1 4294967295", "1 ", "1  ", "+ 1", " 1 2", "99999999999999999999 1", "1 2147483648", "3600 1 300 100"]


def test_save_parameters_are_checked_as_redis():
    """Seconds at least 1, changes at least 0, each a whole strtoll number, changes stored as a C int:
    `0 1` and `0 0` were accepted (and `0 0` forked a BGSAVE every tick), `1 -0` refused."""
    procs = both("--save", "")
    try:
        for value in SAVE_VALUES:
            same(procs, "CONFIG", "SET", "save", value)
            same(procs, "CONFIG", "GET", "save")
    finally:
        for proc in procs:
            proc.stop()
    for who in ("millrace", "redis"):  # the same rules at start-up, a fatal config error
        workdir = tempfile.mkdtemp(prefix="parity-")
        try:
            code, output = run_server(who, workdir, "--save", "0 1")
            assert code == 1 and "Invalid save parameters" in output, (who, output)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)


def test_a_hidden_config_answers_only_its_name():
    procs = both("--save", "")
    try:
        assert same(procs, "CONFIG", "GET", "aof-disable-auto-gc") == {b"aof-disable-auto-gc": b"no"}
        assert same(procs, "CONFIG", "GET", "aof-disable-*") == {}
        names = [set(proc.client().config_get("*")) for proc in procs]
        assert "aof-disable-auto-gc" not in names[0] | names[1] and "aof-load-truncated" in names[0] & names[1]
    finally:
        for proc in procs:
            proc.stop()


# -- foreground saves, DEBUG RELOAD --------------------------------------------------------------------


def test_a_failed_save_leaves_writes_alone():
    """Redis's rdbSave leaves rdb_last_bgsave_status as it is (only a BGSAVE's failure refuses
    writes): SET and PING go on after a failed SAVE, DEBUG RELOAD or SHUTDOWN. Millrace set it to
    err and refused them with MISCONF."""
    procs = mine, theirs = both("--save", "3600 1", "--dbfilename", "dump.x")
    try:
        for proc in procs:
            proc.client().set("a", "1")
            os.mkdir(os.path.join(proc.dir, "dump.x"))
        for command in (("SAVE",), ("DEBUG", "RELOAD"), ("SHUTDOWN",)):
            assert same(procs, *command).startswith("-"), command
            assert info(mine, "rdb_last_bgsave_status") == info(theirs, "rdb_last_bgsave_status") == {"rdb_last_bgsave_status": "ok"}
            assert same(procs, "SET", "b", "1") is True
            assert same(procs, "PING") is True
        assert same(procs, "SAVE") == "-"  # a bare ERR
        assert same(procs, "DEBUG", "RELOAD") == "-"
        assert same(procs, "DBSIZE") == 2
        assert info(mine, "rdb_saves") == info(theirs, "rdb_saves")  # a failed SAVE counts (before trying)
    finally:
        for proc in procs:
            with contextlib.suppress(OSError):  # else SIGTERM's save fails too, and each refuses to exit for 10 s
                os.rmdir(os.path.join(proc.dir, "dump.x"))
            proc.stop()


def test_shutdown_force_exits_although_its_save_fails():
    """SHUTDOWN refuses to exit when its save fails; SHUTDOWN FORCE exits anyway (0), as Redis. ABORT
    with nothing to abort: "No shutdown in progress", also when repeated; with other options a syntax error."""
    procs = both("--save", "3600 1", "--dbfilename", "dump.x")
    try:
        for proc in procs:
            os.mkdir(os.path.join(proc.dir, "dump.x"))
        assert same(procs, "SHUTDOWN", "ABORT", "ABORT") == "-No shutdown in progress."
        assert same(procs, "SHUTDOWN", "NOW", "ABORT") == "-syntax error"
        assert same(procs, "SHUTDOWN") == "-Errors trying to SHUTDOWN. Check logs."
        for proc in procs:
            try:
                proc.client().execute_command("SHUTDOWN", "FORCE")
            except redis.ConnectionError:
                pass  # the server closed the connection as it went
            assert proc.proc.wait(20) == 0, proc.name
    finally:
        for proc in procs:
            proc.stop()


def test_debug_reload_replies_and_empties_as_redis():
    """No dump file: Redis empties the databases first and replies without an errno; MERGE alone
    still empties (it only allows duplicate keys with NOFLUSH)."""
    procs = both("--save", "", "--dbfilename", "dump.x")
    try:
        same(procs, "SET", "a", "1")
        assert same(procs, "DEBUG", "RELOAD", "NOSAVE") == "-Error trying to load the RDB dump, check server logs."
        assert same(procs, "DBSIZE") == 0
        same(procs, "SET", "a", "1")
        assert same(procs, "SAVE") is True
        same(procs, "SET", "b", "1")
        assert same(procs, "DEBUG", "RELOAD", "MERGE", "NOSAVE") == b"OK"
        assert same(procs, "DBSIZE") == 1
    finally:
        for proc in procs:
            proc.stop()


# -- FLUSHALL and a child at work ----------------------------------------------------------------------------


def stop_child(proc) -> int:
    """The server's child, stopped (SIGSTOP) as soon as it shows: it then waits for the test. (Its
    work is a hundred thousand keys: it cannot have finished already.)"""
    path = f"/proc/{proc.proc.pid}/task/{proc.proc.pid}/children"
    found = []
    wait_for(lambda: found.extend(open(path).read().split()) or found, timeout=60)
    pid = int(found[0])
    os.kill(pid, signal.SIGSTOP)
    state = []
    wait_for(lambda: state.append(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]) or state[-1] in "TZX", timeout=60)
    assert state[-1] == "T", "the child finished before it could be stopped"
    return pid


def fill(proc, keys: int = 100_000) -> None:
    pipe = proc.client().pipeline(transaction=False)
    for batch in range(keys // 1000):
        pipe.mset({f"k{batch}:{i}": "v" for i in range(1000)})
    pipe.execute()


def signal_pending(pid: int, sig: int) -> bool:
    with open(f"/proc/{pid}/status") as handle:
        masks = {line.split(":")[0]: int(line.split()[1], 16) for line in handle if line.startswith(("ShdPnd", "SigPnd"))}
    return bool((masks["ShdPnd"] | masks["SigPnd"]) & (1 << (sig - 1)))


def stopping_child(proc, child: int, request: bytes) -> bytes:
    """Send a request that makes the server stop its (SIGSTOPped) child: the server waits for the
    child, so once the signal is pending the child is let go, and the reply comes back."""
    with socket.create_connection(("127.0.0.1", proc.port), timeout=60) as sock:
        sock.sendall(request)
        wait_for(lambda: signal_pending(child, signal.SIGUSR1), timeout=60)
        os.kill(child, signal.SIGCONT)
        return sock.recv(64)


def resume(child: int) -> None:
    """A test's cleanup: a child it stopped goes on (and so ends), if there is one still."""
    if child:
        try:
            os.kill(child, signal.SIGCONT)
        except ProcessLookupError:
            pass


def test_flushall_stops_a_bgsave_child():
    """With no save points, Redis kills the BGSAVE child (flushAllDataAndResetRDB): the flushed keys
    never reach the snapshot. Millrace let it finish, and a restart brought them back."""
    mine, theirs = both("--save", "")
    procs = mine, theirs
    child = 0
    try:
        fill(mine)
        theirs.client().execute_command("DEBUG", "POPULATE", "1000")
        theirs.client().config_set("rdb-key-save-delay", "100000")  # 100 s for Redis's child
        assert same(procs, "BGSAVE") is True
        child = stop_child(mine)
        assert not os.path.exists(os.path.join(mine.dir, "dump.mpk")), "the child finished before it was stopped"
        assert stopping_child(mine, child, b"*1\r\n$8\r\nFLUSHALL\r\n") == b"+OK\r\n"
        assert reply(theirs.client(), "FLUSHALL") is True
        for proc in procs:
            client = proc.client()
            wait_for(lambda client=client: no_child(client))
        fields = ("rdb_bgsave_in_progress", "rdb_last_bgsave_status")
        assert info(mine, *fields) == info(theirs, *fields) == {"rdb_bgsave_in_progress": 0, "rdb_last_bgsave_status": "ok"}
        mine.stop()
        mine = start_millrace("--save", "", workdir=mine.dir)
        theirs = restart_redis(theirs, "--save", "")
        procs = mine, theirs
        assert same(procs, "DBSIZE") == 0
    finally:
        resume(child)
        for proc in procs:
            proc.stop()


def test_flushall_lets_a_rewrite_child_finish():
    """As Redis: an AOF rewrite goes on (the FLUSHALL is in the new increment)."""
    args = ("--appendonly", "yes", "--appendfsync", "always", "--save", "")
    mine, theirs = both(*args)
    procs = mine, theirs
    child = 0
    try:
        fill(mine)
        theirs.client().execute_command("DEBUG", "POPULATE", "300")
        theirs.client().config_set("rdb-key-save-delay", "5000")  # 1.5 s for Redis's child
        assert same(procs, "BGREWRITEAOF") is True
        child = stop_child(mine)
        for proc in procs:  # one read: INFO runs before any cron could reap the child
            pipe = proc.client().pipeline(transaction=False)
            pipe.flushall()
            pipe.info("persistence")
            flushed, section = pipe.execute()
            assert flushed is True and section["aof_rewrite_in_progress"] == 1
        os.kill(child, signal.SIGCONT)
        for proc in procs:
            client = proc.client()
            wait_for(lambda client=client: no_child(client), timeout=60)
        fields = ("aof_last_bgrewrite_status", "aof_rewrites")
        assert info(mine, *fields) == info(theirs, *fields) == {"aof_last_bgrewrite_status": "ok", "aof_rewrites": 1}
        kill9(mine)
        mine = start_millrace(*args, workdir=mine.dir)
        theirs = restart_redis(theirs, *args)
        procs = mine, theirs
        assert same(procs, "DBSIZE") == 0
    finally:
        resume(child)
        for proc in procs:
            proc.stop()


# -- a fork that fails (in process: it cannot be made to fail from outside) -------------------------------


def test_a_failed_fork_is_logged_and_never_raised(tmp_path, monkeypatch):
    """BGSAVE replies a bare ERR and BGREWRITEAOF Redis's text with no reason appended; the cron's own
    tries are logged and the cron goes on."""
    from server import commands  # noqa: F401  (the command table)
    from server.client import LoadingClient
    from server.main import build_server

    server = build_server(["--port", str(free_port()), "--dir", str(tmp_path), "--save", ""])
    persistence = server.persistence

    def no_fork(work, *options):
        raise OSError(errno.EAGAIN, os.strerror(errno.EAGAIN))

    monkeypatch.setattr("server.persistence.fork", no_fork)
    client = LoadingClient(server)
    assert server.execute(client, [b"BGSAVE"]) == b"ERR"
    assert server.execute(client, [b"BGREWRITEAOF"]) == b"ERR Can't execute an AOF background rewriting. Please check the server logs for more information."
    assert persistence.lastbgsave_status == "err" and persistence.aof_last_bgrewrite_status == "err"
    assert persistence.rdb_saves == 1 and persistence.aof_rewrites == 1  # counted before the fork, as Redis
    persistence.rewrite_scheduled = True
    persistence.cron()
    persistence.bgsave_scheduled = True
    persistence.cron()
    assert persistence.child is None and not persistence.rewrite_scheduled and not persistence.bgsave_scheduled


def test_shutdown_force_exits_although_the_final_save_fails(tmp_path, caplog):
    """Redis's prepareForShutdown: with FORCE a failed save is logged and the exit goes on (SHUTDOWN
    FORCE exits 0); without it the server stays up. The command passes `force` (server/commands)."""
    from server import commands  # noqa: F401
    from server.main import build_server

    server = build_server(["--port", str(free_port()), "--dir", str(tmp_path), "--save", "3600 1", "--dbfilename", "dump.x"])
    (tmp_path / "dump.x").mkdir()
    assert server.persistence.prepare_shutdown(save=True) is False
    assert "Error trying to save the DB, can't exit." in caplog.text
    assert server.persistence.prepare_shutdown(save=True, force=True) is True
    assert "Error trying to save the DB. Exit anyway." in caplog.text



def _history_after_rewrites(proc) -> list[tuple[int, int]]:
    """Files in appendonlydir and history lines in its manifest after each of two rewrites under
    aof-disable-auto-gc yes, then after it is set back to no."""
    client = proc.client()
    directory = os.path.join(proc.dir, "appendonlydir")

    def layout() -> tuple[int, int]:
        with open(os.path.join(directory, "appendonly.aof.manifest")) as handle:
            return len(os.listdir(directory)), sum(1 for line in handle if " type h" in line)

    def rewritten() -> bool:
        fields = client.info("persistence")
        return not fields["aof_rewrite_in_progress"] and not fields["aof_rewrite_scheduled"]

    client.config_set("aof-disable-auto-gc", "yes")
    seen = []
    for i in range(2):
        client.set(f"k{i}", "v")
        client.bgrewriteaof()
        wait_for(rewritten, timeout=30)
        wait_for(lambda want=2 * (i + 1): layout()[1] == want, timeout=10)  # the switch is written just after
        seen.append(layout())
    client.config_set("aof-disable-auto-gc", "no")
    wait_for(lambda: layout()[1] == 0, timeout=10)
    seen.append(layout())
    return seen


def test_aof_disable_auto_gc_keeps_the_history_until_turned_off():
    """A setting Millrace accepted and ignored: with it, a rewrite's retired base and increments stay
    (files and `type h` manifest lines); turning it off removes them, as Redis's aofDelHistoryFiles."""
    procs = both("--appendonly", "yes")
    try:
        ours, theirs = (_history_after_rewrites(proc) for proc in procs)
        assert ours == theirs == [(5, 2), (7, 4), (3, 0)]
    finally:
        for proc in procs:
            proc.stop()


@pytest.mark.parametrize("preamble", ["yes", "no"])
def test_appendonly_no_during_a_rewrite_leaves_no_partial_file(preamble):
    """Redis's killAppendOnlyChild removes the rewrite's temp file. Millrace removed a name its child
    never wrote: the partial base (temp-<pid>-..., or ....tmp without the preamble) stayed until the
    next start, one more for each rewrite stopped."""
    args = ("--appendonly", "yes", "--aof-use-rdb-preamble", preamble, "--save", "")
    mine, theirs = both(*args)
    procs = mine, theirs
    child = 0
    try:
        fill(mine)
        theirs.client().execute_command("DEBUG", "POPULATE", "300")
        theirs.client().config_set("rdb-key-save-delay", "100000")  # 30 s for Redis's child
        assert same(procs, "BGREWRITEAOF") is True
        folder = os.path.join(mine.dir, "appendonlydir")
        wait_for(lambda: any(name.startswith("temp-") for name in os.listdir(folder)), timeout=60)
        child = stop_child(mine)  # its partial base is on disk
        for proc in procs:  # the keys the child writes, counted at the fork
            assert info(proc, "current_save_keys_total") == {"current_save_keys_total": proc.client().dbsize()}
        assert stopping_child(mine, child, b"*4\r\n$6\r\nCONFIG\r\n$3\r\nSET\r\n$10\r\nappendonly\r\n$2\r\nno\r\n") == b"+OK\r\n"
        assert theirs.client().config_set("appendonly", "no") is True
        for proc in procs:
            names = os.listdir(os.path.join(proc.dir, "appendonlydir"))
            assert [name for name in names if name.startswith("temp-") or name.endswith(".tmp")] == [], proc.name
    finally:
        resume(child)
        for proc in procs:
            proc.stop()
