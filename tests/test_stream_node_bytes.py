"""stream-node-max-bytes at its smallest, in-process (issue 27, README "Mutation testing").

Redis opens a new node when the listpack's bytes plus the new entry's would
reach stream-node-max-bytes (t_stream.c, streamAppendItem: `lp_bytes +
totelelen >= node_max_bytes`), 0 meaning no limit; so with 1 every entry gets
a node of its own, while entries still share a node under 0. Both ways in:
XADD's fast path (Stream.add) and Stream.append, which decide apart. No test
used 1, where `0 < max_bytes` written as `1 < max_bytes` made it no limit.
"""

from __future__ import annotations

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
