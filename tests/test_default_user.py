"""The default user as Redis 8.2.3 sets it: an ACL file, a config file's `user` line (every Redis
CONFIG REWRITE writes one), and `requirepass` changed while clients wait to authenticate.

Millrace has one user with every permission (server/default_user.py). An ACL file used to be
accepted and ignored, so a server meant to ask for a password asked for none; a Redis-written
config file stopped start-up."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest
import redis

from tests.rawclient import RawConn
from tests.servers import (
    ROOT,
    ServerProcess,
    free_port,
    millrace_and_redis,
    redis_server_path,
    require_redis,
    start_millrace,
    start_redis,
)

ACL_ERRORS = "startup because of ACL errors: "  # "Aborting Redis ..." / "Aborting Millrace ..."


def started(kind: str, *args: str):
    return start_millrace(*args) if kind == "millrace" else start_redis(*args)


def refusal(kind: str, *args: str) -> str:
    """The log line that stopped a server's start-up (RuntimeError carries its log)."""
    with pytest.raises(RuntimeError) as failed:
        started(kind, *args).stop()
    return str(failed.value)


def unauthenticated_view(proc) -> list:
    conn = RawConn(proc.port)
    try:
        steps = [("PING",), ("SET", "k", "v"), ("AUTH", "default", "wrong"), ("AUTH", "default", "s3cret"), ("ACL", "LIST"), ("PING",)]
        return [repr(conn.call(*step)) for step in steps]
    finally:
        conn.close()


def test_an_acl_file_sets_the_default_users_password(tmp_path):
    require_redis()
    path = tmp_path / "users.acl"
    path.write_text("\nuser default on >s3cret ~* &* +@all\n")
    views = []
    for kind in ("millrace", "redis"):
        proc = started(kind, "--aclfile", str(path))
        try:
            views.append(unauthenticated_view(proc))
        finally:
            proc.stop()
    millrace, redis_view = views
    assert millrace == redis_view
    assert millrace[0].startswith("ReplyError('NOAUTH") and millrace[3] == "b'OK'"


@pytest.mark.parametrize(
    "content, wanted",
    [
        (None, "Error loading ACLs, opening file '{path}': No such file or directory"),
        ("# a comment\nuser default on >pw ~* &* +@all\n", "{path}:1 should start with user keyword followed by the username. "),
        ("user default on #abc ~* &* +@all\n", "{path}:1: The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters. "),
        ("user default on >pw ~* &* +@all\nuser default on nopass ~* &* +@all\n", "WARNING: Duplicate user 'default' found on line 2. "),
    ],
)
def test_a_broken_acl_file_stops_start_up_as_redis(tmp_path, content, wanted):
    require_redis()
    path = tmp_path / "users.acl"
    if content is not None:
        path.write_text(content)
    for kind, name in (("millrace", "Millrace"), ("redis", "Redis")):
        assert f"Aborting {name} {ACL_ERRORS}" + wanted.format(path=path) in refusal(kind, "--aclfile", str(path)), kind


@pytest.mark.parametrize(
    "line",
    [
        "user alice on >pw ~* &* +@all",
        "user default on >pw ~* &* +@all -debug",
        "user default on >pw ~app:* &* +@all",
        "user default on >pw",
        "user default on >pw ~* &* +@all resetkeys",  # a later rule takes a grant back
        "user default on >pw ~* &* +@all resetchannels",
        "user default on >pw ~* &* +@all nocommands",
    ],
)
def test_an_acl_file_millrace_cannot_honour_stops_start_up(tmp_path, line):
    """Redis takes these (another user, a narrowed default user); Millrace has one user with every
    permission, so it refuses them rather than run with a permission the file takes away."""
    path = tmp_path / "users.acl"
    path.write_text(line + "\n")
    log = refusal("millrace", "--aclfile", str(path))
    assert f"Aborting Millrace {ACL_ERRORS}" in log and "Millrace has one user, 'default', with every permission" in log


def test_a_config_file_rewritten_by_redis_starts_millrace_with_its_password(tmp_path):
    """Redis's CONFIG REWRITE writes `user default on sanitize-payload #<sha256> ~* &* +@all`."""
    require_redis()
    conf = tmp_path / "redis.conf"
    conf.write_text("requirepass s3cret\n")
    port = free_port()
    proc = subprocess.Popen([redis_server_path(), str(conf), "--port", str(port), "--dir", str(tmp_path), "--save", ""], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with redis.Redis(port=port, password="s3cret", protocol=2) as client:
                    client.config_rewrite()
                    redis_acl = client.acl_list()
                break
            except redis.ConnectionError:
                assert time.monotonic() < deadline
                time.sleep(0.05)
    finally:
        proc.terminate()
        proc.wait(10)
    text = conf.read_text()
    assert re.search(r"^user default on sanitize-payload #[0-9a-f]{64} ~\* &\* \+@all$", text, re.M), text
    conf.write_text(text.replace("requirepass", "# requirepass"))  # the `user` line alone sets the password
    millrace = millrace_from_file(conf)
    try:
        assert unauthenticated_view(millrace)[0].startswith("ReplyError('NOAUTH")
        with millrace.client(password="s3cret", protocol=2) as client:
            assert client.acl_list() == redis_acl
    finally:
        millrace.stop()


def millrace_from_file(conf) -> ServerProcess:
    """Millrace started from a config file (it must come first on the command line, as redis-server's)."""
    port, workdir = free_port(), os.path.dirname(conf)
    return ServerProcess([sys.executable, "-m", "server", str(conf), "--port", str(port), "--dir", workdir], port, workdir, "millrace")


def redis_from_file(conf) -> ServerProcess:
    port, workdir = free_port(), os.path.dirname(conf)
    return ServerProcess([redis_server_path(), str(conf), "--port", str(port), "--dir", workdir, "--save", ""], port, workdir, "redis")


def fatal_config(conf) -> str:
    done = subprocess.run([sys.executable, "-m", "server", str(conf), "--port", str(free_port())], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert done.returncode == 1
    return done.stderr


def test_user_lines_millrace_cannot_honour_are_fatal_config_errors(tmp_path):
    conf = tmp_path / "a.conf"
    conf.write_text("port 0\nuser alice on >pw ~* +get\n")
    assert "Error in user declaration 'alice': Millrace has one user" in fatal_config(conf)
    conf.write_text("user default on >pw ~* &* +@all\nuser default on >other ~* &* +@all\n")
    assert "Error in user declaration 'default': Duplicate user found. A user can only be defined once in config files" in fatal_config(conf)


def test_users_in_the_config_file_and_an_acl_file_stop_start_up(tmp_path):
    require_redis()
    acl = tmp_path / "users.acl"
    acl.write_text("user default on >pw ~* &* +@all\n")
    conf = tmp_path / "a.conf"
    conf.write_text(f"user default on >pw ~* &* +@all\naclfile {acl}\n")
    for kind in ("millrace", "redis"):
        server = millrace_from_file if kind == "millrace" else redis_from_file
        with pytest.raises(RuntimeError) as failed:
            server(conf).stop()
        assert "Configuring Redis with users defined in redis.conf and at the same setting an ACL file path is invalid" in str(failed.value), kind


@pytest.fixture(scope="module")
def pair():
    yield from millrace_and_redis()


def waiting_client_after_password_changes(port: int) -> list:
    """A client that connected while a password was asked and never logged in: Redis judges it at each
    command by the default user's flags, so it runs once the password is gone and not after it is back."""
    admin = RawConn(port)
    admin.call("CONFIG", "SET", "requirepass", "pw")
    admin.call("AUTH", "pw")
    waiting = RawConn(port)
    try:
        out = [waiting.call("PING")]
        out.append(admin.call("CONFIG", "SET", "requirepass", ""))
        out += [waiting.call("PING"), waiting.call("SET", "k", "v"), waiting.call("AUTH", "pw"), waiting.call("HELLO", "2")]
        out.append(admin.call("CONFIG", "SET", "requirepass", "again"))
        out += [waiting.call("PING"), admin.call("PING"), waiting.call("AUTH", "again"), waiting.call("PING")]
        return [repr(reply[:2] if isinstance(reply, list) else reply) for reply in out]
    finally:
        admin.call("CONFIG", "SET", "requirepass", "")
        admin.close()
        waiting.close()


def test_a_client_waiting_to_authenticate_runs_once_the_password_is_removed(pair):
    millrace, redis_view = (waiting_client_after_password_changes(proc.port) for proc in pair)
    assert millrace == redis_view
    assert millrace[2] == "b'PONG'" and millrace[7].startswith("ReplyError('NOAUTH")


def test_config_rewrite_writes_the_default_users_current_password(tmp_path):
    """A `user` line left from an older password would bring that password back at the next start."""
    conf = tmp_path / "a.conf"
    conf.write_text("user default on >old ~* &* +@all\n")
    proc = millrace_from_file(conf)
    try:
        with proc.client(password="old", protocol=2) as client:
            client.config_set("requirepass", "new")
            client.config_rewrite()
    finally:
        proc.stop()
    lines = conf.read_text().splitlines()
    assert lines[0].startswith("user default on sanitize-payload #") and sum(line.startswith("user ") for line in lines) == 1  # in place, as Redis
    proc = millrace_from_file(conf)
    try:
        with pytest.raises(redis.AuthenticationError):
            proc.client(password="old", protocol=2).ping()
        assert proc.client(password="new", protocol=2).ping()
    finally:
        proc.stop()


def noauth_after_the_password_goes(port: int, rounds: int = 20) -> int:
    """A connection accepted while a password is set, whose first command comes after the password was
    removed (the CONFIG SET may run before the server has finished accepting it)."""
    admin = RawConn(port)
    noauth = 0
    try:
        for _ in range(rounds):
            admin.call("CONFIG", "SET", "requirepass", "pw")
            time.sleep(0.02)  # the server idle in its poll: the accept and the CONFIG SET reach it together
            late = RawConn(port)
            admin.call("CONFIG", "SET", "requirepass", "")
            noauth += repr(late.call("PING")).startswith("ReplyError('NOAUTH")
            late.close()
        return noauth
    finally:
        admin.call("CONFIG", "SET", "requirepass", "")
        admin.close()


def test_a_connection_accepted_as_the_password_goes_runs_commands(pair):
    assert [noauth_after_the_password_goes(proc.port) for proc in pair] == [0, 0]
