"""Connection commands through redis-py and raw sockets: PING, ECHO, HELLO, SELECT,
QUIT, RESET, AUTH, CLIENT *, TIME."""

from __future__ import annotations

import threading
import time

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from server import REDIS_VERSION
from tests.rawclient import RawConn
from tests.servers import start_millrace

NO_RETRY = Retry(NoBackoff(), 0)


def err(callable_, *args, **kw) -> str:
    """The error text redis-py raised (it strips the code for most errors)."""
    with pytest.raises(redis.RedisError) as info:
        callable_(*args, **kw)
    return str(info.value)


# -- PING / ECHO / TIME / SELECT ------------------------------------------------


def test_ping_echo(r, server):
    assert r.ping() is True
    conn = RawConn(server.port)
    assert conn.call("PING", "hello") == b"hello"
    conn.send(b"PING\r\n")
    assert conn.read_raw(until=b"\r\n") == b"+PONG\r\n"
    conn.close()
    assert r.echo("x y") == b"x y"
    assert err(r.execute_command, "PING", "a", "b") == "wrong number of arguments for 'ping' command"
    assert err(r.execute_command, "ECHO") == "wrong number of arguments for 'echo' command"


def test_time(r):
    seconds, micros = r.time()
    assert abs(seconds - time.time()) < 5
    assert 0 <= micros < 1_000_000
    assert err(r.execute_command, "TIME", "x") == "wrong number of arguments for 'time' command"


def test_select(r):
    r.set("k", "db0")
    assert r.execute_command("SELECT", 15) is True
    assert r.get("k") is None
    r.set("k", "db15")
    assert r.execute_command("SELECT", 0) is True
    assert r.get("k") == b"db0"
    assert err(r.execute_command, "SELECT", 16) == "DB index is out of range"
    assert err(r.execute_command, "SELECT", -1) == "DB index is out of range"
    assert err(r.execute_command, "SELECT", "x") == "value is not an integer or out of range"


# -- HELLO ------------------------------------------------------------------------


def test_hello_switches_protocol(server):
    conn = RawConn(server.port)
    conn.send(b"HELLO 3\r\n")
    reply = conn.read()
    assert list(reply) == [b"server", b"version", b"proto", b"id", b"mode", b"role", b"modules"]
    assert reply[b"server"] == b"redis" and reply[b"version"] == REDIS_VERSION.encode() and reply[b"proto"] == 3
    assert isinstance(reply[b"id"], int) and reply[b"modules"] == []
    assert (reply[b"mode"], reply[b"role"]) == (b"standalone", b"master")
    conn.send(b"HELLO\r\n")
    raw = conn.read_raw(until=b"modules\r\n*0\r\n")
    assert raw.startswith(b"%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n")
    conn.send(b"HELLO 2\r\n")
    raw = conn.read_raw(until=b"modules\r\n*0\r\n")
    assert raw.startswith(b"*14\r\n")
    conn.close()


def test_hello_errors_and_setname(r):
    assert err(r.execute_command, "HELLO", 4) == "NOPROTO unsupported protocol version"
    assert err(r.execute_command, "HELLO", 1) == "NOPROTO unsupported protocol version"
    assert err(r.execute_command, "HELLO", "abc") == "Protocol version is not an integer or out of range"
    assert err(r.execute_command, "HELLO", 3, "SETNAME") == "Syntax error in HELLO option 'SETNAME'"
    assert err(r.execute_command, "HELLO", 3, "AUTH", "a") == "Syntax error in HELLO option 'AUTH'"
    assert err(r.execute_command, "HELLO", 3, "FOO") == "Syntax error in HELLO option 'FOO'"
    assert err(r.execute_command, "HELLO", 3, "SETNAME", "a b") == "Client names cannot contain spaces, newlines or special characters."
    reply = r.execute_command("HELLO", r.connection_pool.connection_kwargs.get("protocol", 2), "SETNAME", "hello-name")
    assert r.client_getname() in ("hello-name", b"hello-name")
    fields = reply if isinstance(reply, dict) else dict(zip(reply[::2], reply[1::2], strict=True))
    assert fields[b"proto"] in (2, 3)


def test_hello_auth_without_requirepass(server):
    # the default user is nopass: any password works for it, unknown users do not
    conn = RawConn(server.port)
    assert conn.call("HELLO", 2, "AUTH", "default", "whatever")[:2] == [b"server", b"redis"]
    assert str(conn.call("HELLO", 2, "AUTH", "nobody", "x")) == WRONGPASS
    conn.close()


# -- AUTH -------------------------------------------------------------------------

WRONGPASS = "WRONGPASS invalid username-password pair or user is disabled."


def test_auth_without_password_configured(server):
    conn = RawConn(server.port)
    assert str(conn.call("AUTH", "x")) == (
        "ERR AUTH <password> called without any password configured for the default user. "
        "Are you sure your configuration is correct?"
    )
    assert conn.call("AUTH", "default", "anything") == b"OK"
    assert str(conn.call("AUTH", "someone", "x")) == WRONGPASS
    assert str(conn.call("AUTH", "a", "b", "c")) == "ERR syntax error"
    assert str(conn.call("AUTH")) == "ERR wrong number of arguments for 'auth' command"
    conn.close()


@pytest.fixture(scope="module")
def secured():
    proc = start_millrace("--requirepass", "s3cret")
    yield proc
    proc.stop()


def test_requirepass(secured):
    conn = RawConn(secured.port)
    assert str(conn.call("GET", "k")) == "NOAUTH Authentication required."
    assert str(conn.call("PING")) == "NOAUTH Authentication required."
    assert str(conn.call("HELLO", 3)) == (
        "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> "
        "AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol "
        "version at the same time"
    )
    assert str(conn.call("AUTH", "wrong")) == "WRONGPASS invalid username-password pair or user is disabled."
    assert str(conn.call("AUTH", "default", "wrong")) == "WRONGPASS invalid username-password pair or user is disabled."
    assert conn.call("AUTH", "s3cret") == b"OK"
    assert conn.call("PING") == b"PONG"
    # RESET deauthenticates when a password is required
    assert conn.call("RESET") == b"RESET"
    assert str(conn.call("PING")) == "NOAUTH Authentication required."
    hello = conn.call("HELLO", 2, "AUTH", "default", "s3cret", "SETNAME", "me")
    assert hello[:2] == [b"server", b"redis"]
    assert conn.call("CLIENT", "GETNAME") == b"me"
    conn.close()


def test_requirepass_redis_py(secured):
    good = secured.client(password="s3cret")
    assert good.ping() is True
    with pytest.raises(redis.AuthenticationError):
        secured.client(password="nope", retry=NO_RETRY).ping()
    good.close()


def test_config_set_requirepass_applies_to_new_connections(secured):
    admin = secured.client(password="s3cret")
    try:
        assert admin.config_set("requirepass", "other") is True
        assert admin.ping() is True  # already authenticated connections stay so
        assert secured.client(password="other").ping() is True
        with pytest.raises(redis.AuthenticationError):
            secured.client(password="s3cret", retry=NO_RETRY).ping()
    finally:
        admin.config_set("requirepass", "s3cret")
        admin.close()


# -- QUIT / RESET -------------------------------------------------------------------


def test_quit_closes_after_ok(server):
    conn = RawConn(server.port)
    conn.send(b"QUIT\r\nPING\r\n")
    assert conn.read_raw(timeout=2) == b"+OK\r\n"
    assert conn.is_closed()


def test_reset_restores_fresh_state(server):
    conn = RawConn(server.port)
    assert conn.call("SELECT", 3) == b"OK"
    assert conn.call("CLIENT", "SETNAME", "before") == b"OK"
    assert conn.call("CLIENT", "NO-EVICT", "on") == b"OK"
    assert conn.call("MULTI") == b"OK"
    conn.send(b"*1\r\n$5\r\nRESET\r\n")
    assert conn.read() == b"RESET"
    info = conn.call("CLIENT", "INFO").decode()
    fields = dict(item.split("=", 1) for item in info.split())
    assert fields["db"] == "0" and fields["name"] == "" and fields["flags"] == "N"
    assert fields["multi"] == "-1" and fields["resp"] == "2"
    # RESP3 goes back to RESP2
    conn.send(b"HELLO 3\r\n")
    conn.read()
    conn.send(b"RESET\r\nCLIENT INFO\r\n")
    assert conn.read_raw(until=b"lib-ver=").startswith(b"+RESET\r\n$")
    conn.close()


def test_reset_leaves_client_reply_off(server):
    conn = RawConn(server.port)
    conn.send(b"CLIENT REPLY OFF\r\nPING\r\nRESET\r\nPING\r\n")
    assert conn.read_raw(until=b"+PONG\r\n") == b"+RESET\r\n+PONG\r\n"
    conn.close()


# -- CLIENT ---------------------------------------------------------------------------


def test_client_id_and_names(r):
    client_id = r.client_id()
    assert isinstance(client_id, int) and client_id > 0
    assert r.client_getname() is None
    assert r.client_setname("worker-1") is True
    assert r.client_getname() in ("worker-1", b"worker-1")
    for bad in ("a b", "a\nb", "é"):
        assert err(r.client_setname, bad) == "Client names cannot contain spaces, newlines or special characters."
    assert r.client_setname("") is True
    assert r.client_getname() is None
    assert err(r.execute_command, "CLIENT", "SETNAME") == "wrong number of arguments for 'client|setname' command"


def test_client_setinfo(r):
    info = r.client_info()
    assert info["lib-name"] == "redis-py"  # redis-py sends CLIENT SETINFO on connect
    assert info["lib-ver"] == redis.__version__
    assert r.execute_command("CLIENT", "SETINFO", "LIB-NAME", "mylib") in (True, b"OK", "OK")
    assert r.execute_command("CLIENT", "SETINFO", "lib-ver", "1.2") in (True, b"OK", "OK")
    info = r.client_info()
    assert (info["lib-name"], info["lib-ver"]) == ("mylib", "1.2")
    assert err(r.execute_command, "CLIENT", "SETINFO", "lib-name", "a b") == "lib-name cannot contain spaces, newlines or special characters."
    assert err(r.execute_command, "CLIENT", "SETINFO", "LIB-VER", "a\nb") == "LIB-VER cannot contain spaces, newlines or special characters."
    assert err(r.execute_command, "CLIENT", "SETINFO", "foo", "x") == "Unrecognized option 'foo'"


CLIENT_FIELDS = [
    "id", "addr", "laddr", "fd", "name", "age", "idle", "flags", "db", "sub", "psub", "ssub", "multi", "watch",
    "qbuf", "qbuf-free", "argv-mem", "multi-mem", "rbs", "rbp", "obl", "oll", "omem", "tot-mem", "events", "cmd",
    "user", "redir", "resp", "lib-name", "lib-ver", "io-thread", "tot-net-in", "tot-net-out", "tot-cmds",
]  # fmt: skip


def test_client_list_format(server):
    conn = RawConn(server.port)
    me = conn.call("CLIENT", "ID")
    conn.call("CLIENT", "SETNAME", "lister")
    conn.call("SELECT", 2)
    text = conn.call("CLIENT", "LIST").decode()
    assert text.endswith("\n")
    lines = [line for line in text.split("\n") if line]
    mine = [line for line in lines if line.startswith(f"id={me} ")]
    assert len(mine) == 1
    pairs = [item.split("=", 1) for item in mine[0].split(" ")]
    assert [key for key, _ in pairs] == CLIENT_FIELDS
    fields = dict(pairs)
    assert fields["name"] == "lister" and fields["db"] == "2" and fields["flags"] == "N"
    assert fields["cmd"] == "client|list" and fields["user"] == "default" and fields["resp"] == "2"
    host, port = fields["addr"].rsplit(":", 1)
    assert host == "127.0.0.1" and int(port) == conn.sock.getsockname()[1]
    assert fields["laddr"] == f"127.0.0.1:{server.port}"
    ids = [int(line.split(" ", 1)[0][3:]) for line in lines]
    assert ids == sorted(ids)
    conn.close()


def test_client_list_filters(r):
    me = r.client_id()
    other = r.connection_pool.get_connection()
    try:
        assert [c["id"] for c in r.client_list(client_id=[me])] == [str(me)]
        assert r.execute_command("CLIENT", "LIST", "ID", 999999) in (b"", "")
        assert {c["id"] for c in r.client_list(_type="normal")} >= {str(me)}
        assert r.client_list(_type="pubsub") == []
        assert err(r.execute_command, "CLIENT", "LIST", "TYPE", "foo") == "Unknown client type 'foo'"
        assert err(r.execute_command, "CLIENT", "LIST", "ID", "x") == "Invalid client ID"
        assert err(r.execute_command, "CLIENT", "LIST", "foo") == "syntax error"
    finally:
        r.connection_pool.release(other)


def test_client_info_flags(server):
    conn = RawConn(server.port)
    assert conn.call("MULTI") == b"OK"
    assert conn.call("CLIENT", "INFO") == b"QUEUED"
    (text,) = conn.call("EXEC")
    assert " flags=x " in text.decode() and " multi=1 " in text.decode()  # EXEC runs inside the MULTI state
    assert " cmd=exec " in text.decode()  # Redis's lastcmd is EXEC while the queue runs (execCommand sets cmd only)
    own_id = conn.call("CLIENT", "ID")
    assert conn.call("MULTI") == b"OK" and conn.call("CLIENT", "LIST", "ID", own_id) == b"QUEUED"
    (own,) = conn.call("EXEC")
    assert " cmd=exec " in own.decode()
    assert " cmd=client|info " in conn.call("CLIENT", "INFO").decode()
    assert conn.call("WATCH", "w1", "w2") == b"OK"
    info = conn.call("CLIENT", "INFO").decode()
    assert " flags=N " in info and " watch=2 " in info and " multi=-1 " in info
    conn.close()


def test_client_kill_forms(server):
    victim = RawConn(server.port)
    victim_id = victim.call("CLIENT", "ID")
    addr = victim.sock.getsockname()
    killer = RawConn(server.port)
    assert str(killer.call("CLIENT", "KILL", "1.2.3.4:5")) == "ERR No such client"
    assert killer.call("CLIENT", "KILL", f"{addr[0]}:{addr[1]}") == b"OK"
    assert victim.is_closed()

    victim = RawConn(server.port)
    victim_id = victim.call("CLIENT", "ID")
    assert killer.call("CLIENT", "KILL", "ID", victim_id) == 1
    assert victim.is_closed()
    assert killer.call("CLIENT", "KILL", "ID", victim_id) == 0

    victim = RawConn(server.port)
    laddr = f"127.0.0.1:{server.port}"
    victim.call("PING")
    # SKIPME yes by default: everyone on this port but the caller
    killed = killer.call("CLIENT", "KILL", "LADDR", laddr)
    assert killed >= 1
    assert victim.is_closed()
    assert killer.call("PING") == b"PONG"

    victim = RawConn(server.port)
    victim.call("PING")
    vaddr = victim.sock.getsockname()
    assert killer.call("CLIENT", "KILL", "ADDR", f"{vaddr[0]}:{vaddr[1]}", "USER", "default", "TYPE", "normal") == 1
    assert victim.is_closed()

    errors = {
        ("ID", "x"): "client-id should be greater than 0",
        ("ID", "0"): "client-id should be greater than 0",
        ("TYPE", "foo"): "Unknown client type 'foo'",
        ("USER", "foo"): "No such user 'foo'",
        ("SKIPME", "maybe"): "syntax error",
        ("foo", "bar"): "syntax error",
        ("ID", "1", "SKIPME"): "syntax error",
    }
    for args, text in errors.items():
        assert str(killer.call("CLIENT", "KILL", *args)) == "ERR " + text, args
    # killing yourself: the reply arrives, then the link closes
    assert killer.call("CLIENT", "KILL", "ID", killer.call("CLIENT", "ID"), "SKIPME", "no") == 1
    assert killer.is_closed()


def test_client_reply_modes(server):
    conn = RawConn(server.port)
    conn.send(b"CLIENT REPLY OFF\r\nPING\r\nECHO a\r\nCLIENT REPLY ON\r\nECHO b\r\n")
    assert conn.read_raw(until=b"$1\r\nb\r\n") == b"+OK\r\n$1\r\nb\r\n"
    conn.send(b"CLIENT REPLY SKIP\r\nECHO skipped\r\nECHO shown\r\n")
    assert conn.read_raw(until=b"shown\r\n") == b"$5\r\nshown\r\n"
    assert str(conn.call("CLIENT", "REPLY", "maybe")) == "ERR syntax error"
    conn.close()


def test_client_no_evict_no_touch(r):
    assert r.execute_command("CLIENT", "NO-EVICT", "on") in (True, b"OK", "OK")
    assert "e" in r.client_info()["flags"]
    assert r.execute_command("CLIENT", "NO-EVICT", "OFF") in (True, b"OK", "OK")
    assert err(r.execute_command, "CLIENT", "NO-EVICT", "x") == "syntax error"
    assert r.execute_command("CLIENT", "NO-TOUCH", "on") in (True, b"OK", "OK")
    assert "T" in r.client_info()["flags"]
    r.execute_command("CLIENT", "NO-TOUCH", "off")


def test_client_unblock(server):
    """CLIENT UNBLOCK releases a client parked in server.blocking (needs a blocking command)."""
    blocked = RawConn(server.port)
    blocked_id = blocked.call("CLIENT", "ID")
    admin = RawConn(server.port)
    assert admin.call("CLIENT", "UNBLOCK", blocked_id) == 0
    blocked.send(b"XREAD BLOCK 0 STREAMS unblock-s $\r\n")
    _wait_blocked(admin, blocked_id)
    assert admin.call("CLIENT", "UNBLOCK", blocked_id) == 1
    assert blocked.read() is None  # TIMEOUT: the command's own timeout reply
    blocked.send(b"XREAD BLOCK 0 STREAMS unblock-s $\r\n")
    _wait_blocked(admin, blocked_id)
    assert admin.call("CLIENT", "UNBLOCK", blocked_id, "ERROR") == 1
    assert str(blocked.read()) == "UNBLOCKED client unblocked via CLIENT UNBLOCK"
    assert blocked.call("PING") == b"PONG"


def _wait_blocked(admin: RawConn, client_id: int) -> None:
    for _ in range(100):
        if "b" in admin.call("CLIENT", "LIST", "ID", client_id).decode().split(" flags=")[1].split(" ")[0]:
            return
        time.sleep(0.02)
    raise AssertionError("client never blocked")


def test_client_unblock_errors(r):
    assert err(r.execute_command, "CLIENT", "UNBLOCK", 1, "foo") == "CLIENT UNBLOCK reason should be TIMEOUT or ERROR"
    assert err(r.execute_command, "CLIENT", "UNBLOCK", "x") == "value is not an integer or out of range"
    assert r.execute_command("CLIENT", "UNBLOCK", 987654) == 0


def test_client_help_and_unknown(r):
    lines = r.execute_command("CLIENT", "HELP")
    assert lines[0] in (b"CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:")
    assert err(r.execute_command, "CLIENT", "FOO") == "unknown subcommand 'FOO'. Try CLIENT HELP."
    assert err(r.execute_command, "CLIENT") == "wrong number of arguments for 'client' command"


def test_client_list_idle_and_age(server):
    conn = RawConn(server.port)
    me = conn.call("CLIENT", "ID")
    watcher = RawConn(server.port)
    done = threading.Event()
    time.sleep(1.1)
    line = watcher.call("CLIENT", "LIST", "ID", me).decode()
    fields = dict(item.split("=", 1) for item in line.split())
    assert int(fields["age"]) >= 1 and int(fields["idle"]) >= 1
    done.set()
    conn.close()
    watcher.close()


def test_unauthenticated_request_limits(secured):
    """Before AUTH, Redis refuses more than 10 arguments or bulks over 16384 bytes."""
    conn = RawConn(secured.port)
    conn.send(b"*11\r\n" + b"$1\r\na\r\n" * 11)
    assert conn.read_raw(until=b"\r\n") == b"-ERR Protocol error: unauthenticated multibulk length\r\n"
    assert conn.is_closed()
    conn = RawConn(secured.port)
    conn.send(b"*10\r\n" + b"$1\r\na\r\n" * 10)
    assert conn.read_raw(until=b"\r\n").startswith(b"-ERR unknown command 'a'")
    conn.send(b"*2\r\n$4\r\nECHO\r\n$16384\r\n" + b"x" * 16384 + b"\r\n")
    assert conn.read_raw(until=b"\r\n") == b"-NOAUTH Authentication required.\r\n"
    conn.send(b"*2\r\n$4\r\nECHO\r\n$16385\r\n" + b"x" * 100)  # refused from the header alone
    assert conn.read_raw(until=b"\r\n") == b"-ERR Protocol error: unauthenticated bulk length\r\n"
    assert conn.is_closed()
    conn = RawConn(secured.port)
    conn.send(b"*2\r\n$4\r\nAUTH\r\n$6\r\ns3cret\r\n*11\r\n" + b"$1\r\na\r\n" * 11)
    assert conn.read_raw(until=b"'a' \r\n").startswith(b"+OK\r\n-ERR unknown command 'a'")
    conn.send(b"*2\r\n$4\r\nECHO\r\n$20000\r\n" + b"x" * 20000 + b"\r\n")
    assert conn.read() == b"x" * 20000
    conn.close()


def _timed(conn: RawConn, *args):
    start = time.monotonic()
    reply = conn.call(*args)
    return reply, time.monotonic() - start


def _wait_blocked_clients(admin: RawConn, n: int) -> None:
    deadline = time.monotonic() + 10
    while f"blocked_clients:{n}\r\n" not in admin.call("INFO", "clients").decode():
        assert time.monotonic() < deadline, f"expected {n} blocked clients"
        time.sleep(0.01)


def test_client_pause_write(server):
    # Pauses far longer than the test: only UNPAUSE ends them, so no assertion depends on the machine's speed.
    admin, other = RawConn(server.port), RawConn(server.port)
    assert admin.call("CLIENT", "PAUSE", 10000, "WRITE") == b"OK"
    reply, took = _timed(other, "GET", "paused-key")
    assert reply is None and took < 5  # reads go on (a postponed read would wait the 10 s)
    other.send(b"SET paused-key v\r\n")
    _wait_blocked_clients(admin, 1)  # writes wait for the end of the pause
    assert admin.call("CLIENT", "UNPAUSE") == b"OK"
    assert other.read() == b"OK"
    assert admin.call("CLIENT", "PAUSE", 10000, "WRITE") == b"OK"
    other.send(b"SET paused-key w\r\nGET paused-key\r\n")  # what follows a paused command waits behind it
    _wait_blocked_clients(admin, 1)
    assert admin.call("CLIENT", "UNBLOCK", _client_id(admin, other)) == 0
    assert admin.call("CLIENT", "UNPAUSE") == b"OK"
    assert other.read_raw(until=b"$1\r\nw\r\n", timeout=3) == b"+OK\r\n$1\r\nw\r\n"
    admin.close()
    other.close()


def _client_id(admin: RawConn, other: RawConn) -> int:
    port = other.sock.getsockname()[1]
    for line in admin.call("CLIENT", "LIST").decode().splitlines():
        if f"addr=127.0.0.1:{port} " in line:
            return int(line.split(" ", 1)[0][3:])
    raise AssertionError("client not found")


def test_client_pause_all_and_errors(server):
    admin, other = RawConn(server.port), RawConn(server.port)
    # timed from before PAUSE: the pause runs 300 ms from its arrival, however late the next command is sent
    start = time.monotonic()
    assert admin.call("CLIENT", "PAUSE", 300) == b"OK"
    assert other.call("PING") == b"PONG"
    assert time.monotonic() - start >= 0.25
    start = time.monotonic()
    assert admin.call("CLIENT", "PAUSE", 300, "ALL") == b"OK"
    assert other.call("CLIENT", "UNPAUSE") == b"OK"  # in ALL mode even UNPAUSE waits, as in Redis
    assert time.monotonic() - start >= 0.25
    assert str(admin.call("CLIENT", "PAUSE", "x")) == "ERR timeout is not an integer or out of range"
    assert str(admin.call("CLIENT", "PAUSE", -1)) == "ERR timeout is negative"
    assert str(admin.call("CLIENT", "PAUSE", 10, "FOO")) == "ERR CLIENT PAUSE mode must be WRITE or ALL"
    assert str(admin.call("CLIENT", "PAUSE")) == "ERR wrong number of arguments for 'client|pause' command"
    # Redis 7.2+ refuses a deadline past LLONG_MAX (timeout.c, getTimeoutFromObjectOrReply: "'tval+now' would
    # overflow"); 7.0 wrapped around instead, so this is not differential. Accepting it paused the server for good.
    assert str(admin.call("CLIENT", "PAUSE", 9223372036854775807)) == "ERR timeout is out of range"
    assert str(admin.call("CLIENT", "PAUSE", 9223372036854775807 - 1000, "WRITE")) == "ERR timeout is out of range"
    assert other.call("PING") == b"PONG" and other.call("SET", "after-pause", "v") == b"OK"
    assert admin.call("CLIENT", "UNPAUSE") == b"OK"
    admin.close()
    other.close()
