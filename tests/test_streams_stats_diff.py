"""Differential: INFO stats keyspace_hits/keyspace_misses after each stream command, Redis vs Millrace.

Redis counts a hit or a miss for each read lookup (lookupKeyRead*): XRANGE,
XREVRANGE, XLEN, XREAD (each key, twice: resolving the IDs, then serving),
XINFO, XPENDING, XACK, XACKDEL, XCLAIM and XAUTOCLAIM (before it reads its
arguments); XREADGROUP resolves its keys with write lookups, then reads each
once more (a hit) before it serves or blocks; the other write lookups (XADD, XTRIM, XDEL, XSETID, XGROUP) count nothing. A
key of another type is a hit before WRONGTYPE.
"""

from __future__ import annotations

from tests.rawclient import hits_and_misses

COMMANDS = [
    ("XRANGE", "s", "-", "+"), ("XRANGE", "nope", "-", "+"), ("XRANGE", "a", "-", "+"), ("XREVRANGE", "s", "+", "-"),
    ("XREVRANGE", "nope", "+", "-"), ("XRANGE", "s", "bad", "+"), ("XLEN", "s"), ("XLEN", "nope"), ("XLEN", "a"),
    ("XREAD", "STREAMS", "s", "nope", "0", "0"), ("XREAD", "STREAMS", "s", "s", "$", "$"), ("XREAD", "STREAMS", "a", "0"),
    ("XREAD", "BLOCK", "1", "STREAMS", "nope", "$"), ("XREAD", "STREAMS", "s", "bad"),
    ("XINFO", "STREAM", "s"), ("XINFO", "STREAM", "nope"), ("XINFO", "STREAM", "s", "FULL"), ("XINFO", "GROUPS", "s"),
    ("XINFO", "GROUPS", "nope"), ("XINFO", "CONSUMERS", "s", "g"), ("XINFO", "CONSUMERS", "s", "nog"),
    ("XINFO", "CONSUMERS", "nope", "g"), ("XINFO", "STREAM", "a"),
    ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"), ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "nope", ">"),
    ("XPENDING", "s", "g"), ("XPENDING", "nope", "g"), ("XPENDING", "s", "nog"), ("XPENDING", "s", "g", "-", "+", "10"),
    ("XPENDING", "a", "g"), ("XACK", "s", "g", "1-1"), ("XACK", "nope", "g", "1-1"), ("XACK", "s", "nog", "1-1"),
    ("XACK", "a", "g", "1-1"), ("XACK", "nope", "g", "bad"), ("XREADGROUP", "GROUP", "g", "c", "BLOCK", "1", "STREAMS", "s", ">"), ("XCLAIM", "s", "g", "d", "0", "1-1"), ("XCLAIM", "nope", "g", "d", "0", "1-1"),
    ("XCLAIM", "a", "g", "d", "0", "1-1"), ("XAUTOCLAIM", "s", "g", "d", "0", "0"), ("XAUTOCLAIM", "nope", "g", "d", "0", "0"),
    ("XAUTOCLAIM", "a", "g", "d", "0", "0"), ("XADD", "s", "2-1", "f", "v"), ("XADD", "a", "2-1", "f", "v"),
    ("XADD", "new", "NOMKSTREAM", "2-1", "f", "v"), ("XTRIM", "s", "MAXLEN", "5"), ("XTRIM", "nope", "MAXLEN", "5"),
    ("XDEL", "s", "9-9"), ("XDEL", "nope", "9-9"), ("XSETID", "s", "9-9"), ("XSETID", "nope", "9-9"),
    ("XGROUP", "CREATE", "s", "g2", "0"), ("XGROUP", "CREATE", "nope", "g2", "0"), ("XGROUP", "SETID", "s", "g", "0"),
    ("XGROUP", "CREATECONSUMER", "s", "g", "e"), ("XGROUP", "DELCONSUMER", "s", "g", "e"), ("XGROUP", "DESTROY", "s", "g2"),
    ("TYPE", "s"), ("EXISTS", "s", "nope"),
    ("XACKDEL", "s", "g", "IDS", "1", "1-1"), ("XACKDEL", "nope", "g", "IDS", "1", "1-1"),
    ("XACKDEL", "s", "nog", "IDS", "1", "1-1"), ("XACKDEL", "a", "g", "IDS", "1", "1-1"), ("XACKDEL", "s", "g", "IDS", "1", "bad"),
    ("XAUTOCLAIM", "s", "g", "d", "0", "bad"), ("XAUTOCLAIM", "nope", "g", "d", "0", "bad"), ("XAUTOCLAIM", "s", "g", "d", "x", "0"),
    ("XAUTOCLAIM", "s", "g", "d", "0", "0", "COUNT", "0"), ("XAUTOCLAIM", "s", "g", "d", "0", "0", "FOO"),
    ("XAUTOCLAIM", "a", "g", "d", "x", "0"), ("XAUTOCLAIM", "s", "nog", "d", "0", "0"),
]  # fmt: skip


SETUP = [("SET", "a", "1"), ("XADD", "s", "1-1", "f", "v"), ("XGROUP", "CREATE", "s", "g", "0")]


def test_stream_commands_count_hits_and_misses_as_redis(server, oracle_server):
    ours, theirs = hits_and_misses(server.port, SETUP, COMMANDS), hits_and_misses(oracle_server.port, SETUP, COMMANDS)
    previous = ((0, 0), (0, 0))
    for args, got, want in zip(COMMANDS, ours, theirs, strict=True):
        delta = (got[0] - previous[0][0], got[1] - previous[0][1]), (want[0] - previous[1][0], want[1] - previous[1][1])
        assert delta[0] == delta[1], f"{args}: millrace (hits, misses) +{delta[0]}, redis +{delta[1]}"
        previous = (got, want)
