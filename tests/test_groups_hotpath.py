"""The consumer-group hot path's shortcuts, each against what it stands for.

- One XREADGROUP delivery's IDs share one SharedPendingEntry: every change to
  one of them (XCLAIM, XAUTOCLAIM, a history read, a redelivery after SETID)
  must leave the others as they were; compared with redis-server.
- XACK acknowledges in bulk: duplicates, IDs not pending and several owners
  in one call; compared with redis-server.
- XACK's memo of recently delivered wire IDs: hits, the older generation,
  misses that fall back to parsing (and its errors).
"""

from __future__ import annotations

import pytest

from protocol.errors import ReplyError
from server.commands.groups import DeliveredIds, parse_id_fast
from tests.test_groups import raw
from tests.test_groups_differential import mask, run

PEL = ["XPENDING", "s", "g", "-", "+", "20"]

SCRIPT = [
    *(["XADD", "s", f"{ms}-1", "f", str(ms)] for ms in range(1, 9)),
    ["XGROUP", "CREATE", "s", "g", "0"],
    ["XREADGROUP", "GROUP", "g", "alice", "COUNT", "4", "STREAMS", "s", ">"],
    ["XREADGROUP", "GROUP", "g", "bob", "COUNT", "2", "STREAMS", "s", ">"],
    PEL,
    ["XCLAIM", "s", "g", "bob", "0", "2-1", "RETRYCOUNT", "5"],
    PEL,
    ["XREADGROUP", "GROUP", "g", "alice", "COUNT", "1", "STREAMS", "s", "0"],
    PEL,
    ["XAUTOCLAIM", "s", "g", "carol", "0", "3-1", "COUNT", "1"],
    PEL,
    ["XCLAIM", "s", "g", "alice", "0", "5-1", "6-1", "JUSTID"],
    PEL,
    ["XGROUP", "SETID", "s", "g", "0"],
    ["XREADGROUP", "GROUP", "g", "carol", "COUNT", "1", "STREAMS", "s", ">"],
    PEL,
    ["XREADGROUP", "GROUP", "g", "bob", "COUNT", "3", "STREAMS", "s", ">"],
    PEL,
    ["XPENDING", "s", "g"],
    ["XPENDING", "s", "g", "-", "+", "20", "alice"],
    ["XINFO", "STREAM", "s", "FULL"],
    ["XREADGROUP", "GROUP", "g", "dave", "COUNT", "3", "STREAMS", "s", ">"],
    ["XACK", "s", "g", "4-1", "4-1", "9-9", "5-1", "1-1", "7-1"],
    PEL,
    ["XACK", "s", "g", "8-1", "8-1"],
    ["XACK", "s", "g", "1-1", "2-1"],
    ["XACK", "s", "g", "1-1"],
    ["XACK", "s", "g", "3-1", "bad"],
    ["XACK", "s", "g", "3-1", "6-1"],
    PEL,
    ["XPENDING", "s", "g"],
    ["XINFO", "STREAM", "s", "FULL"],
    ["XINFO", "CONSUMERS", "s", "g"],
    ["XINFO", "GROUPS", "s"],
]


def test_shared_pending_entries_and_bulk_acks_match_redis(m, oracle):
    raw(oracle)
    for argv in SCRIPT:
        expected = mask(argv, run(oracle, argv))
        got = mask(argv, run(m, argv))
        assert got == expected, (argv, got, expected)


def test_delivered_entries_encode_as_redis(m, oracle):
    """XREADGROUP > answers with pre-encoded entries: each field-set shape, across nodes, both protocols' bytes."""
    raw(oracle)
    script = [
        ["XADD", "e", "1-1", "a", "1", "b", "2"],
        ["XADD", "e", "1-2", "a", "3", "b", "4"],
        ["XADD", "e", "1-3", "x", "5", "y", ""],  # other fields, same count
        ["XADD", "e", "1-4", "a", "6"],
        ["XADD", "e", "1-5", "a", "7", "b", "8", "c", "9"],
        *(["XADD", "e", f"2-{seq}", "sensor-id", str(seq), "temperature", "10.5"] for seq in range(150)),
        ["XGROUP", "CREATE", "e", "g", "0"],
        ["XREADGROUP", "GROUP", "g", "c1", "COUNT", "3", "STREAMS", "e", ">"],
        ["XREADGROUP", "GROUP", "g", "c2", "COUNT", "2", "STREAMS", "e", ">"],
        ["XREADGROUP", "GROUP", "g", "c1", "COUNT", "120", "STREAMS", "e", ">"],  # across a node boundary
        ["XREADGROUP", "GROUP", "g", "c3", "STREAMS", "e", ">"],
        ["XREADGROUP", "GROUP", "g", "c3", "COUNT", "5", "STREAMS", "e", ">"],
    ]
    for argv in script:
        assert run(m, argv) == run(oracle, argv), argv


def test_delivered_ids_memo_answers_as_parsing():
    memo = DeliveredIds(size=2)
    wire = [b"5-1", b"5-2", b"6-0"]
    ids = [parse_id_fast(arg) for arg in wire]
    memo.remember(wire[:2], ids[:2])
    memo.remember(wire[2:], ids[2:])  # the first two are now the older generation
    assert memo.new == {b"6-0": ids[2]} and len(memo.old) == 2
    assert memo.parse(wire) == ids
    assert memo.parse([b"6-0", b"7-3", b"5-1"]) == [ids[2], 7 << 64 | 3, ids[0]]  # a miss is parsed
    memo.remember([b"8-0", b"9-0"], [8 << 64, 9 << 64])
    memo.remember([b"10-0"], [10 << 64])  # the first generation is gone now
    assert b"5-1" not in memo.old and memo.parse([b"5-1"]) == [ids[0]]
    with pytest.raises(ReplyError, match="Invalid stream ID"):
        memo.parse([b"6-0", b"bad", b"5-1"])
    memo.remember([b"11-0", b"11-1", b"11-2"], [11 << 64, 11 << 64 | 1, 11 << 64 | 2])  # larger than a generation
    assert b"11-0" not in memo.new and memo.parse([b"11-2"]) == [11 << 64 | 2]
