"""CONFIG REWRITE cannot be made to write a directive of the client's choosing.

A string set by CONFIG SET may hold any byte. CONFIG REWRITE writes it as Redis's
rewriteConfigStringOption does, quoted and escaped by sdscatrepr, so the config file parser
(sdssplitargs) reads back exactly that value on the directive's own line: a newline inside
`requirepass` can no more turn `enable-debug-command yes` into a directive of its own than
break the next start-up. Each case restarts the server from the rewritten file.
"""

from __future__ import annotations

import os
import random
import sys
import tempfile

import pytest

from server.commands.server import config_line
from server.main import config_directives, read_config_file
from tests.rawclient import RawConn
from tests.servers import DEBIAN_VERSION, ServerProcess, free_port, require_redis, start_redis

# mutable string parameters Millrace keeps as given (no parse of their own)
STRINGS = [
    "requirepass", "replica-announce-ip", "tls-key-file-pass", "ignore-warnings",
    "cluster-announce-ip", "bind-source-addr", "tls-ciphers", "tls-client-key-file-pass",
]
SPECIAL = [
    b"",
    b"x\nenable-debug-command yes",
    b"x\nenable-debug-command\tyes",
    b'"quoted" \\"back\\slash\\',
    b"'single' \\x41 \\n",
    b" lead and trail ",
    b"\x00nul\x01\x7f\x80\xff\xc3\xa9\xed\xa0\x80",
    b"# not a comment",
    b"\r\n\t\x07\x08\x0b\x0c",
]


class Millrace:
    """A Millrace process started from a config file, restartable from what CONFIG REWRITE left there."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="millrace-rewrite-")
        self.conf = os.path.join(self.dir, "millrace.conf")
        with open(self.conf, "w") as handle:
            handle.write("# written by the test\nloglevel notice\n")
        self.port = free_port()
        self.password: bytes | None = None
        self.proc = self._start()

    def _start(self) -> ServerProcess:
        argv = [sys.executable, "-m", "server", self.conf, "--port", str(self.port), "--dir", self.dir]
        return ServerProcess(argv, self.port, self.dir, "millrace")

    def client(self) -> RawConn:
        """A connection that sees replies as bytes (redis-py decodes CONFIG GET's)."""
        conn = RawConn(self.port)
        if self.password:
            assert conn.call("AUTH", self.password) == b"OK"
        return conn

    def restart(self) -> None:
        self.proc.stop()
        self.proc = self._start()

    def stop(self) -> None:
        self.proc.stop()


@pytest.fixture(scope="module")
def millrace():
    server = Millrace()
    yield server
    server.stop()


def config_get(conn: RawConn, pattern: str) -> dict[bytes, bytes]:
    reply = conn.call("CONFIG", "GET", pattern)
    return dict(zip(reply[::2], reply[1::2], strict=True))


def set_rewrite_restart(server: Millrace, values: dict[str, bytes]) -> dict[bytes, bytes]:
    """CONFIG SET every value, CONFIG REWRITE, restart from the file: CONFIG GET * before the restart."""
    conn = server.client()
    try:
        for name, value in values.items():
            assert conn.call("CONFIG", "SET", name, value) == b"OK"
        if "requirepass" in values:
            server.password = values["requirepass"]
        before = config_get(conn, "*")
        assert conn.call("CONFIG", "REWRITE") == b"OK"
    finally:
        conn.close()
    server.restart()
    return before


def test_every_value_comes_back_byte_for_byte(millrace):
    """Random bytes of every kind and the awkward ones: after SET, REWRITE and a restart, CONFIG GET *
    gives exactly what it gave before (the values set, and no other parameter changed)."""
    rng = random.Random(25)
    values = SPECIAL + [bytes(rng.randrange(256) for _ in range(rng.randint(1, 60))) for _ in range(2 * len(STRINGS) - len(SPECIAL))]
    rounds = [values[i : i + len(STRINGS)] for i in range(0, len(values), len(STRINGS))]
    for chunk in rounds:
        wanted = dict(zip(STRINGS, chunk, strict=False))
        before = set_rewrite_restart(millrace, wanted)
        conn = millrace.client()
        after = config_get(conn, "*")
        for name, value in wanted.items():
            assert config_get(conn, name) == {name.encode(): value}
        conn.close()
        assert {name: after.get(name) for name in before} == before
        names = [words[0] for _, _, words in read_config_file(millrace.conf)]
        assert len(names) == len(set(names)) and set(names) <= {"loglevel", "port", "dir", "user", *STRINGS}, names  # Redis writes a `user` line too


def test_a_newline_in_a_value_is_no_directive(millrace):
    """The issue's injection: a value whose second line is a directive Redis would honour."""
    injected = {
        "requirepass": b"x\nenable-debug-command\tyes",
        "replica-announce-ip": b"y\nenable-protected-configs\tyes",
        "tls-key-file-pass": b"z\nlogfile\t" + os.path.join(millrace.dir, "elsewhere.log").encode(),
    }
    set_rewrite_restart(millrace, injected)
    names = {words[0] for _, _, words in read_config_file(millrace.conf)}
    assert not names & {"enable-debug-command", "enable-protected-configs", "logfile"}
    conn = millrace.client()
    assert config_get(conn, "enable-debug-command") == {b"enable-debug-command": b"no"}
    assert config_get(conn, "enable-protected-configs") == {b"enable-protected-configs": b"no"}
    assert config_get(conn, "logfile") == {b"logfile": b""}
    assert str(conn.call("DEBUG", "HELP")).startswith("ERR DEBUG command not allowed")
    for name, value in injected.items():
        assert config_get(conn, name) == {name.encode(): value}
    conn.close()
    assert not os.path.exists(os.path.join(millrace.dir, "elsewhere.log"))


@pytest.mark.parametrize("name", ["requirepass", "bind", "save", "latency-tracking-info-percentiles", "maxmemory"])
def test_config_line_reads_back_as_written(name):
    """In process, 20,000 random values: the parser gives back each value config_line wrote, as one directive."""
    rng = random.Random(name)
    for value in SPECIAL + [bytes(rng.randrange(256) for _ in range(rng.randint(0, 40))) for _ in range(20_000)]:
        text = value.decode("utf-8", "surrogateescape")
        line = config_line(name, text)
        assert line.isascii() and line.isprintable()
        directives = config_directives(line.splitlines())
        assert [(words[0], " ".join(words[1:])) for _, _, words in directives] == [(name, text)], line


@pytest.fixture(scope="module")
def redis70():
    """Debian's redis-server 7.0.15, started from a config file it may rewrite."""
    require_redis(DEBIAN_VERSION)
    workdir = tempfile.mkdtemp(prefix="redis-rewrite-")
    conf = os.path.join(workdir, "redis.conf")
    with open(conf, "w") as handle:
        handle.write("# written by the test\n")
    proc = start_redis(version=DEBIAN_VERSION)
    proc.stop()  # start_redis has no config file; the same binary, given one
    port = free_port()
    path = proc.proc.args[0]
    proc = ServerProcess([path, conf, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", workdir], port, workdir, "redis")
    yield proc, conf
    proc.stop()


def test_lines_written_as_redis_writes_them(millrace, redis70):
    """The same values set on Redis 7.0 and rewritten: the same line for each in both files. (Redis
    keeps these parameters as C strings, cut at a NUL, so the values here have none.)"""
    proc, conf = redis70
    values = {
        "replica-announce-ip": [value.replace(b"\x00", b"") for value in SPECIAL[1:]] + [bytes(range(1, 256))],
        "requirepass": [b"p\nq \"r\" \\s \xff"],
    }
    conn = millrace.client()
    assert conn.call("CONFIG", "SET", "requirepass", "") == b"OK"  # left by the tests before
    conn.close()
    millrace.password = b""
    for name, choices in values.items():
        for value in choices:
            for conn in (millrace.client(), RawConn(proc.port)):
                assert conn.call("CONFIG", "SET", name, value) == b"OK"
                assert conn.call("CONFIG", "REWRITE") == b"OK"
                if name == "requirepass":
                    assert conn.call("CONFIG", "SET", name, "") == b"OK"  # the next connection needs none
                conn.close()
            ours = [line for line in open(millrace.conf, encoding="latin-1") if line.startswith(name + " ")]
            theirs = [line for line in open(conf, encoding="latin-1") if line.startswith(name + " ")]
            assert ours == theirs, value


def test_older_names_are_rewritten_under_the_current_one():
    """A file that spells settings the old way (`slave-priority`, `hash-max-ziplist-entries`): CONFIG
    REWRITE writes each once, under its current name, where the old line was (as Redis)."""
    server = Millrace()
    try:
        with open(server.conf, "a") as handle:
            handle.write("slave-priority 5\nhash-max-ziplist-entries 100\n")
        server.restart()
        conn = server.client()
        assert conn.call("CONFIG", "SET", "slave-priority", "7") == b"OK"
        assert conn.call("CONFIG", "REWRITE") == b"OK"
        conn.close()
        names = [words[0] for _, _, words in read_config_file(server.conf)]
        assert names[:3] == ["loglevel", "replica-priority", "hash-max-listpack-entries"], names
        assert len(names) == len(set(names)) and not {"slave-priority", "hash-max-ziplist-entries"} & set(names), names
        server.restart()
        conn = server.client()
        assert config_get(conn, "slave-priority") == {b"slave-priority": b"7"}
        assert config_get(conn, "hash-max-ziplist-entries") == {b"hash-max-ziplist-entries": b"100"}
        conn.close()
    finally:
        server.stop()
