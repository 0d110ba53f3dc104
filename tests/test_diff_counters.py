"""Differential: INFO's counters, CLIENT LIST's totals and COMMAND lookups after the same steps, Redis vs Millrace.

Each test drives Redis 8.2.3 and Millrace alike over raw connections (so
both receive the same bytes) and compares what INFO and CLIENT LIST count:
when a blocked command is counted (when it ends, not when it blocks), what
an AOF replay counts (nothing but its changes), what CONFIG RESETSTAT zeroes,
what a refused connection costs, forks, reads and each client's totals.
"""

from __future__ import annotations

import re
import signal
import socket
import time

import pytest

from tests.rawclient import RawConn, encode_command
from tests.servers import ServerProcess, free_port, millrace_and_redis, redis_server_path, require_redis, start_millrace


@pytest.fixture(scope="module")
def pair():
    yield from millrace_and_redis()


def info(conn: RawConn, *sections: str) -> dict[str, str]:
    text = conn.call("INFO", *sections).decode()
    return dict(line.split(":", 1) for line in text.split("\r\n") if line and not line.startswith("#"))


def calls(conn: RawConn, *names: str) -> dict[str, str]:
    """cmdstat lines of `names` without their timings: calls, rejected_calls, failed_calls."""
    stats = info(conn, "commandstats")
    return {name: re.sub(r"usec=\d+,usec_per_call=[\d.]+,", "", stats[f"cmdstat_{name}"]) for name in names if f"cmdstat_{name}" in stats}


def wait_for(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)


def blocked_count(conn: RawConn) -> int:
    return int(info(conn, "clients")["blocked_clients"])


def blocking_story(port: int) -> list:
    """XREAD BLOCK served, abandoned and unblocked with an error: commandstats, the slowlog and totals at each step."""
    admin = RawConn(port)
    admin.call("DEL", "s")
    admin.call("CONFIG", "SET", "slowlog-log-slower-than", "0")
    admin.call("SLOWLOG", "RESET")
    admin.call("CONFIG", "RESETSTAT")
    seen = []
    reader = RawConn(port)
    reader.send(encode_command("XREAD", "BLOCK", "0", "STREAMS", "s", "$"))
    wait_for(lambda: blocked_count(admin) == 1)
    now = info(admin, "stats", "commandstats")  # the polls above are INFOs: the rest counts the same in both
    infos = int(re.match(r"calls=(\d+)", now["cmdstat_info"]).group(1))
    seen.append(("blocked", calls(admin, "xread"), int(now["total_commands_processed"]) - infos))
    admin.call("XADD", "s", "1-1", "f", "v")
    assert reader.read() == [[b"s", [[b"1-1", [b"f", b"v"]]]]]
    seen.append(("served", calls(admin, "xread", "xadd")))
    gone = RawConn(port)
    gone.send(encode_command("XREAD", "BLOCK", "0", "STREAMS", "s", "$"))
    wait_for(lambda: blocked_count(admin) == 1)
    gone.close()
    wait_for(lambda: blocked_count(admin) == 0)
    seen.append(("abandoned", calls(admin, "xread")))
    victim = RawConn(port)
    victim_id = victim.call("CLIENT", "ID")
    victim.send(encode_command("XREAD", "BLOCK", "0", "STREAMS", "s", "$"))
    wait_for(lambda: blocked_count(admin) == 1)
    assert admin.call("CLIENT", "UNBLOCK", victim_id, "ERROR") == 1
    assert str(victim.read()) == "UNBLOCKED client unblocked via CLIENT UNBLOCK"
    seen.append(("unblocked", calls(admin, "xread", "client|unblock")))
    log = admin.call("SLOWLOG", "GET", "-1")
    seen.append(("slowlog", [entry[3][0].upper() for entry in reversed(log) if entry[3][0].upper() in (b"XADD", b"XREAD")]))
    admin.call("CONFIG", "SET", "slowlog-log-slower-than", "10000")
    for conn in (admin, reader, victim):
        conn.close()
    return seen


def test_a_blocked_command_counts_when_its_wait_ends(pair):
    """Not when it blocks: a served wait counts once (and is slow-logged then), an abandoned one never,
    CLIENT UNBLOCK ... ERROR fails both the waiter's command and CLIENT UNBLOCK itself (Redis 8.2.3)."""
    millrace, redis = pair
    assert blocking_story(millrace.port) == blocking_story(redis.port)


def totals(port: int) -> dict[str, str]:
    """A fresh connection's CLIENT INFO totals after a fixed exchange."""
    conn = RawConn(port)
    conn.call("SET", "k", "v")
    conn.call("GET", "k")
    conn.call("PING")
    conn.call("ECHO", "x" * 100)
    fields = dict(item.split("=", 1) for item in conn.call("CLIENT", "INFO").decode().split())
    conn.close()
    return {name: fields.get(name) for name in ("io-thread", "tot-net-in", "tot-net-out", "tot-cmds")}


def test_client_info_counts_a_connections_bytes_and_commands(pair):
    """Redis 8's io-thread, tot-net-in (this command's bytes included), tot-net-out and tot-cmds (not yet this one)."""
    millrace, redis = pair
    ours, theirs = totals(millrace.port), totals(redis.port)
    assert ours == theirs
    assert theirs["tot-cmds"] == "4"


def client_fields(port: int) -> list[str]:
    conn = RawConn(port)
    names = [item.split("=", 1)[0] for item in conn.call("CLIENT", "INFO").decode().split()]
    conn.close()
    return names


def test_client_info_has_redis_8s_fields_in_order(pair):
    millrace, redis = pair
    assert client_fields(millrace.port) == client_fields(redis.port)


def unknown_subcommand_cmd(port: int) -> list[str]:
    """CLIENT LIST's cmd= of a client whose last command was an unknown subcommand, or a bare container."""
    probe, watcher = RawConn(port), RawConn(port)
    probe_id = probe.call("CLIENT", "ID")
    shown = []
    for argv in (("CONFIG", "NOSUCH"), ("XINFO", "NOPE", "k"), ("CONFIG",), ("CONFIG", "GET", "port")):
        probe.call(*argv)
        line = watcher.call("CLIENT", "LIST", "ID", probe_id).decode()
        shown.append(re.search(r" cmd=(\S+) ", line).group(1))
    probe.close()
    watcher.close()
    return shown


def test_client_list_names_no_command_for_an_unknown_subcommand(pair):
    millrace, redis = pair
    assert unknown_subcommand_cmd(millrace.port) == unknown_subcommand_cmd(redis.port) == ["NULL", "NULL", "config", "config|get"]


def unsent_replies(port: int) -> dict[str, str]:
    """A subscriber that stopped reading while 6 MB was published to it: how CLIENT LIST shows what waits."""
    sub = RawConn(port)
    sub.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sub_id = sub.call("CLIENT", "ID")
    sub.call("SUBSCRIBE", "news")
    pub = RawConn(port)
    for _ in range(60):  # 6 MB: more than the kernel's buffers take, less than the pubsub soft limit
        pub.call("PUBLISH", "news", "x" * 100_000)
    line = pub.call("CLIENT", "LIST", "ID", sub_id).decode()
    fields = dict(item.split("=", 1) for item in line.split())
    sub.close()
    pub.close()
    return fields


def test_unsent_replies_show_as_redis_keeps_them(pair):
    """Beyond the 16 KB reply buffer (obl: what it held when last written) replies wait in a list (oll
    blocks, omem bytes), and the client is watched for writing (events=rw)."""
    for port in (server.port for server in pair):
        fields = unsent_replies(port)
        assert 0 <= int(fields["obl"]) <= 16384 and fields["events"] == "rw", fields
        assert int(fields["oll"]) > 0 and int(fields["omem"]) > 1_000_000, fields


def reset_story(port: int) -> list:
    conn = RawConn(port)
    conn.call("SET", "k", "v")
    conn.call("GET", "k")
    conn.call("SAVE")
    assert conn.call("BGREWRITEAOF").startswith(b"Background")
    wait_for(lambda: info(conn, "persistence")["aof_rewrite_in_progress"] == "0")
    names = ("total_net_input_bytes", "total_net_output_bytes", "rdb_saves", "aof_rewrites", "total_forks", "total_commands_processed")
    before = info(conn, "everything")
    assert before["total_forks"] == "1" and before["aof_rewrites"] == "1" and before["rdb_saves"] == "1"
    assert int(before["latest_fork_usec"]) > 0
    conn.call("CONFIG", "RESETSTAT")
    after = info(conn, "everything")
    conn.close()
    return [(name, after[name]) for name in names] + [("latest_fork_usec", after["latest_fork_usec"])]


def test_config_resetstat_zeroes_what_redis_zeroes(pair):
    """Network bytes (the INFO after it counts its own), saves, rewrites and forks (Redis's resetServerStats)."""
    millrace, redis = pair
    assert reset_story(millrace.port) == reset_story(redis.port)


def refused_story(port: int) -> list:
    admin = RawConn(port)
    admin.call("CONFIG", "SET", "maxclients", "3")
    try:
        admin.call("CONFIG", "RESETSTAT")
        first = admin.call("CLIENT", "ID")
        conns = [RawConn(port) for _ in range(4)]
        replies = [str(conn.call("PING")) for conn in conns]  # an error reply comes back as a value
        for conn in conns:
            conn.close()
        wait_for(lambda: int(info(admin, "clients")["connected_clients"]) == 1)
    finally:
        admin.call("CONFIG", "SET", "maxclients", "10000")
    later = RawConn(port)
    gap = later.call("CLIENT", "ID") - first
    later.close()
    stats = info(admin, "stats")
    admin.close()
    return [replies, gap, stats["total_connections_received"], stats["rejected_connections"]]


def test_a_connection_refused_by_maxclients_is_no_client(pair):
    """Not counted in total_connections_received and given no ID (only rejected_connections counts it)."""
    millrace, redis = pair
    ours, theirs = refused_story(millrace.port), refused_story(redis.port)
    assert ours == theirs
    assert theirs[2:] == ["3", "2"]


def reads_story(port: int) -> int:
    admin = RawConn(port)
    before = int(info(admin, "stats")["total_reads_processed"])
    pinger = RawConn(port)
    pinger.call("PING")
    pinger.close()
    silent = RawConn(port)
    silent.close()
    time.sleep(0.5)  # not polled: each INFO would count a read
    assert info(admin, "clients")["connected_clients"] == "1"
    after = int(info(admin, "stats")["total_reads_processed"])
    admin.close()
    return after - before - 1  # the INFO that reads connected_clients


def test_a_read_that_sees_the_peer_close_counts(pair):
    millrace, redis = pair
    ours, theirs = reads_story(millrace.port), reads_story(redis.port)
    assert ours == theirs


def nokey_story(port: int) -> list:
    admin = RawConn(port)
    admin.call("DEL", "g1", "g2", "x1")
    admin.call("XGROUP", "CREATE", "g1", "g", "$", "MKSTREAM")
    admin.call("XGROUP", "CREATE", "g2", "g", "$", "MKSTREAM")
    waiters = [RawConn(port) for _ in range(4)]
    waiters[0].send(encode_command("XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "g1", ">"))
    waiters[1].send(encode_command("XREADGROUP", "GROUP", "g", "d", "BLOCK", "0", "STREAMS", "g1", "g2", ">", ">"))
    waiters[2].send(encode_command("XREAD", "BLOCK", "0", "STREAMS", "x1", "$"))
    waiters[3].send(encode_command("XREAD", "BLOCK", "0", "STREAMS", "g1", "$"))
    wait_for(lambda: blocked_count(admin) == 4)
    fields = info(admin, "clients")
    for conn in waiters:
        conn.close()
    wait_for(lambda: blocked_count(admin) == 0)
    admin.close()
    return [fields["total_blocking_keys"], fields["total_blocking_keys_on_nokey"]]


def test_total_blocking_keys_on_nokey_counts_the_keys_xreadgroup_waits_on(pair):
    millrace, redis = pair
    assert nokey_story(millrace.port) == nokey_story(redis.port) == ["3", "2"]


@pytest.mark.parametrize("name", ["get|", "xinfo|", "xgroup|", "xinfo|stream", "XINFO|STREAM", "get|x"])
def test_command_info_and_docs_of_a_name_with_a_bar(pair, name):
    """`get|` is no command (a trailing bar names an empty subcommand), `xinfo|stream` is one."""
    millrace, redis = pair
    for subcommand in ("INFO", "DOCS"):
        ours, theirs = RawConn(millrace.port), RawConn(redis.port)
        assert ours.call("COMMAND", subcommand, name) == theirs.call("COMMAND", subcommand, name)
        ours.close()
        theirs.close()


def listener(port: int) -> str:
    conn = RawConn(port)
    conn.call("CONFIG", "SET", "bind", "127.0.0.1 -::1")
    line = info(conn, "server")["listener0"]
    conn.close()
    return line.replace(f"port={port}", "port=P")


def test_listener0_names_each_bind_address(pair):
    millrace, redis = pair
    assert listener(millrace.port) == listener(redis.port) == "name=tcp,bind=127.0.0.1,bind=-::1,port=P"


# Fields Millrace adds to INFO (its own features), and what Redis 8.2.3 shows that Millrace leaves out on
# purpose: the vectorset module Redis loads by itself, and the keysizes histograms (README, "INFO").
MILLRACE_ONLY = re.compile(r"millrace_version|python_version|stream_retention_\w+|stream_release_\w+")
REDIS_ONLY = re.compile(r"module")


def layout(port: int, only: re.Pattern) -> list[tuple[str, list[str]]]:
    """INFO everything as (section, field names), the other server's extras left out."""
    conn = RawConn(port)
    text = conn.call("INFO", "everything").decode()
    conn.close()
    sections = []
    for block in text.strip().split("\r\n\r\n"):
        title, *lines = block.split("\r\n")
        if title == "# Keysizes":
            continue
        names = [line.split(":", 1)[0] for line in lines if line]
        sections.append((title, [name for name in names if not only.fullmatch(name)]))
    return sections


def test_info_everything_has_redis_8s_sections_and_fields(pair):
    millrace, redis = pair
    ours, theirs = layout(millrace.port, MILLRACE_ONLY), layout(redis.port, REDIS_ONLY)
    assert [title for title, _ in ours] == [title for title, _ in theirs]
    for (title, got), (_, want) in zip(ours, theirs, strict=True):
        if title in ("# Commandstats", "# Errorstats", "# Latencystats", "# Keyspace"):
            continue  # one line per command, error or database: their values are compared elsewhere
        assert got == want, title


def start_redis_in(workdir: str, port: int, *args: str) -> ServerProcess:
    argv = [redis_server_path(), "--port", str(port), "--bind", "127.0.0.1", "--dir", workdir, *args]
    return ServerProcess(argv, port, workdir, "redis")


def replay_story(start) -> list:
    """Writes under appendfsync always, kill -9, restart: what the replay left in INFO."""
    proc = start()
    conn = RawConn(proc.port)
    for argv in (("XADD", "s", "1-1", "f", "v"), ("XADD", "s", "2-1", "f", "v"), ("SET", "k", "v"), ("INCR", "n"), ("XDEL", "s", "1-1")):
        conn.call(*argv)
    conn.close()
    proc.proc.send_signal(signal.SIGKILL)
    proc.proc.wait()
    proc.log.close()
    proc = start()
    try:
        conn = RawConn(proc.port)
        stats = info(conn, "everything")
        counted = {name: stats[name] for name in stats if name.startswith("cmdstat_")}
        conn.close()
        # the start-up probe may retry while the AOF loads (Redis answers its PING with LOADING), so how
        # many commands it sent varies; what must hold is that nothing but the probe's commands is counted
        called = sum(int(re.search(r"calls=(\d+)", fields).group(1)) for fields in counted.values())
        assert int(stats["total_commands_processed"]) == called
        return [stats["rdb_changes_since_last_save"], sorted(counted)]
    finally:
        proc.stop()


def test_an_aof_replay_counts_its_changes_but_no_commands(tmp_path):
    """Redis replays with command stats off (nothing in commandstats or total_commands_processed) but keeps the
    replayed changes in rdb_changes_since_last_save, which its save points then see."""
    require_redis()
    args = ("--appendonly", "yes", "--appendfsync", "always", "--save", "")
    (tmp_path / "m").mkdir()
    (tmp_path / "r").mkdir()
    ours_port, theirs_port = free_port(), free_port()
    ours = replay_story(lambda: start_millrace(*args, workdir=str(tmp_path / "m"), port=ours_port))
    theirs = replay_story(lambda: start_redis_in(str(tmp_path / "r"), theirs_port, *args))
    assert ours == theirs
    # the only commands counted are the start-up probe's (redis-py's HELLO, CLIENT SETINFO x2, PING)
    assert theirs == ["5", ["cmdstat_client|setinfo", "cmdstat_hello", "cmdstat_ping"]]
