"""Differential: which writes by another client make a WATCHed key's EXEC fail, Redis vs Millrace.

Each case: setup (by the watcher, before WATCH k), then another client's commands, then
MULTI/PING/EXEC by the watcher; the EXEC reply (nil or [PONG]) must be Redis's.
"""

from __future__ import annotations

import time

import pytest

from tests.rawclient import RawConn

CASES = {
    "swapdb": ([("SET", "k", "1")], [("SWAPDB", "0", "1")]),
    "swapdb-both-empty": ([], [("SWAPDB", "0", "1")]),
    "swapdb-key-in-other-db": ([("SELECT", "1"), ("SET", "k", "1"), ("SELECT", "0")], [("SWAPDB", "0", "1")]),
    "swapdb-unrelated-dbs": ([("SET", "k", "1")], [("SWAPDB", "2", "3")]),
    "flushdb-empty": ([], [("FLUSHDB",)]),
    "flushdb": ([("SET", "k", "1")], [("FLUSHDB",)]),
    "flushdb-other-db": ([("SET", "k", "1")], [("SELECT", "1"), ("FLUSHDB",)]),
    "flushall": ([("SET", "k", "1")], [("FLUSHALL",)]),
    "flushall-empty": ([], [("FLUSHALL",)]),
    "expires-after-watch": ([("SET", "k", "1")], [("PEXPIRE", "k", "100"), ("SLEEP",)]),
    "del-missing": ([], [("DEL", "k")]),
    "set-same-value": ([("SET", "k", "1")], [("SET", "k", "1")]),
    "persist-without-ttl": ([("SET", "k", "1")], [("PERSIST", "k")]),
    "expire-xx-without-ttl": ([("SET", "k", "1")], [("EXPIRE", "k", "100", "XX")]),
    "move-in": ([("SELECT", "1"), ("SET", "k", "1"), ("SELECT", "0")], [("SELECT", "1"), ("MOVE", "k", "0")]),
    "move-out": ([("SET", "k", "1")], [("MOVE", "k", "1")]),
    "copy-to": ([("SET", "src", "1")], [("COPY", "src", "k")]),
    "copy-from-other-db": ([("SET", "src", "1")], [("SELECT", "1"), ("SET", "src", "2"), ("COPY", "src", "k", "DB", "0")]),
    "rename-to": ([("SET", "src", "1")], [("RENAME", "src", "k")]),
    "rename-from": ([("SET", "k", "1")], [("RENAME", "k", "x")]),
    "getex-persist-without-ttl": ([("SET", "k", "1")], [("GETEX", "k", "PERSIST")]),
    "getex-no-option": ([("SET", "k", "1")], [("GETEX", "k")]),
    "setrange-empty-on-missing": ([], [("SETRANGE", "k", "0", "")]),
    "append-empty": ([("SET", "k", "1")], [("APPEND", "k", "")]),
    "incrbyfloat-zero": ([("SET", "k", "1")], [("INCRBYFLOAT", "k", "0")]),
    "touch": ([("SET", "k", "1")], [("TOUCH", "k")]),
    "msetnx-refused": ([("SET", "k", "1")], [("MSETNX", "k", "2")]),
    "setnx-refused": ([("SET", "k", "1")], [("SETNX", "k", "2")]),
    "set-nx-refused": ([("SET", "k", "1")], [("SET", "k", "2", "NX")]),
    "set-xx-missing": ([], [("SET", "k", "2", "XX")]),
    "xadd": ([], [("XADD", "k", "1-1", "f", "v")]),
    "xtrim-nothing": ([("XADD", "k", "1-1", "f", "v")], [("XTRIM", "k", "MAXLEN", "5")]),
    "xgroup-create": ([("XADD", "k", "1-1", "f", "v")], [("XGROUP", "CREATE", "k", "g", "0")]),
}


def run_case(port: int, setup, others):
    watcher, other = RawConn(port), RawConn(port)
    try:
        watcher.call("FLUSHALL")
        for args in setup:
            watcher.call(*args)
        watcher.call("SELECT", "0")
        assert watcher.call("WATCH", "k") == b"OK"
        for args in others:
            if args == ("SLEEP",):
                time.sleep(0.15)  # past the 100 ms PEXPIRE
            else:
                other.call(*args)
        assert watcher.call("MULTI") == b"OK" and watcher.call("PING") == b"QUEUED"
        return watcher.call("EXEC")
    finally:
        watcher.close()
        other.close()


@pytest.mark.parametrize("name", list(CASES))
def test_watch_invalidation_matches_redis(server, oracle_server, name):
    setup, others = CASES[name]
    assert run_case(server.port, setup, others) == run_case(oracle_server.port, setup, others)
