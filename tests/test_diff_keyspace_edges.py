"""Differential edges of string and keyspace commands against Redis 8.2.3, found by a random
differential run: database indexes past a C int, and OBJECT ENCODING over every short key and value."""

from __future__ import annotations

import pytest

from tests.rawclient import RawConn
from tests.servers import millrace_and_redis


@pytest.fixture(scope="module")
def pair():
    """Millrace and Redis 8.2.3, in that order."""
    yield from millrace_and_redis()


def replies(pair, steps) -> list[list]:
    out = []
    for proc in pair:
        conn = RawConn(proc.port)
        try:
            out.append([repr(conn.call(*step)) for step in steps])
        finally:
            conn.call("SELECT", "0")
            conn.call("FLUSHALL")
            conn.close()
    return out


def test_database_indexes_past_a_c_int(pair):
    """Redis's getIntFromObjectOrReply: an index outside a C int has its own message, before the range check."""
    steps = [("SET", "a", "1")]
    for index in ("2147483648", "-2147483649", "2147483647", "-1", "x", "99999999999999999999"):
        steps += [("SELECT", index), ("MOVE", "a", index), ("COPY", "a", "b", "DB", index)]
    millrace, redis = replies(pair, steps)
    assert millrace == redis
    assert "value must between -2147483648 and 2147483647" in millrace[1]


def encodings(port: int, expire: bool) -> list[bytes]:
    conn = RawConn(port)
    try:
        out = []
        for key_length in range(1, 46):
            key = "k" * key_length
            for value_length in range(46):
                conn.call("SET", key, "v" * value_length, *(("EX", "1000") if expire else ()))
                out.append(conn.call("OBJECT", "ENCODING", key))
                conn.call("DEL", key)
        return out
    finally:
        conn.close()


@pytest.mark.parametrize("expire", [False, True])
def test_object_encoding_of_every_short_key_and_value(pair, expire):
    millrace, redis = (encodings(proc.port, expire) for proc in pair)
    assert millrace == redis
    assert b"embstr" in millrace and b"raw" in millrace
