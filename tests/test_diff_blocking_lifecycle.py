"""Blocked XREAD/XREADGROUP/WAIT through client and server lifecycle changes, against Redis 8.2.3.

Review 28's findings, one test each, the same steps played on Redis and on Millrace:
a primary turned replica releases its blocked clients (disconnectAllBlockedClients); a woken
command is re-checked as processCommand checks a new one (READONLY, CLIENT PAUSE); a killed
client's wait ends at once; keys are served in the order they became ready; CLIENT UNBLOCK's
argument-count error. Every wait is for a condition with a deadline; a "no reply" is a short read
timeout on a client that must stay blocked.
"""

from __future__ import annotations

import time

import pytest

from tests.rawclient import RawConn, encode_command
from tests.servers import millrace_and_redis, require_redis, start_millrace, start_redis, wait_for

UNBLOCKED = "UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)"


@pytest.fixture(scope="module")
def servers():
    """{"redis": port, "millrace": port}: one server of each, shared by the single-server tests."""
    procs = millrace_and_redis()
    millrace, redis_ = next(procs)
    try:
        yield {"millrace": millrace.port, "redis": redis_.port}
    finally:
        procs.close()  # stops both


@pytest.fixture(scope="module")
def pairs():
    """{"redis": (a, b), "millrace": (a, b)}: two independent primaries of each kind; the replica
    tests make b follow a (or not) themselves."""
    require_redis()
    procs = []
    try:
        for start in (start_millrace, start_millrace, start_redis, start_redis):
            procs.append(start())
        yield {"millrace": (procs[0].port, procs[1].port), "redis": (procs[2].port, procs[3].port)}
    finally:
        for proc in procs:
            proc.stop()


# -- helpers -------------------------------------------------------------------------


def info_field(conn: RawConn, section: str, field: str) -> str:
    text = conn.call("INFO", section).decode()
    for line in text.splitlines():
        if line.startswith(field + ":"):
            return line.split(":", 1)[1]
    return ""


def blocked_clients(conn: RawConn) -> int:
    return int(info_field(conn, "clients", "blocked_clients"))


def wait_blocked(conn: RawConn, n: int) -> None:
    wait_for(lambda: blocked_clients(conn) == n, what=f"{n} blocked clients")


def outcome(conn: RawConn, timeout: float = 0.5):
    """The next reply, or what happened instead: still waiting, or the link closed."""
    conn.sock.settimeout(timeout)
    try:
        reply = conn.read()
        return ("error", str(reply)) if isinstance(reply, Exception) else reply
    except TimeoutError:
        return "<no reply>"
    except (ConnectionError, OSError):
        return "<closed>"
    finally:
        conn.sock.settimeout(10)


def block_on(port: int, admin: RawConn, *argv, already: int = 0) -> RawConn:
    """A new client that sends argv and is seen blocked (`already` were blocked before)."""
    conn = RawConn(port)
    conn.send(encode_command(*argv))
    wait_blocked(admin, already + 1)
    return conn


def close_all(admin: RawConn, conns) -> None:
    for conn in conns:
        conn.close()
    wait_blocked(admin, 0)


def reset(port: int) -> RawConn:
    admin = RawConn(port)
    admin.call("CLIENT", "UNPAUSE")
    admin.call("FLUSHALL")
    wait_blocked(admin, 0)
    return admin


def link_up(replica: RawConn) -> bool:
    return info_field(replica, "replication", "master_link_status") == "up"


def synced(primary: RawConn, replica: RawConn) -> None:
    offset = int(info_field(primary, "replication", "master_repl_offset"))
    wait_for(lambda: int(info_field(replica, "replication", "slave_repl_offset") or -1) >= offset, what="replica caught up")


def both(fn, *ports):
    """fn played on Redis and on Millrace: (redis result, millrace result)."""
    return fn(*ports[0]), fn(*ports[1])


# -- 1. REPLICAOF host port releases blocked clients ------------------------------------------


def _demote(a_port: int, b_port: int) -> list:
    out = []
    a, b = RawConn(a_port), RawConn(b_port)
    b.call("REPLICAOF", "NO", "ONE")
    a.call("REPLICAOF", "NO", "ONE")
    for conn in (a, b):
        conn.call("CLIENT", "UNPAUSE")
        conn.call("FLUSHALL")
        conn.call("XADD", "s", "1-0", "f", "v")
        conn.call("XGROUP", "CREATE", "s", "g", "$")
    wait_blocked(b, 0)
    group = block_on(b_port, b, "XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">")
    read = block_on(b_port, b, "XREAD", "BLOCK", "0", "STREAMS", "s", "$", already=1)
    wait = block_on(b_port, b, "WAIT", "1", "0", already=2)
    # a client postponed by CLIENT PAUSE WRITE is not released: its XADD runs when the pause ends
    out.append(("pause", b.call("CLIENT", "PAUSE", "100000", "WRITE")))
    held = block_on(b_port, b, "XADD", "s", "3-0", "h", "h", already=3)
    # what the blocked clients sent behind their command never runs
    for conn in (group, read, wait):
        conn.send(encode_command("PING"))
    out.append(("replicaof", b.call("REPLICAOF", "127.0.0.1", str(a_port))))
    out.append(("xreadgroup waiter", outcome(group, 2), outcome(group, 2)))
    out.append(("xread waiter", outcome(read, 2), outcome(read, 2)))
    out.append(("wait waiter", outcome(wait, 2), outcome(wait, 2)))
    out.append(("blocked left (the postponed one)", blocked_clients(b)))
    out.append(("unpause", b.call("CLIENT", "UNPAUSE")))
    out.append(("postponed xadd on the replica", outcome(held, 5)))
    wait_for(lambda: link_up(b), what="link up")
    out.append(("primary xadd", a.call("XADD", "s", "2-0", "x", "y")))
    synced(a, b)
    out.append(("primary xpending", a.call("XPENDING", "s", "g")))
    out.append(("replica xpending", b.call("XPENDING", "s", "g")))
    out.append(("replica blocked_clients", blocked_clients(b)))
    out.append(("errorstat", info_field(b, "errorstats", "errorstat_UNBLOCKED")))
    held.close()
    b.call("REPLICAOF", "NO", "ONE")
    return out


def test_replicaof_releases_blocked_clients_and_closes_them(pairs):
    redis_out, millrace_out = both(_demote, pairs["redis"], pairs["millrace"])
    assert ("xreadgroup waiter", ("error", UNBLOCKED), "<closed>") in redis_out  # the oracle as the review saw it
    assert millrace_out == redis_out


# -- 2. a woken XREADGROUP on a replica turned read-only -----------------------------------------


def _read_only_toggle(a_port: int, b_port: int) -> list:
    out = []
    a, b = RawConn(a_port), RawConn(b_port)
    a.call("REPLICAOF", "NO", "ONE")
    a.call("FLUSHALL")
    b.call("CLIENT", "UNPAUSE")
    b.call("REPLICAOF", "127.0.0.1", str(a_port))
    wait_for(lambda: link_up(b), what="link up")
    a.call("XADD", "s", "1-0", "f", "v")
    a.call("XGROUP", "CREATE", "s", "g", "$")
    synced(a, b)
    b.call("CONFIG", "SET", "replica-read-only", "no")
    b.call("CONFIG", "RESETSTAT")
    waiter = block_on(b_port, b, "XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">")
    out.append(("read-only again", b.call("CONFIG", "SET", "replica-read-only", "yes")))
    out.append(("primary xadd", a.call("XADD", "s", "2-0", "x", "y")))
    synced(a, b)
    out.append(("waiter", outcome(waiter, 5)))
    out.append(("waiter goes on", waiter.call("PING")))
    out.append(("replica xpending", b.call("XPENDING", "s", "g")))
    out.append(("primary xpending", a.call("XPENDING", "s", "g")))
    out.append(("blocked_clients", blocked_clients(b)))
    out.append(("errorstat", info_field(b, "errorstats", "errorstat_READONLY")))
    stat = info_field(b, "commandstats", "cmdstat_xreadgroup")
    out.append(("xreadgroup stats", [part for part in stat.split(",") if not part.startswith("usec")]))
    waiter.close()
    b.call("CONFIG", "SET", "replica-read-only", "yes")
    b.call("REPLICAOF", "NO", "ONE")
    return out


def test_woken_xreadgroup_on_a_replica_turned_read_only_is_refused(pairs):
    redis_out, millrace_out = both(_read_only_toggle, pairs["redis"], pairs["millrace"])
    assert ("waiter", ("error", "READONLY You can't write against a read only replica.")) in redis_out
    assert millrace_out == redis_out


# -- 3. CLIENT KILL of a blocked client, then XADD in the same pipeline or EXEC ---------------------


def _kill_then_xadd(port: int, mode: str) -> list:
    out = []
    admin = reset(port)
    admin.call("XADD", "s", "1-0", "f", "v")
    admin.call("XGROUP", "CREATE", "s", "g", "$")
    killed = RawConn(port)
    cid = killed.call("CLIENT", "ID")
    killed.send(encode_command("XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">"))
    wait_blocked(admin, 1)
    live = block_on(port, admin, "XREADGROUP", "GROUP", "g", "d", "BLOCK", "0", "STREAMS", "s", ">", already=1)
    kill, xadd = encode_command("CLIENT", "KILL", "ID", str(cid)), encode_command("XADD", "s", "2-0", "a", "b")
    if mode == "exec":
        admin.send(encode_command("MULTI") + kill + xadd + encode_command("EXEC"))
        out.append(("exec", [admin.read() for _ in range(4)]))
    else:
        admin.send(kill + xadd)
        out.append(("pipeline", [admin.read() for _ in range(2)]))
    out.append(("killed client", outcome(killed, 2)))
    out.append(("live waiter", outcome(live, 2)))
    out.append(("xpending", admin.call("XPENDING", "s", "g")))
    out.append(("blocked_clients", blocked_clients(admin)))
    close_all(admin, [killed, live])
    return out


@pytest.mark.parametrize("mode", ["pipeline", "exec"])
def test_killed_blocked_client_is_not_served_by_a_following_write(servers, mode):
    redis_out = _kill_then_xadd(servers["redis"], mode)
    millrace_out = _kill_then_xadd(servers["millrace"], mode)
    assert ("xpending", [1, b"2-0", b"2-0", [[b"d", b"1"]]]) in redis_out
    assert millrace_out == redis_out


# -- 4. readers on different keys: the keys in the order they became ready ---------------------------

# Pairs of keys: A_i blocks on the first, B_i then on both (the second first). The EXEC writes the
# first key of each pair before the second, so A_i gets its key's entry and B_i only the second's.
# A set of ready keys gets each pair's order right by chance only (about one run in 2**8 for all).
PAIRS = [(b"p%d-first" % i, b"p%d-second" % i) for i in range(8)]


def _cross_key_order(port: int) -> list:
    out = []
    admin = reset(port)
    conns, waiting = [], 0
    for first, second in PAIRS:
        for key in (first, second):
            admin.call("XGROUP", "CREATE", key, "g", "$", "MKSTREAM")
    for i, (first, second) in enumerate(PAIRS):
        conns.append(block_on(port, admin, "XREADGROUP", "GROUP", "g", f"A{i}", "BLOCK", "0", "STREAMS", first, ">", already=waiting))
        waiting += 1
        conns.append(block_on(port, admin, "XREADGROUP", "GROUP", "g", f"B{i}", "BLOCK", "0", "STREAMS", second, first, ">", ">", already=waiting))
        waiting += 1
    body = [encode_command("MULTI")]
    for first, second in PAIRS:
        body += [encode_command("XADD", first, "2-0", "a", "1"), encode_command("XADD", second, "2-0", "b", "2")]
    admin.send(b"".join(body) + encode_command("EXEC"))
    for _ in range(len(body) + 1):
        admin.read()
    out += [outcome(conn, 0.3 if i % 2 == 0 else 2) for i, conn in enumerate(conns)]
    out.append(("blocked_clients", blocked_clients(admin)))
    close_all(admin, conns)
    return out


def test_keys_are_served_in_the_order_they_became_ready(servers):
    redis_out = _cross_key_order(servers["redis"])
    millrace_out = _cross_key_order(servers["millrace"])
    assert redis_out[0] == [[b"p0-first", [[b"2-0", [b"a", b"1"]]]]]
    assert millrace_out == redis_out


# -- 5. an EXEC that wakes a write block and starts CLIENT PAUSE -----------------------------------


def _pause_in_exec(port: int, mode: str) -> list:
    """Under PAUSE WRITE the admin looks during the pause and ends it; PAUSE ALL holds the admin's
    commands too, so that pause is short and everything is read once it has run out."""
    out = []
    admin = reset(port)
    admin.call("XADD", "s", "1-0", "f", "v")
    admin.call("XGROUP", "CREATE", "s", "g", "$")
    group = block_on(port, admin, "XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">")
    read = block_on(port, admin, "XREAD", "BLOCK", "0", "STREAMS", "s", "$", already=1)
    pause_ms = "100000" if mode == "WRITE" else "1000"
    admin.send(b"".join(encode_command(*argv) for argv in (
        ["MULTI"], ["XADD", "s", "2-0", "a", "b"], ["CLIENT", "PAUSE", pause_ms, mode], ["EXEC"])))
    out.append(("exec", [admin.read() for _ in range(4)]))
    paused_at = time.monotonic()
    out.append(("xreadgroup during pause", outcome(group, 0.3)))
    if mode == "WRITE":
        out.append(("xread during pause", outcome(read, 2)))
        out.append(("blocked_clients", blocked_clients(admin)))
        out.append(("total_blocking_keys", info_field(admin, "clients", "total_blocking_keys")))
        out.append(("xpending during pause", admin.call("XPENDING", "s", "g")))
        out.append(("unpause", admin.call("CLIENT", "UNPAUSE")))
    else:
        out.append(("xread during pause", outcome(read, 0.3)))
        time.sleep(max(0.0, 1.2 - (time.monotonic() - paused_at)))
    out.append(("xreadgroup after", outcome(group, 2)))
    if mode == "ALL":  # postponed, its `$` standing for the ID it meant when it blocked
        out.append(("xread after", outcome(read, 2)))
    out.append(("xpending after", admin.call("XPENDING", "s", "g")))
    close_all(admin, [group, read])
    return out


@pytest.mark.parametrize("mode", ["WRITE", "ALL"])
def test_woken_command_is_held_by_a_pause_the_exec_started(servers, mode):
    redis_out = _pause_in_exec(servers["redis"], mode)
    millrace_out = _pause_in_exec(servers["millrace"], mode)
    assert ("xreadgroup during pause", "<no reply>") in redis_out
    assert millrace_out == redis_out


# -- 6. CLIENT UNBLOCK's argument count ----------------------------------------------------------------


def _unblock_syntax(port: int) -> list:
    admin = reset(port)
    return [
        admin.call("CLIENT", "UNBLOCK", "1", "TIMEOUT", "x"),
        admin.call("client", "unblock", "1", "ERROR", "x", "y"),
        admin.call("CLIENT", "UNBLOCK", "1", "TIMEOUT"),
    ]


def test_client_unblock_with_too_many_arguments(servers):
    redis_out = [str(r) for r in _unblock_syntax(servers["redis"])]
    millrace_out = [str(r) for r in _unblock_syntax(servers["millrace"])]
    assert redis_out[0] == "ERR unknown subcommand or wrong number of arguments for 'UNBLOCK'. Try CLIENT HELP."
    assert millrace_out == redis_out
