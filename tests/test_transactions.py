"""MULTI/EXEC/DISCARD/WATCH/UNWATCH through redis-py, RESP2 and RESP3, with raw replies.

redis-py's pipeline hides EXEC's null reply and queuing errors behind its own
exceptions, so most tests drive one connection by hand with `Session`.
"""

from __future__ import annotations

import time

import pytest
import redis


class Session:
    """One connection, commands sent one at a time, replies as parsed (errors returned, not raised)."""

    def __init__(self, r: redis.Redis) -> None:
        self.pool = r.connection_pool
        self.conn = self.pool.get_connection()

    def __call__(self, *args):
        self.conn.send_command(*args)
        try:
            return self.conn.read_response()
        except redis.ResponseError as exc:
            return exc

    def close(self) -> None:
        self.pool.release(self.conn)


@pytest.fixture
def s(r):
    session = Session(r)
    yield session
    session.close()


@pytest.fixture
def other(r):
    session = Session(r)
    session.conn.disconnect()  # a second, separate connection
    session.conn = r.connection_pool.make_connection()
    yield session
    session.conn.disconnect()


def err(reply) -> str:
    """The error line as sent (redis-py strips a known code such as EXECABORT into the exception class)."""
    assert isinstance(reply, redis.ResponseError), reply
    if isinstance(reply, redis.exceptions.ExecAbortError):
        return f"EXECABORT {reply}"
    return str(reply)


def test_multi_exec(s):
    assert s("MULTI") == b"OK"
    assert s("SET", "a", "1") == b"QUEUED"
    assert s("INCR", "a") == b"QUEUED"
    assert s("GET", "a") == b"QUEUED"
    assert s("EXEC") == [b"OK", 2, b"2"]
    assert s("GET", "a") == b"2"


def test_runtime_errors_inside_exec(s):
    s("MULTI")
    s("SET", "a", "x")
    s("INCR", "a")
    s("SET", "b", "1")
    replies = s("EXEC")
    assert replies[0] == b"OK" and replies[2] == b"OK"
    assert err(replies[1]) == "value is not an integer or out of range"
    assert s("GET", "b") == b"1"


def test_queuing_errors_abort(s):
    s("MULTI")
    assert err(s("SET", "a")) == "wrong number of arguments for 'set' command"
    assert s("SET", "b", "1") == b"QUEUED"
    assert err(s("EXEC")) == "EXECABORT Transaction discarded because of previous errors."
    assert s("EXISTS", "b") == 0
    s("MULTI")
    assert err(s("NOSUCHCMD", "x")).startswith("unknown command 'NOSUCHCMD'")
    assert err(s("EXEC")) == "EXECABORT Transaction discarded because of previous errors."
    assert err(s("EXEC")) == "EXEC without MULTI"


def test_rejected_exec_ends_the_transaction(s):
    s("MULTI")
    s("SET", "a", "1")
    assert err(s("EXEC", "extra")) == "EXECABORT Transaction discarded because of: wrong number of arguments for 'exec' command"
    assert err(s("EXEC")) == "EXEC without MULTI"
    assert s("EXISTS", "a") == 0


def test_nesting_and_misplaced_commands(s):
    assert err(s("EXEC")) == "EXEC without MULTI"
    assert err(s("DISCARD")) == "DISCARD without MULTI"
    s("MULTI")
    assert err(s("MULTI")) == "MULTI calls can not be nested"
    assert err(s("WATCH", "x")) == "WATCH inside MULTI is not allowed"
    assert s("SET", "a", "1") == b"QUEUED"
    assert s("EXEC") == [b"OK"]  # those errors do not abort the transaction


def test_discard(s):
    s("MULTI")
    s("SET", "a", "1")
    assert s("DISCARD") == b"OK"
    assert s("EXISTS", "a") == 0
    assert err(s("EXEC")) == "EXEC without MULTI"


def test_empty_exec_and_unwatch_is_queued(s):
    s("MULTI")
    assert s("EXEC") == []
    s("MULTI")
    assert s("UNWATCH") == b"QUEUED"
    assert s("EXEC") == [b"OK"]


def exec_after(s, setup) -> object:
    """WATCH w, let `setup` act, then run MULTI/SET/EXEC; returns EXEC's reply."""
    s("WATCH", "w")
    setup()
    s("MULTI")
    s("SET", "result", "done")
    return s("EXEC")


def test_watch_unchanged(s):
    s("SET", "w", "1")
    assert exec_after(s, lambda: None) == [b"OK"]


def test_watch_touched_by_another_client(s, other):
    s("SET", "w", "1")
    assert exec_after(s, lambda: other("SET", "w", "2")) is None
    assert s("EXISTS", "result") == 0
    assert exec_after(s, lambda: None) == [b"OK"]  # EXEC unwatched everything


def test_watch_own_writes_count_too(s):
    assert exec_after(s, lambda: s("SET", "w", "mine")) is None


def test_watch_noop_writes_do_not_touch(s, other):
    s("SET", "w", "1")
    assert exec_after(s, lambda: (other("SET", "w", "2", "NX"), other("DEL", "nope"), other("PERSIST", "w"))) == [b"OK"]


def test_watch_missing_key_created(s, other):
    assert exec_after(s, lambda: other("SET", "w", "1")) is None


def test_watch_by_expire_rename_del(s, other):
    s("SET", "w", "1")
    assert exec_after(s, lambda: other("EXPIRE", "w", "100")) is None
    assert exec_after(s, lambda: other("RENAME", "w", "w2")) is None
    assert exec_after(s, lambda: other("RENAME", "w2", "w")) is None
    assert exec_after(s, lambda: other("DEL", "w")) is None


def test_watch_expiry(s, other):
    for px in (400, 5000):  # a longer life only if the machine was too slow to WATCH within the first
        s("SET", "w", "1", "PX", px)
        s("WATCH", "w")
        left = s("PTTL", "w")  # a read: no change to the WATCH
        if left > 0:
            break
        s("UNWATCH")
    assert left > 0, "w was never alive when watched"
    time.sleep(left / 1000 + 0.05)
    s("MULTI")
    s("SET", "result", "done")
    assert s("EXEC") is None  # expired since WATCH, even if nobody looked
    s("SET", "w", "1", "PX", "20")
    time.sleep(0.04)
    assert exec_after(s, lambda: None) == [b"OK"]  # already expired when watched: no change


def test_watch_flush_and_swapdb(s, other):
    s("SET", "w", "1")
    assert exec_after(s, lambda: other("FLUSHDB")) is None
    assert exec_after(s, lambda: other("FLUSHDB")) == [b"OK"]  # a watched key that stays absent is no change
    s("FLUSHALL")
    s("SET", "w", "1")
    assert exec_after(s, lambda: other("FLUSHALL")) is None
    other("SELECT", "1")
    other("SET", "w", "in db1")
    assert exec_after(s, lambda: other("SWAPDB", "0", "1")) is None
    s("FLUSHALL")
    assert exec_after(s, lambda: other("SWAPDB", "0", "1")) == [b"OK"]


def test_watch_other_db_is_separate(s, other):
    s("SET", "w", "1")
    other("SELECT", "1")
    assert exec_after(s, lambda: other("SET", "w", "2")) == [b"OK"]


def test_unwatch_and_discard_forget_watches(s, other):
    s("SET", "w", "1")
    s("WATCH", "w")
    other("SET", "w", "2")
    assert s("UNWATCH") == b"OK"
    s("MULTI")
    s("PING")
    assert s("EXEC") == [b"PONG"]
    s("WATCH", "w")
    other("SET", "w", "3")
    s("MULTI")
    s("DISCARD")
    s("MULTI")
    assert s("EXEC") == []


def test_pipeline_transaction(r):
    pipe = r.pipeline(transaction=True)
    pipe.set("a", 1).incr("a").get("a")
    assert pipe.execute() == [True, 2, b"2"]


def test_pipeline_watch_error(r, r2):
    r.set("w", 1)
    with r.pipeline() as pipe:
        pipe.watch("w")
        r2.set("w", 2)
        pipe.multi()
        pipe.set("x", 1)
        with pytest.raises(redis.WatchError):
            pipe.execute()


def test_blocking_commands_do_not_block_inside_exec(s):
    s("MULTI")
    assert s("XREAD", "BLOCK", "0", "STREAMS", "nostream", "$") == b"QUEUED"
    assert s("SET", "after", "1") == b"QUEUED"
    assert s("EXEC") == [None, b"OK"]  # answered at once, as on timeout


def test_no_multi_commands_abort_the_transaction():
    """In process (a queued SHUTDOWN must never run against the shared test server)."""
    import server.commands  # noqa: F401
    from protocol.reply import Error
    from server.client import Client
    from server.server import Server

    srv = Server()
    client = Client(srv)
    srv.execute(client, [b"MULTI"])
    assert srv.execute(client, [b"SHUTDOWN", b"NOSAVE"]) == Error(b"ERR Command not allowed inside a transaction")
    assert srv.execute(client, [b"PING"]) == b"QUEUED"
    assert srv.execute(client, [b"EXEC"]) == Error(b"EXECABORT Transaction discarded because of previous errors.")


def test_watch_copy_touches_only_the_destination(s, other):
    s("SET", "w", "1")
    assert exec_after(s, lambda: other("COPY", "w", "copy")) == [b"OK"]  # the source is unchanged
    assert exec_after(s, lambda: other("COPY", "copy", "w", "REPLACE")) is None
    other("SELECT", "1")
    other("SET", "w", "db1")
    other("SELECT", "0")
    s("SELECT", "1")
    assert exec_after(s, lambda: other("COPY", "copy", "w", "DB", "1", "REPLACE")) is None
    assert exec_after(s, lambda: other("MOVE", "copy", "1")) == [b"OK"]  # moved to db 1 under another name
    s("SELECT", "0")
    assert exec_after(s, lambda: other("MOVE", "w", "2")) is None


def test_exec_refused_when_out_of_memory_with_denyoom_commands():
    import server.commands  # noqa: F401
    from protocol.reply import Error
    from server.client import Client
    from server.server import Server

    srv = Server()
    client = Client(srv)
    srv.execute(client, [b"MULTI"])
    srv.execute(client, [b"SET", b"k", b"v"])
    srv.execute(Client(srv), [b"CONFIG", b"SET", b"maxmemory", b"1"])  # memory goes over maxmemory after the command was queued
    srv.oom = True
    srv.update_refusing()
    assert srv.execute(client, [b"EXEC"]) == Error(
        b"EXECABORT Transaction discarded because of: OOM command not allowed when used memory > 'maxmemory'.")
    assert client.multi is None and b"k" not in srv.keyspace[0].data
    srv.execute(client, [b"MULTI"])
    srv.execute(client, [b"GET", b"k"])
    assert srv.execute(client, [b"EXEC"]) == [None]  # no denyoom command queued: runs
