"""Entries of 256 MB and 1 GiB, in-process and without the memory (issue 27, README "Mutation testing").

The second mutation run left these storage/stream.py mutants unkilled because
a test "would have to allocate that much": listpack's 5-byte back-length of a
value of 256 MB or more (`_str_size`) and streamAppendItem's limit, an entry
whose fields and values total more than 1 GiB refused with Redis's error text
and one of exactly 1 GiB stored (t_stream.c: `totelelen >
STREAM_LISTPACK_MAX_SIZE`). The sizes only take len() of a value (and the
size memo hashes it), so `bytes(n)` does: CPython calloc's it, and the kernel
maps untouched pages to its zero page. The test checks that the process's RSS
stays far below the values' sizes, so it cannot quietly cost a GiB; each entry
is the last of its stream, since sealing a node would copy it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import storage.stream as stream_mod
from protocol.errors import ReplyError
from storage.stream import LISTPACK_MAX_SIZE, Stream, _str_size
from tests.test_stream_survivors import ModelStream, lp_element_size

TOO_LARGE = "ERR Elements are too large to be stored"  # xaddCommand's reply to streamAppendItem's ERANGE
BACKLEN_5 = 268435455  # lpEncodeBacklen: an element of this many bytes or more has a 5-byte back-length


def rss_mb() -> int:
    status = Path("/proc/self/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:"))) // 1024


@pytest.fixture(autouse=True)
def _fresh_memos_and_little_memory():
    stream_mod._STR_SIZES.clear()
    stream_mod._ROWS.clear()
    stream_mod._LAST_ROW = (None, None)
    before = rss_mb()
    yield
    stream_mod._ROWS.clear()  # (drop the huge values' references)
    stream_mod._LAST_ROW = (None, None)
    assert rss_mb() - before < 64, "the huge values were touched"


@pytest.mark.parametrize("n", [BACKLEN_5 - 7, BACKLEN_5 - 6, BACKLEN_5 - 5, BACKLEN_5 - 4, 1 << 28, LISTPACK_MAX_SIZE - 1])
def test_string_sizes_around_the_5_byte_back_length(n: int) -> None:
    """A string of n >= 4096 bytes takes a 5-byte header, so n + 5 = 268435455 is the first element
    with a 5-byte back-length: 268435460 bytes for n = 268435450, 268435458 for one byte less."""
    value = bytes(n)
    assert _str_size(value) == lp_element_size(value) == n + 5 + (5 if n + 5 >= BACKLEN_5 else 4)


@pytest.mark.parametrize("n", [BACKLEN_5 - 6, BACKLEN_5 - 5])
@pytest.mark.parametrize("how", ["add", "add_id", "append"])
def test_a_node_holding_a_256_mb_value_is_sized_as_its_listpack(how: str, n: int) -> None:
    """The node's bytes (what decides where the next node opens) with the value's element counted as
    listpack.c counts it: with and without a master entry whose fields it shares."""
    for flat_before in ([b"f", b"1"], [b"g", b"1"]):
        stream, model = Stream(), ModelStream(100, 0)  # max_bytes 0: no byte limit, so one node
        for ms, flat in ((1, flat_before), (2, [b"f", bytes(n)])):
            if how == "add":
                stream.add(ms, flat, 100, 0)
            elif how == "add_id":
                stream.add_id(ms, 0, flat, 100, 0)
            else:
                stream.append(ms << 64, flat, 100, 0)
            model.add(ms << 64, flat)
        assert len(stream.nodes) == len(model.nodes) == 1
        assert stream.nodes[0].lp_bytes == model.nodes[0].lp_bytes()
        assert stream.length == 2 and stream.last_id == 2 << 64


@pytest.mark.parametrize("how", ["add", "append"])
def test_an_entry_of_exactly_1_gib_is_stored_and_a_byte_more_is_refused(how: str) -> None:
    """Fields and values of 1 GiB in all are stored (the limit is `>`); one byte more, in any item, is
    refused with Redis's error text and leaves the stream as it was."""
    stream = Stream()
    stream.add(1, [b"a", b"b"])

    def add(ms: int, flat: list[bytes]) -> None:
        if how == "add":
            stream.add(ms, flat)
        else:
            stream.append(ms << 64, flat)

    for flat in ([b"f", bytes(LISTPACK_MAX_SIZE)], [b"f", bytes(LISTPACK_MAX_SIZE - 1), b"g", b"h"], [bytes(LISTPACK_MAX_SIZE - 1), b"vv"]):
        with pytest.raises(ReplyError) as refused:
            add(2, flat)
        assert str(refused.value) == refused.value.message == TOO_LARGE
        assert (stream.length, stream.entries_added, stream.last_id, len(stream.nodes)) == (1, 1, 1 << 64, 1)
    add(2, [b"f", bytes(LISTPACK_MAX_SIZE - 1)])
    assert (stream.length, stream.entries_added, stream.last_id) == (2, 2, 2 << 64)
    assert [len(flat[1]) for _id, flat in stream.range(2 << 64, 2 << 64)] == [LISTPACK_MAX_SIZE - 1]
    model = ModelStream(100, 4096)
    model.add(1 << 64, [b"a", b"b"])
    model.add(2 << 64, [b"f", bytes(LISTPACK_MAX_SIZE - 1)])
    assert [node.lp_bytes for node in stream.nodes] == [node.lp_bytes() for node in model.nodes]
