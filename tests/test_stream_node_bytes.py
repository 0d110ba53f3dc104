"""stream-node-max-bytes at its smallest, and MEMORY USAGE's accounting, in-process (issue 27, README "Mutation testing").

Redis opens a new node when the listpack's bytes plus the new entry's would
reach stream-node-max-bytes (t_stream.c, streamAppendItem: `lp_bytes +
totelelen >= node_max_bytes`), 0 meaning no limit; so with 1 every entry gets
a node of its own, while entries still share a node under 0. Both ways in:
XADD's fast path (Stream.add) and Stream.append, which decide apart. No test
used 1, where `0 < max_bytes` written as `1 < max_bytes` made it no limit.
"""

from __future__ import annotations

import random
import sys

import pytest

from storage.stream import Stream


@pytest.mark.parametrize("path", ["add", "append"])
def test_node_max_bytes_1_gives_every_entry_its_own_node(path: str) -> None:
    for max_bytes, nodes in ((1, 6), (0, 1), (2, 6)):
        stream = Stream()
        for ms in range(1, 7):
            if path == "add":
                stream.add(ms, [b"f", b"v"], 100, max_bytes)
            else:
                stream.append(ms << 64, [b"f", b"v"], 100, max_bytes)
        assert [node.count for node in stream.nodes] == [6 // nodes] * nodes, max_bytes


def _documented_memory(stream: Stream) -> int:
    """MEMORY USAGE's stream part as documented, summed here object by object: the stream object, its
    interned field names, the two node lists and each key; per node the node, its master and last IDs, and
    its packed bytes or (open) its ID and row lists, each ID, row and item."""
    size = sys.getsizeof(stream) + sum(sys.getsizeof(names) + sum(map(sys.getsizeof, names)) for names in stream._fields)
    size += sys.getsizeof(stream.nodes) + sys.getsizeof(stream.keys) + sum(map(sys.getsizeof, stream.keys))
    for node in stream.nodes:
        size += sys.getsizeof(node) + sys.getsizeof(node.master_id) + sys.getsizeof(node.last_id)
        if node.packed is not None:
            size += sys.getsizeof(node.packed)
            continue
        size += sys.getsizeof(node.ids) + sys.getsizeof(node.rows)
        size += sum(sys.getsizeof(i) + sys.getsizeof(row) + sum(map(sys.getsizeof, row)) for i, row in zip(node.ids, node.rows, strict=True))
    return size


@pytest.mark.parametrize("seed", range(4))
def test_memory_usage_counts_every_object_once_as_documented(seed: int) -> None:
    """The second run's three unkilled MEMORY USAGE mutants (a node key, master ID or last ID measured as None:
    16 bytes instead of an int's 32) pass a floor; the documented sum, object by object, tells them apart."""
    rng = random.Random(seed)
    stream = Stream()
    ms = 1
    for _ in range(rng.randrange(1, 400)):
        ms += rng.choice((0, 1, 1000))
        stream.add(ms, [b"f", b"v" * rng.choice((1, 50))] + ([b"g", b"w"] if rng.random() < 0.2 else []), rng.choice((3, 100)))
        if rng.random() < 0.05:
            live = [i for i, _ in stream.range(0, (1 << 128) - 1)]
            stream.delete(rng.sample(live, min(len(live), 3)))
        if rng.random() < 0.1:
            assert stream.memory_usage() == _documented_memory(stream)
    assert stream.memory_usage() == _documented_memory(stream)
    assert any(node.packed is not None for node in stream.nodes) or len(stream.nodes) == 1
