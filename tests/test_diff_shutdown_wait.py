"""SHUTDOWN waits for lagging replicas (shutdown-timeout, Redis 7), against Redis 8.2.3: the same steps
on a Redis pair and a Millrace pair.

A replica is made to lag by freezing it (SIGSTOP) before a write: it ACKs nothing until resumed.
Every wait is for a condition with a generous deadline, never a fixed sleep, except where a test
shows that something does *not* happen (a held write, a primary still up), which it checks for a
short while.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time

import pytest

from tests.rawclient import RawConn, encode_command
from tests.servers import require_redis, start_millrace, start_redis, wait_for

KINDS = ("redis", "millrace")


def start_pair(kind: str, *primary_args: str):
    """(primary, replica) with the link up."""
    if kind == "redis":
        primary = start_redis("--repl-diskless-sync-delay", "0", *primary_args)
        replica = start_redis("--replicaof", "127.0.0.1", str(primary.port))
    else:
        primary = start_millrace(*primary_args)
        replica = start_millrace("--replicaof", "127.0.0.1", str(primary.port))
    wait_for(lambda: "online" in str(primary.client().info("replication").get("slave0", "")), what=f"{kind} link up")
    return primary, replica


@contextlib.contextmanager
def pair(kind: str, *primary_args: str):
    primary, replica = start_pair(kind, *primary_args)
    try:
        yield primary, replica
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(replica.proc.pid, signal.SIGCONT)
        replica.stop()
        primary.stop()


def freeze(server) -> None:
    os.kill(server.proc.pid, signal.SIGSTOP)


def thaw(server) -> None:
    os.kill(server.proc.pid, signal.SIGCONT)


def shutdown_ms(server):
    return server.client().info("server").get("shutdown_in_milliseconds")


def no_reply_for(conn: RawConn, seconds: float) -> bool:
    """Nothing arrives on conn for `seconds` (the command is held)."""
    conn.sock.settimeout(seconds)
    try:
        conn.sock.recv(1, socket.MSG_PEEK)
    except TimeoutError:
        return True
    finally:
        conn.sock.settimeout(30)
    return False


def still_running(server, seconds: float) -> bool:
    try:
        server.proc.wait(seconds)
    except Exception:
        return True
    return False


def aborted_story(kind: str) -> list:
    """SHUTDOWN with a lagging replica waits, writes held and reads served; CLIENT UNPAUSE does not
    release the writes; SHUTDOWN ABORT answers the waiting caller with the error and lets writes go."""
    with pair(kind, "--shutdown-timeout", "60", "--save", "") as (primary, replica):
        out = []
        admin = primary.client()
        freeze(replica)
        admin.set("k", "v")
        before = admin.info("replication")["master_repl_offset"]
        caller = RawConn(primary.port)
        caller.send(encode_command("SHUTDOWN"))
        remaining = wait_for(lambda: shutdown_ms(primary), what="shutdown under way")
        out.append(("a GETACK went to the replicas", admin.info("replication")["master_repl_offset"] - before))
        out.append(("remaining within the timeout", 0 < int(remaining) <= 60000))
        out.append(("info keys around it", _neighbours(admin.info("server"), "shutdown_in_milliseconds")))
        out.append(("caller waits", no_reply_for(caller, 0.3)))
        out.append(("read", admin.get("k")))
        writer = RawConn(primary.port)
        writer.send(encode_command("SET", "k2", "v2"))
        out.append(("write held", no_reply_for(writer, 0.3)))
        out.append(("client unpause", admin.execute_command("CLIENT", "UNPAUSE")))
        out.append(("write still held", no_reply_for(writer, 0.3)))
        out.append(("blocked_clients", admin.info("clients")["blocked_clients"]))
        out.append(("client pause all", admin.execute_command("CLIENT", "PAUSE", "700", "ALL")))
        reader = RawConn(primary.port)
        reader.send(encode_command("GET", "k"))
        out.append(("read held by the pause", no_reply_for(reader, 0.2)))
        out.append(("read answered once it ends", reader.read()))  # (everything is held meanwhile, CLIENT UNPAUSE too)
        out.append(("write held yet", no_reply_for(writer, 0.3)))
        out.append(("second SHUTDOWN NOW waits too", _second_shutdown_waits(primary)))
        out.append(("abort", admin.execute_command("SHUTDOWN", "ABORT")))
        out.append(("caller's reply", str(caller.read())))
        out.append(("write's reply", writer.read()))
        out.append(("no shutdown under way", shutdown_ms(primary)))
        out.append(("abort again", str(RawConn(primary.port).call("SHUTDOWN", "ABORT"))))
        out.append(("write after", admin.set("k3", "v3")))
        thaw(replica)
        out.append(("primary up", admin.ping()))
        return out


def failover_story(kind: str) -> list:
    """FAILOVER's write pause is its own: CLIENT UNPAUSE leaves it, FAILOVER ABORT ends it."""
    with pair(kind, "--save", "") as (primary, replica):
        admin = primary.client()
        freeze(replica)
        admin.set("k", "v")
        out = [("failover", admin.execute_command("FAILOVER", "TO", "127.0.0.1", str(replica.port), "TIMEOUT", "60000"))]
        writer = RawConn(primary.port)
        writer.send(encode_command("SET", "k2", "v2"))
        out.append(("write held", no_reply_for(writer, 0.3)))
        out.append(("client unpause", admin.execute_command("CLIENT", "UNPAUSE")))
        out.append(("write still held", no_reply_for(writer, 0.3)))
        out.append(("abort", admin.execute_command("FAILOVER", "ABORT")))
        out.append(("write's reply", writer.read()))
        thaw(replica)
        return out


def test_client_unpause_leaves_a_failovers_pause():
    require_redis()
    stories = {kind: failover_story(kind) for kind in KINDS}
    assert stories["millrace"] == stories["redis"]
    assert dict(stories["millrace"])["write still held"] is True


def _second_shutdown_waits(primary) -> bool:
    """A second SHUTDOWN (even NOW) while one waits joins the wait (Redis's prepareForShutdown returns at once)."""
    second = RawConn(primary.port)
    second.send(encode_command("SHUTDOWN", "NOW"))
    held = no_reply_for(second, 0.3)
    second.sock.close()
    return held


def _neighbours(fields: dict, name: str) -> tuple:
    keys = list(fields)
    i = keys.index(name)
    return keys[i - 1], keys[i + 1] if i + 1 < len(keys) else None


def test_abort_answers_the_waiting_caller_and_releases_writes():
    require_redis()
    stories = {kind: aborted_story(kind) for kind in KINDS}
    assert stories["millrace"] == stories["redis"]
    assert dict(stories["millrace"])["write held"] is True
    assert dict(stories["millrace"])["caller's reply"] == "ERR Errors trying to SHUTDOWN. Check logs."


def timeout_story(kind: str) -> list:
    """The wait ends after shutdown-timeout: the primary exits though the replica never caught up."""
    with pair(kind, "--shutdown-timeout", "1", "--save", "") as (primary, replica):
        freeze(replica)
        primary.client().set("k", "v")
        started = time.monotonic()
        caller = RawConn(primary.port)
        caller.send(encode_command("SHUTDOWN"))
        up_a_while = still_running(primary, 0.5)
        primary.proc.wait(15)
        took = time.monotonic() - started
        thaw(replica)
        text = primary.read_log()
        return [
            ("still up at first", up_a_while),
            ("exited after the timeout", 0.9 <= took < 10),
            ("lagging logged", "Lagging replica" in text and "behind master" in text),
            ("none in sync", "0 of 1 replicas are in sync when shutting down." in text),
            ("waited logged", "Waiting for replicas before shutting down." in text),
        ]


def test_the_wait_ends_at_shutdown_timeout():
    require_redis()
    stories = {kind: timeout_story(kind) for kind in KINDS}
    assert stories["millrace"] == stories["redis"]
    assert all(ok for _name, ok in stories["millrace"])


def caught_up_story(kind: str) -> list:
    """SIGTERM with a lagging replica: the primary waits, the replica catches up once resumed, the
    primary then exits at once, and the replica has every write the primary acknowledged."""
    with pair(kind, "--save", "") as (primary, replica):
        client = primary.client()
        freeze(replica)
        pipe = client.pipeline(transaction=False)
        for i in range(2000):
            pipe.xadd("s", {"n": str(i)})
        ids = pipe.execute()
        primary.proc.send_signal(signal.SIGTERM)
        wait_for(lambda: shutdown_ms(primary), what="shutdown under way")
        up = still_running(primary, 0.3)
        thaw(replica)
        started = time.monotonic()
        primary.proc.wait(15)
        took = time.monotonic() - started
        rows = replica.client().xrange("s")
        text = primary.read_log()
        return [
            ("waited", up),
            ("exited once caught up", took < 5),
            ("replica has every write", [entry_id.decode() for entry_id, _f in rows] == [i.decode() for i in ids]),
            ("in sync logged", "1 of 1 replicas are in sync when shutting down." in text),
        ]


def test_a_resumed_replica_gets_everything_before_the_primary_exits():
    require_redis()
    stories = {kind: caught_up_story(kind) for kind in KINDS}
    assert stories["millrace"] == stories["redis"]
    assert all(ok for _name, ok in stories["millrace"])


@pytest.mark.parametrize("how", ["now", "timeout-0"])
def test_now_or_no_timeout_exits_at_once(how):
    require_redis()
    found = {}
    for kind in KINDS:
        args = ("--shutdown-timeout", "0") if how == "timeout-0" else ()
        with pair(kind, "--save", "", *args) as (primary, replica):
            freeze(replica)
            primary.client().set("k", "v")
            caller = RawConn(primary.port)
            caller.send(encode_command("SHUTDOWN", *(["NOW"] if how == "now" else [])))
            started = time.monotonic()
            primary.proc.wait(15)
            thaw(replica)
            found[kind] = (time.monotonic() - started < 0.8, "Waiting for replicas" in primary.read_log())
    assert found["millrace"] == found["redis"] == (True, False)


def test_a_second_sigint_exits_at_once():
    require_redis()
    found = {}
    for kind in KINDS:
        with pair(kind, "--save", "", "--shutdown-timeout", "60") as (primary, replica):
            freeze(replica)
            primary.client().set("k", "v")
            primary.proc.send_signal(signal.SIGINT)
            wait_for(lambda p=primary: shutdown_ms(p), what="shutdown under way")
            primary.proc.send_signal(signal.SIGINT)
            code = primary.proc.wait(15)
            thaw(replica)
            found[kind] = (code, "You insist... exiting now." in primary.read_log())
    assert found["millrace"] == found["redis"] == (1, True)


def failed_save_story(kind: str) -> list:
    """The wait ends (the replica caught up) but the final save fails: the shutdown is cancelled, the
    waiting caller gets the error, writes go on and the primary stays up."""
    with pair(kind, "--save", "3600 1", "--dbfilename", "dump.x") as (primary, replica):
        admin = primary.client()
        blocker = os.path.join(primary.dir, "dump.x")
        os.mkdir(blocker)  # a directory where the snapshot goes: the save fails
        try:
            freeze(replica)
            admin.set("k", "v")
            caller = RawConn(primary.port)
            caller.send(encode_command("SHUTDOWN"))
            wait_for(lambda: shutdown_ms(primary), what="shutdown under way")
            writer = RawConn(primary.port)
            writer.send(encode_command("SET", "k2", "v2"))
            held = no_reply_for(writer, 0.2)
            thaw(replica)
            return [
                ("write held", held),
                ("caller's reply", str(caller.read())),
                ("write's reply", writer.read()),
                ("no shutdown under way", shutdown_ms(primary)),
                ("primary up", admin.ping()),
            ]
        finally:
            os.rmdir(blocker)


def test_a_failed_save_after_the_wait_cancels_the_shutdown():
    require_redis()
    stories = {kind: failed_save_story(kind) for kind in KINDS}
    assert stories["millrace"] == stories["redis"]
    assert dict(stories["millrace"])["caller's reply"] == "ERR Errors trying to SHUTDOWN. Check logs."


def _shutdown_counted(admin) -> tuple:
    """SHUTDOWN's INFO commandstats counts and LATENCY HISTOGRAM calls."""
    stats = admin.info("commandstats").get("cmdstat_shutdown", {})
    histogram = admin.execute_command("LATENCY", "HISTOGRAM", "shutdown").get(b"shutdown", {})
    return stats.get("calls"), stats.get("failed_calls"), histogram.get(b"calls")


def uncounted_story(kind: str) -> list:
    """A waiting SHUTDOWN that is cancelled is never counted (Redis's replyToClientsBlockedOnShutdown
    unblocks it without updateStatsOnUnblock); SHUTDOWN ABORT is, failed when it answered a caller."""
    with pair(kind, "--shutdown-timeout", "60", "--save", "") as (primary, replica):
        admin = primary.client()
        freeze(replica)
        admin.set("k", "v")
        caller = RawConn(primary.port)
        caller.send(encode_command("SHUTDOWN"))
        wait_for(lambda: shutdown_ms(primary), what="shutdown under way")
        out = [("abort", admin.execute_command("SHUTDOWN", "ABORT")), ("caller's reply", str(caller.read()))]
        out.append(("counted", _shutdown_counted(admin)))
        thaw(replica)
        return out


def test_a_cancelled_shutdown_is_not_counted():
    require_redis()
    stories = {kind: uncounted_story(kind) for kind in KINDS}
    assert stories["millrace"] == stories["redis"]
    assert dict(stories["millrace"])["counted"] == (1, 1, 1)


def no_getack_story(kind: str) -> list:
    """While writes are held already (CLIENT PAUSE WRITE), the shutdown wait sends no GETACK: the
    replication offset stays (Redis's `if (!isPausedActions(PAUSE_ACTION_REPLICA)) sendGetackToReplicas()`)."""
    with pair(kind, "--shutdown-timeout", "60", "--save", "") as (primary, replica):
        admin = primary.client()
        freeze(replica)
        admin.set("k", "v")
        admin.execute_command("CLIENT", "PAUSE", "60000", "WRITE")
        before = admin.info("replication")["master_repl_offset"]
        RawConn(primary.port).send(encode_command("SHUTDOWN"))
        wait_for(lambda: shutdown_ms(primary), what="shutdown under way")
        out = [("offset moved by", admin.info("replication")["master_repl_offset"] - before)]
        out.append(("abort", admin.execute_command("SHUTDOWN", "ABORT")))
        thaw(replica)
        return out


def test_no_getack_while_writes_are_held_already():
    require_redis()
    stories = {kind: no_getack_story(kind) for kind in KINDS}
    assert stories["millrace"] == stories["redis"]
    assert dict(stories["millrace"])["offset moved by"] == 0


def _log_after(text: str, marker: str) -> list[str]:
    """The log's lines after the one with `marker`, as `<level> <message>` (pid, role and time dropped),
    but the save's own error (its temporary file's name differs)."""
    lines = text[text.index(marker) :].splitlines()[1:]
    return [" ".join(line.split(" ")[5:]) for line in lines if "Error moving temp DB file" not in line]


def test_a_failed_save_on_sigterm_logs_as_redis():
    """SIGTERM whose final save fails: the server stays up, and logs what Redis logs, once each."""
    require_redis()
    found = {}
    for kind, start in (("redis", start_redis), ("millrace", start_millrace)):
        server = start("--save", "3600 1", "--dbfilename", "dump.x")
        blocker = os.path.join(server.dir, "dump.x")
        os.mkdir(blocker)  # a directory where the snapshot goes: the save fails
        try:
            server.client().set("k", "v")
            server.proc.send_signal(signal.SIGTERM)
            wait_for(lambda s=server: "Errors trying to shut down" in s.read_log(), what="the failed shutdown")
            server.client().ping()  # up, and everything the failure logs is logged by now
            found[kind] = _log_after(server.read_log(), "Received SIGTERM")
        finally:
            os.rmdir(blocker)
            server.stop()
    assert found["millrace"] == found["redis"]
    assert found["millrace"][-1] == "# Errors trying to shut down the server. Check the logs for more information."


def waiting_caller_story(kind: str) -> list:
    """The SHUTDOWN caller waits on no key (Redis's BLOCKED_SHUTDOWN): it counts in blocked_clients and is
    flagged `b`, but not in total_blocking_keys; a caller that goes meanwhile leaves the others waiting."""
    with pair(kind, "--shutdown-timeout", "60", "--save", "") as (primary, replica):
        admin = primary.client()
        freeze(replica)
        admin.set("k", "v")
        callers = [RawConn(primary.port) for _ in range(2)]
        for caller in callers:
            caller.send(encode_command("SHUTDOWN"))
        wait_for(lambda: admin.info("clients")["blocked_clients"] == 2, what="both callers waiting")
        fields = admin.info("clients")
        out = [("clients", fields["blocked_clients"], fields["total_blocking_keys"])]
        listing = admin.execute_command("CLIENT", "LIST").decode().splitlines()
        out.append(("flags", [line.split(" flags=")[1].split()[0] for line in listing if "cmd=shutdown" in line]))
        callers[0].close()
        wait_for(lambda: admin.info("clients")["blocked_clients"] == 1, what="one caller gone")
        out.append(("abort", admin.execute_command("SHUTDOWN", "ABORT")))
        out.append(("other caller's reply", str(callers[1].read())))
        out.append(("blocked after", admin.info("clients")["blocked_clients"]))
        thaw(replica)
        return out


def test_the_waiting_caller_blocks_on_no_key():
    require_redis()
    stories = {kind: waiting_caller_story(kind) for kind in KINDS}
    assert stories["millrace"] == stories["redis"]
    assert stories["millrace"][0] == ("clients", 2, 0)


def unblock_story(kind: str) -> list:
    """CLIENT UNBLOCK leaves a SHUTDOWN caller waiting for its replicas (Redis's BLOCKED_SHUTDOWN cannot time out)."""
    with pair(kind, "--shutdown-timeout", "60", "--save", "") as (primary, replica):
        admin = primary.client()
        freeze(replica)
        admin.set("k", "v")
        caller = RawConn(primary.port)
        caller_id = caller.call("CLIENT", "ID")
        caller.send(encode_command("SHUTDOWN"))
        wait_for(lambda: shutdown_ms(primary), what="shutdown under way")
        out = [
            ("unblock", admin.execute_command("CLIENT", "UNBLOCK", caller_id)),
            ("unblock error", admin.execute_command("CLIENT", "UNBLOCK", caller_id, "ERROR")),
            ("caller still waits", no_reply_for(caller, 0.3)),
            ("blocked_clients", admin.info("clients")["blocked_clients"]),
            ("abort", admin.execute_command("SHUTDOWN", "ABORT")),
        ]
        thaw(replica)
        return out


def test_client_unblock_leaves_a_shutdown_caller():
    require_redis()
    stories = {kind: unblock_story(kind) for kind in KINDS}
    assert stories["millrace"] == stories["redis"]
    assert dict(stories["millrace"])["unblock"] == 0


def wait_keys_story(kind: str) -> tuple:
    """A WAIT blocked on a lagging replica counts in blocked_clients, not in total_blocking_keys."""
    with pair(kind, "--save", "") as (primary, replica):
        freeze(replica)
        waiter = RawConn(primary.port)
        waiter.call("SELECT", "3")  # (WAIT's own wait is on no key, in whatever database)
        waiter.call("SET", "x", "1")
        waiter.send(encode_command("WAIT", "1", "0"))
        held = no_reply_for(waiter, 0.3)
        fields = primary.client().info("clients")
        thaw(replica)
        return held, fields["blocked_clients"], fields["total_blocking_keys"], fields["total_blocking_keys_on_nokey"]


def test_a_waiting_wait_blocks_on_no_key():
    require_redis()
    found = {kind: wait_keys_story(kind) for kind in KINDS}
    assert found["millrace"] == found["redis"] == (True, 1, 0, 0)


def client_pause_story(kind: str) -> list:
    """A CLIENT PAUSE under way when the shutdown's wait begins keeps its own end: once the shutdown is
    aborted, writes go on when the CLIENT PAUSE's time is up, not never."""
    with pair(kind, "--shutdown-timeout", "60", "--save", "") as (primary, replica):
        admin = primary.client()
        freeze(replica)
        admin.set("k", "v")
        out = [("pause", admin.execute_command("CLIENT", "PAUSE", "700", "WRITE"))]
        caller = RawConn(primary.port)
        caller.send(encode_command("SHUTDOWN"))
        wait_for(lambda: shutdown_ms(primary), what="shutdown under way")
        out.append(("abort", admin.execute_command("SHUTDOWN", "ABORT")))
        writer = RawConn(primary.port)
        writer.send(encode_command("SET", "k2", "v2"))
        out.append(("write held by the CLIENT PAUSE", no_reply_for(writer, 0.1)))
        writer.sock.settimeout(10)
        out.append(("write's reply once it ends", writer.read()))
        thaw(replica)
        return out


def test_a_client_pause_keeps_its_end_across_a_shutdown_wait():
    require_redis()
    stories = {kind: client_pause_story(kind) for kind in KINDS}
    assert stories["millrace"] == stories["redis"]
    assert dict(stories["millrace"])["write's reply once it ends"] == b"OK"
