"""Server and introspection commands: INFO, CONFIG, COMMAND, DEBUG, FUNCTION,
LASTSAVE, MONITOR, SHUTDOWN."""

from __future__ import annotations

import os
import time

import pytest
import redis

from server import REDIS_VERSION, __version__
from tests.rawclient import RawConn, encode_command
from tests.servers import start_millrace


@pytest.fixture(scope="module")
def server():
    proc = start_millrace("--enable-debug-command", "local")
    yield proc
    proc.stop()


def err(callable_, *args) -> str:
    with pytest.raises(redis.ResponseError) as info:
        callable_(*args)
    return str(info.value)


def raw_info(server, *sections: str) -> str:
    conn = RawConn(server.port)
    try:
        return conn.call("INFO", *sections).decode()
    finally:
        conn.close()


# -- INFO ---------------------------------------------------------------------------


def test_info_default_sections(server):
    text = raw_info(server)
    headers = [line for line in text.split("\r\n") if line.startswith("# ")]
    assert headers == [
        "# Server", "# Clients", "# Memory", "# Persistence", "# Threads", "# Stats", "# Replication", "# CPU",
        "# Modules", "# Errorstats", "# Cluster", "# Keyspace",
    ]  # fmt: skip
    assert text.endswith("\r\n") and "\r\n\r\n# Clients\r\n" in text
    assert "\n" not in text.replace("\r\n", "")


def test_info_server_fields(r, server):
    info = r.info("server")
    assert info["redis_version"] == REDIS_VERSION
    assert info["millrace_version"] == __version__
    assert info["redis_mode"] == "standalone"
    assert info["tcp_port"] == server.port
    assert info["process_id"] == server.proc.pid
    assert info["arch_bits"] == 64
    assert len(info["run_id"]) == 40
    assert info["uptime_in_seconds"] >= 0 and info["uptime_in_days"] == 0
    assert info["hz"] == 10
    assert set(r.info("server")) == set(info)


def test_info_sections_and_keyspace(r):
    r.set("a", 1)
    r.set("b", 2)
    r.execute_command("SELECT", 5)
    r.set("c", 3)
    keyspace = r.info("keyspace")
    assert keyspace["db0"] == {"keys": 2, "expires": 0, "avg_ttl": 0, "subexpiry": 0}
    assert keyspace["db5"]["keys"] == 1
    r.execute_command("SELECT", 0)
    assert r.info("replication")["role"] == "master"
    assert r.info("replication")["connected_slaves"] == 0
    persistence = r.info("persistence")
    assert persistence["loading"] == 0 and persistence["aof_enabled"] == 0
    clients = r.info("clients")
    assert clients["connected_clients"] >= 1 and clients["blocked_clients"] == 0
    assert clients["maxclients"] == 10000


def test_info_multiple_and_unknown_sections(server):
    text = raw_info(server, "clients", "CPU")
    assert [line for line in text.split("\r\n") if line.startswith("#")] == ["# Clients", "# CPU"]
    assert raw_info(server, "nosuchsection") == ""
    everything = raw_info(server, "everything")
    assert "# Commandstats" in everything and "# Latencystats" in everything
    assert raw_info(server, "all").count("# ") == everything.count("# ")
    assert "# Commandstats" not in raw_info(server, "default")


def test_info_memory_is_rss_based(r, server):
    memory = r.info("memory")
    with open(f"/proc/{server.proc.pid}/status") as handle:
        rss_kb = next(int(line.split()[1]) for line in handle if line.startswith("VmRSS:"))
    assert abs(memory["used_memory_rss"] - rss_kb * 1024) < 64 * 1024 * 1024
    assert memory["used_memory_human"].endswith(("K", "M", "G"))
    assert memory["maxmemory_policy"] == "noeviction"


def test_info_stats_and_commandstats(server):
    conn = RawConn(server.port)
    conn.call("CONFIG", "RESETSTAT")
    for _ in range(3):
        conn.call("PING")
    conn.call("CONFIG", "GET", "port")
    conn.call("NOSUCHCOMMAND")
    conn.call("GET")
    text = conn.call("INFO", "commandstats").decode()
    lines = dict(line.split(":", 1) for line in text.split("\r\n")[1:] if line)
    assert lines["cmdstat_ping"].startswith("calls=3,usec=")
    assert lines["cmdstat_ping"].endswith(",rejected_calls=0,failed_calls=0")
    assert lines["cmdstat_config|get"].startswith("calls=1,")
    assert lines["cmdstat_get"].startswith("calls=0,") and "rejected_calls=1" in lines["cmdstat_get"]
    stats = conn.call("INFO", "stats").decode()
    assert "total_error_replies:2\r\n" in stats
    errors = conn.call("INFO", "errorstats").decode()
    assert errors == "# Errorstats\r\nerrorstat_ERR:count=2\r\n"
    conn.close()


def test_info_is_verbatim_in_resp3(server):
    conn = RawConn(server.port)
    conn.send(b"HELLO 3\r\n")
    conn.read()
    conn.send(b"INFO server\r\n")
    raw = conn.read_raw(until=b"listener0")
    assert raw.startswith(b"=") and raw.split(b"\r\n", 1)[1].startswith(b"txt:# Server\r\n")
    conn.close()


# -- CONFIG ----------------------------------------------------------------------


def test_config_get_patterns(r):
    assert r.config_get("port") == {"port": str(r.connection_pool.connection_kwargs["port"])}
    got = r.execute_command("CONFIG", "GET", "maxclients", "hz", "*node-max*")
    if isinstance(got, list):
        got = dict(zip(got[::2], got[1::2], strict=True))
    got = {k.decode() if isinstance(k, bytes) else k: v for k, v in got.items()}
    assert set(got) == {"maxclients", "hz", "stream-node-max-entries", "stream-node-max-bytes"}
    assert r.config_get("nosuch*") == {}
    assert r.config_get("appendonly") == {"appendonly": "no"}
    assert r.config_get("save")["save"] == "3600 1 300 100 60 10000"
    assert err(r.execute_command, "CONFIG", "GET") == "wrong number of arguments for 'config|get' command"


def test_config_set_validation(r):
    cases = {
        ("maxclients", "abc"): "argument couldn't be parsed into an integer",
        ("maxclients", "0"): "argument must be between 1 and 4294967295 inclusive",
        ("proto-max-bulk-len", "10"): "argument must be between 1048576 and 9223372036854775807 inclusive",
        ("proto-max-bulk-len", "1x"): "argument must be a memory value",
        ("appendonly", "maybe"): "argument must be 'yes' or 'no'",
        ("appendfsync", "foo"): "argument(s) must be one of the following: everysec, always, no",
        ("databases", "3"): "can't set immutable config",
        ("dir", "/tmp"): "can't set protected config",
        ("save", "1 2 3"): "Invalid save parameters",
    }
    for (name, value), why in cases.items():
        assert err(r.config_set, name, value) == f"CONFIG SET failed (possibly related to argument '{name}') - {why}"
    assert err(r.config_set, "nosuch", "1") == "Unknown option or number of arguments for CONFIG SET - 'nosuch'"
    assert err(r.execute_command, "CONFIG", "SET", "hz") == "wrong number of arguments for 'config|set' command"
    assert err(r.execute_command, "CONFIG", "SET", "hz", "5", "maxclients") == "syntax error"


def test_config_set_many_is_atomic(r):
    before = r.config_get("maxclients")["maxclients"]
    assert err(r.execute_command, "CONFIG", "SET", "maxclients", "77", "hz", "abc") == (
        "CONFIG SET failed (possibly related to argument 'hz') - argument couldn't be parsed into an integer"
    )
    assert r.config_get("maxclients")["maxclients"] == before
    assert err(r.execute_command, "CONFIG", "SET", "hz", "5", "hz", "6") == (
        "CONFIG SET failed (possibly related to argument 'hz') - duplicate parameter"
    )
    assert r.execute_command("CONFIG", "SET", "maxclients", "77", "hz", "20") in (True, b"OK", "OK")
    assert r.config_get("maxclients")["maxclients"] == "77"
    assert r.info("server")["hz"] == 20
    r.config_set("hz", "1000")
    assert r.config_get("hz")["hz"] == "500"  # clamped like Redis's CONFIG_MAX_HZ
    r.execute_command("CONFIG", "SET", "maxclients", before, "hz", "10")


def test_config_aliases_and_units(r):
    r.config_set("slave-read-only", "no")
    assert r.config_get("replica-read-only") == {"replica-read-only": "no"}
    r.config_set("replica-read-only", "yes")
    r.config_set("maxmemory", "1mb")
    assert r.config_get("maxmemory") == {"maxmemory": "1048576"}
    assert r.info("memory")["maxmemory_human"] == "1.00M"
    r.config_set("maxmemory", "0")


def test_config_resetstat(r):
    r.ping()
    assert r.config_resetstat() is True
    stats = r.info("stats")
    assert stats["total_error_replies"] == 0
    assert "cmdstat_ping" not in r.info("commandstats")


def test_config_rewrite_without_file(r):
    assert err(r.config_rewrite) == "The server is running without a config file"


def test_maxclients_applies(server):
    admin = RawConn(server.port)
    count = int(admin.call("INFO", "clients").decode().split("connected_clients:")[1].split("\r\n")[0])
    admin.call("CONFIG", "SET", "maxclients", count)
    extra = RawConn(server.port)
    try:
        assert extra.read_raw(until=b"\r\n") == b"-ERR max number of clients reached\r\n"
        assert extra.is_closed()
    finally:
        admin.call("CONFIG", "SET", "maxclients", 10000)
        admin.close()
    assert "rejected_connections:1\r\n" in raw_info(server, "stats")


def test_proto_max_bulk_len_applies_to_live_connections(server):
    conn = RawConn(server.port)
    assert conn.call("CONFIG", "SET", "proto-max-bulk-len", 2 * 1024 * 1024) == b"OK"
    try:
        conn.send(b"*2\r\n$4\r\nECHO\r\n$3000000\r\n")
        assert conn.read_raw(until=b"\r\n") == b"-ERR Protocol error: invalid bulk length\r\n"
        assert conn.is_closed()
    finally:
        other = RawConn(server.port)
        other.call("CONFIG", "SET", "proto-max-bulk-len", "512mb")
        other.close()


def test_config_help(r):
    lines = r.execute_command("CONFIG", "HELP")
    assert len(lines) == 11 and lines[-1] in (b"    Print this help.", "    Print this help.")


# -- COMMAND -------------------------------------------------------------------------


def test_command_table_via_redis_py(r):
    table = r.command()
    assert table["get"]["arity"] == 2
    assert set(table["get"]["flags"]) == {"readonly", "fast"}
    assert (table["get"]["first_key_pos"], table["get"]["last_key_pos"], table["get"]["step_count"]) == (1, 1, 1)
    assert table["config"]["arity"] == -2
    assert r.command_count() == len(table)
    assert r.command_getkeys("SET", "k", "v") == ["k"] or r.command_getkeys("SET", "k", "v") == [b"k"]


def test_command_info_shape(server):
    conn = RawConn(server.port)
    get, unknown, config_get = conn.call("COMMAND", "INFO", "get", "nosuch", "config|get")
    assert unknown is None
    assert get[:7] == [b"get", 2, [b"readonly", b"fast"], 1, 1, 1, [b"@read", b"@string", b"@fast"]]
    assert get[7] == []
    spec = get[8][0]
    assert spec == [
        b"flags", [b"RO", b"access"],
        b"begin_search", [b"type", b"index", b"spec", [b"index", 1]],
        b"find_keys", [b"type", b"range", b"spec", [b"lastkey", 0, b"keystep", 1, b"limit", 0]],
    ]  # fmt: skip
    assert get[9] == []
    assert config_get[0] == b"config|get" and config_get[1] == -3
    assert config_get[2] == [b"admin", b"noscript", b"loading", b"stale"]
    assert config_get[6] == [b"@admin", b"@slow", b"@dangerous"]
    (config,) = conn.call("COMMAND", "INFO", "config")
    assert config[:7] == [b"config", -2, [], 0, 0, 0, [b"@slow"]]
    assert b"config|set" in [sub[0] for sub in config[9]]
    conn.close()


def test_command_docs_and_list(server):
    conn = RawConn(server.port)
    docs = conn.call("COMMAND", "DOCS", "ping", "nosuch", "config")
    assert docs[0] == b"ping"
    assert docs[1][:8] == [b"summary", b"Returns the server's liveliness response.", b"since", b"1.0.0", b"group", b"connection", b"complexity", b"O(1)"]
    assert docs[2] == b"config" and b"subcommands" in docs[3]
    assert len(docs) == 4
    names = conn.call("COMMAND", "LIST")
    assert b"ping" in names and b"config|get" in names and len(names) == len(set(names))
    assert conn.call("COMMAND", "LIST", "FILTERBY", "PATTERN", "conf*") == [b"config", b"config|get", b"config|set", b"config|resetstat", b"config|rewrite", b"config|help"]
    assert b"ping" in conn.call("COMMAND", "LIST", "FILTERBY", "ACLCAT", "connection")
    assert b"get" not in conn.call("COMMAND", "LIST", "FILTERBY", "ACLCAT", "connection")
    assert conn.call("COMMAND", "LIST", "FILTERBY", "MODULE", "x") == []
    assert str(conn.call("COMMAND", "LIST", "FILTERBY", "x", "y")) == "ERR syntax error"
    assert str(conn.call("COMMAND", "LIST", "foo")) == "ERR syntax error"
    assert conn.call("COMMAND", "COUNT") == len(conn.call("COMMAND"))
    conn.close()


def test_command_getkeys(server):
    conn = RawConn(server.port)
    assert conn.call("COMMAND", "GETKEYS", "SET", "k", "v") == [b"k"]
    assert conn.call("COMMAND", "GETKEYSANDFLAGS", "SET", "k", "v") == [[b"k", [b"OW", b"update"]]]  # RW+access with GET
    assert conn.call("COMMAND", "GETKEYS", "DEL", "a", "b", "c") == [b"a", b"b", b"c"]
    assert str(conn.call("COMMAND", "GETKEYS", "nosuch")) == "ERR Invalid command specified"
    assert str(conn.call("COMMAND", "GETKEYS", "get")) == "ERR Invalid number of arguments specified for command"
    assert str(conn.call("COMMAND", "GETKEYS", "ping")) == "ERR The command has no key arguments"
    assert str(conn.call("COMMAND", "GETKEYS")) == "ERR wrong number of arguments for 'command|getkeys' command"
    assert str(conn.call("COMMAND", "FOO")) == "ERR unknown subcommand 'FOO'. Try COMMAND HELP."
    assert conn.call("COMMAND", "HELP")[0] == b"COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    conn.close()


def test_every_help_reply_ends_as_redis_8s(server):
    """Issue 21: Redis 8's "Print this help." closes every HELP reply (7.0 said "Prints"): each
    command with a HELP subcommand, Millrace's own (XRETENTION) included."""
    conn = RawConn(server.port)
    names = set(conn.call("COMMAND", "LIST"))
    helped = sorted(name.split(b"|")[0] for name in names if name.endswith(b"|help"))
    assert {b"client", b"config", b"xgroup", b"xinfo", b"latency", b"xretention"} <= set(helped)
    for name in helped:
        lines = conn.call(name, "HELP")
        assert lines[0].startswith(name.upper() + b" <subcommand>"), (name, lines[0])
        assert lines[-2:] == [b"HELP", b"    Print this help."], (name, lines[-2:])
    conn.close()


# -- DEBUG / FUNCTION / LASTSAVE -------------------------------------------------------


def test_debug(server):
    conn = RawConn(server.port)
    assert conn.call("DEBUG", "LOG", "hello from test") == b"OK"
    start = time.monotonic()
    assert conn.call("DEBUG", "SLEEP", "0.2") == b"OK"
    assert time.monotonic() - start >= 0.19
    assert conn.call("DEBUG", "SLEEP", "0") == b"OK"
    assert str(conn.call("DEBUG", "SLEEP", "x")) == "ERR value is not a valid float"
    assert str(conn.call("DEBUG", "NOSUCH")) == "ERR unknown subcommand or wrong number of arguments for 'NOSUCH'. Try DEBUG HELP."
    assert str(conn.call("DEBUG", "RELOAD", "BOGUS")) == "ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options."
    assert conn.call("DEBUG", "HELP")[0] == b"DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    conn.close()
    assert "DEBUG LOG: hello from test" in server.read_log()


def test_debug_disabled_by_default():
    proc = start_millrace()
    try:
        conn = RawConn(proc.port)
        assert str(conn.call("DEBUG", "SLEEP", "0")) == (
            'ERR DEBUG command not allowed. If the enable-debug-command option is set to "local", you can run it '
            "from a local connection, otherwise you need to set this option in the configuration file, and then "
            "restart the server."
        )
        conn.close()
    finally:
        proc.stop()


def test_function_and_lastsave(r):
    assert r.function_list() == []
    assert r.function_flush() is True
    assert r.function_flush("SYNC") is True
    assert err(r.function_flush, "x") == "FUNCTION FLUSH only supports SYNC|ASYNC option"
    assert abs(r.lastsave().timestamp() - time.time()) < 3600
    assert err(r.execute_command, "LASTSAVE", "x") == "wrong number of arguments for 'lastsave' command"


# -- MONITOR ---------------------------------------------------------------------------


def test_monitor_lines(server):
    mon = RawConn(server.port)
    assert mon.call("MONITOR") == b"OK"
    other = RawConn(server.port)
    other.call("SET", "k", 'a "quoted"\nvalue\x01')
    other.call("SELECT", 3)
    other.call("AUTH", "default", "secret")
    other.call("CONFIG", "GET", "port")  # admin: not shown
    other.call("PING")
    port = other.sock.getsockname()[1]
    raw = mon.read_raw(until=b'"PING"\r\n').decode()
    lines = raw.split("\r\n")[:-1]
    assert len(lines) == 4
    stamp, rest = lines[0][1:].split(" ", 1)
    assert abs(float(stamp) - time.time()) < 60 and len(stamp.split(".")[1]) == 6
    assert rest == f'[0 127.0.0.1:{port}] "SET" "k" "a \\"quoted\\"\\nvalue\\x01"'
    assert lines[1].endswith(f'[3 127.0.0.1:{port}] "SELECT" "3"')  # fed after the command: its new db, as Redis
    assert lines[2].endswith(f'[3 127.0.0.1:{port}] "AUTH" "(redacted)" "(redacted)"')
    assert lines[3].endswith(f'[3 127.0.0.1:{port}] "PING"')
    mon.close()
    other.close()


# -- SHUTDOWN ----------------------------------------------------------------------------


def test_shutdown_exits_cleanly():
    proc = start_millrace()
    try:
        conn = RawConn(proc.port)
        assert str(conn.call("SHUTDOWN", "ABORT")) == "ERR No shutdown in progress."
        assert str(conn.call("SHUTDOWN", "SAVE", "NOSAVE")) == "ERR syntax error"
        assert str(conn.call("SHUTDOWN", "foo")) == "ERR syntax error"
        conn.send(b"SHUTDOWN NOSAVE\r\n")
        assert conn.is_closed()
        assert proc.proc.wait(10) == 0
    finally:
        proc.stop()
    assert os.path.isdir(proc.dir)


def test_shutdown_via_redis_py():
    proc = start_millrace()
    try:
        client = proc.client()
        assert client.shutdown(nosave=True) is None  # redis-py expects the link to drop
        assert proc.proc.wait(10) == 0
    finally:
        proc.stop()


def test_command_docs_arguments_from_syntax(server):
    conn = RawConn(server.port)
    (name, docs) = conn.call("COMMAND", "DOCS", "config|set")
    assert name == b"config|set"
    fields = dict(zip(docs[::2], docs[1::2], strict=True))
    (block,) = fields[b"arguments"]
    assert block == [
        b"name", b"data", b"type", b"block", b"flags", [b"multiple"],
        b"arguments", [
            [b"name", b"parameter", b"type", b"string", b"display_text", b"parameter"],
            [b"name", b"value", b"type", b"string", b"display_text", b"value"],
        ],
    ]  # fmt: skip
    (_, ping) = conn.call("COMMAND", "DOCS", "ping")
    fields = dict(zip(ping[::2], ping[1::2], strict=True))
    assert fields[b"arguments"] == [[b"name", b"message", b"type", b"string", b"display_text", b"message", b"flags", [b"optional"]]]
    (_, count) = conn.call("COMMAND", "DOCS", "command|count")
    assert b"arguments" not in count
    conn.close()


def test_idle_timeout_closes_clients(server):
    admin = RawConn(server.port)
    idle = RawConn(server.port)
    assert idle.call("PING") == b"PONG"
    assert admin.call("CONFIG", "SET", "timeout", "1") == b"OK"
    try:
        assert idle.is_closed(timeout=4)
    finally:
        fresh = RawConn(server.port)
        fresh.call("CONFIG", "SET", "timeout", "0")
        fresh.close()


def test_instantaneous_ops_per_sec(server):
    conn = RawConn(server.port)
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        conn.send(b"PING\r\n" * 200)
        conn.read_raw(until=b"+PONG\r\n" * 200, timeout=2)
    ops = int(conn.call("INFO", "stats").decode().split("instantaneous_ops_per_sec:")[1].split("\r\n")[0])
    assert ops > 100
    conn.close()


def test_info_everything_parses_with_redis_py(r):
    r.set("k", "v")
    r.execute_command("CONFIG", "GET", "hz")
    info = r.info("everything")
    assert info["redis_version"] == REDIS_VERSION
    assert info["cmdstat_config|get"]["calls"] >= 1
    assert info["db0"]["keys"] == 1
    assert isinstance(info["used_memory"], int)


def test_debug_set_active_expire(server):
    conn = RawConn(server.port)
    conn.call("FLUSHALL")
    assert conn.call("DEBUG", "SET-ACTIVE-EXPIRE", "0") == b"OK"
    try:
        conn.call("SET", "shortlived", "v", "PX", "50")
        time.sleep(0.4)
        assert conn.call("DBSIZE") == 1  # not expired in the background
        assert conn.call("GET", "shortlived") is None  # lazily expired on access
    finally:
        conn.call("DEBUG", "SET-ACTIVE-EXPIRE", "1")
        conn.call("FLUSHALL")
        conn.close()


def test_reset_leaves_monitor_mode(server):
    mon = RawConn(server.port)
    assert mon.call("MONITOR") == b"OK"
    assert mon.call("RESET") == b"RESET"
    other = RawConn(server.port)
    other.call("PING")
    assert mon.call("CLIENT", "INFO").decode().split(" flags=")[1].split(" ")[0] == "N"
    assert mon.call("ECHO", "after") == b"after"  # no monitor line arrived in between
    mon.close()
    other.close()


def test_info_net_bytes(server):
    conn = RawConn(server.port)
    before = conn.call("INFO", "stats").decode()
    conn.call("ECHO", "x" * 10000)
    after = conn.call("INFO", "stats").decode()

    def field(text, name):
        return int(text.split(f"{name}:")[1].split("\r\n")[0])

    assert field(after, "total_net_input_bytes") - field(before, "total_net_input_bytes") >= 10000 + 2 * 20
    assert field(after, "total_net_output_bytes") - field(before, "total_net_output_bytes") >= 10000 + len(before)
    conn.close()


def test_maxmemory_refuses_denyoom_commands(server):
    conn = RawConn(server.port)
    conn.call("SET", "before", "1")
    assert conn.call("CONFIG", "SET", "maxmemory", "1mb") == b"OK"  # far below the process RSS
    try:
        assert str(conn.call("SET", "k", "v")) == "OOM command not allowed when used memory > 'maxmemory'."
        assert conn.call("GET", "before") == b"1"  # reads still work
        # the same in a pipeline (read at once: the server's batch path, not the one-request one)
        conn.send(encode_command("SET", "k", "v") + encode_command("GET", "before") + encode_command("INCR", "n"))
        oom, value, incr = conn.read(), conn.read(), conn.read()
        assert (str(oom), value, str(incr)) == ("OOM command not allowed when used memory > 'maxmemory'.", b"1", str(oom))
        assert conn.call("DEL", "before") == 1  # and so do deletions
    finally:
        conn.call("CONFIG", "SET", "maxmemory", "0")
    assert conn.call("SET", "k", "v") == b"OK"
    conn.call("DEL", "k")
    conn.close()


def test_slowlog(server):
    conn = RawConn(server.port)
    assert conn.call("SLOWLOG", "RESET") == b"OK"
    assert conn.call("CONFIG", "SET", "slowlog-log-slower-than", "0") == b"OK"
    try:
        conn.call("CLIENT", "SETNAME", "slow-one")
        conn.call("ECHO", "y" * 200)
        conn.call("AUTH", "default", "secret")
        conn.call("DEL", *[f"k{i}" for i in range(40)])
        entries = conn.call("SLOWLOG", "GET", "-1")
        assert conn.call("SLOWLOG", "LEN") >= 5
        # newest first: DEL, AUTH, ECHO, CLIENT SETNAME (and CONFIG SET itself, logged as it ran)
        del_entry, auth_entry, echo_entry = entries[:3]
        assert del_entry[0] > auth_entry[0] > echo_entry[0]
        assert abs(del_entry[1] - time.time()) < 60 and del_entry[2] >= 0
        assert len(del_entry[3]) == 32 and del_entry[3][-1] == b"... (10 more arguments)"
        assert del_entry[3][:2] == [b"DEL", b"k0"]
        assert del_entry[4] == f"127.0.0.1:{conn.sock.getsockname()[1]}".encode() and del_entry[5] == b"slow-one"
        assert auth_entry[3] == [b"AUTH", b"(redacted)", b"(redacted)"]
        assert echo_entry[3] == [b"ECHO", b"y" * 128 + b"... (72 more bytes)"]
        logged = conn.call("SLOWLOG", "LEN")  # itself logged once it has run
        assert len(conn.call("SLOWLOG", "GET")) == min(10, logged + 1)
        assert len(conn.call("SLOWLOG", "GET", "1")) == 1
        assert str(conn.call("SLOWLOG", "GET", "-2")) == "ERR count should be greater than or equal to -1"
        assert conn.call("CONFIG", "SET", "slowlog-max-len", "2") == b"OK"
        conn.call("PING")
        assert conn.call("SLOWLOG", "LEN") == 2
    finally:
        conn.call("CONFIG", "SET", "slowlog-log-slower-than", "10000", "slowlog-max-len", "128")
    assert conn.call("SLOWLOG", "RESET") == b"OK"
    conn.call("PING")
    assert conn.call("SLOWLOG", "LEN") == 0
    conn.close()


def test_acl_read_only_part(server):
    conn = RawConn(server.port)
    assert conn.call("ACL", "WHOAMI") == b"default"
    assert conn.call("ACL", "USERS") == [b"default"]
    assert conn.call("ACL", "LIST") == [b"user default on nopass sanitize-payload ~* &* +@all"]
    cats = conn.call("ACL", "CAT")
    assert cats[:3] == [b"keyspace", b"read", b"write"] and len(cats) == 21
    connection = conn.call("ACL", "CAT", "connection")
    assert b"ping" in connection and b"client|list" in connection and b"get" not in connection
    assert b"get" in conn.call("ACL", "CAT", "read")
    assert str(conn.call("ACL", "CAT", "nope")) == "ERR Unknown category 'nope'"
    assert len(conn.call("ACL", "GENPASS")) == 64
    assert len(conn.call("ACL", "GENPASS", "10")) == 3
    assert str(conn.call("ACL", "GENPASS", "0")).startswith("ERR ACL GENPASS argument must be")
    assert str(conn.call("ACL", "SETUSER", "x")) == "ERR unknown subcommand 'SETUSER'. Try ACL HELP."
    conn.close()


def test_info_keyspace_avg_ttl(r):
    r.set("a", 1, px=100_000)
    r.set("b", 1, px=200_000)
    r.set("c", 1)
    db0 = r.info("keyspace")["db0"]
    assert (db0["keys"], db0["expires"]) == (3, 2)
    assert 140_000 < db0["avg_ttl"] <= 150_000
