"""A snapshot's records are read inside its frame: never into the CRC that follows them.

parse() decodes from a window over the body (persistence/snapshot.py `_Window`). A body cut
inside its last record, with a CRC that matches the cut body, must be refused as a truncated
record where that record starts; read past the body, the CRC's four bytes would complete the
value and the damage would be reported elsewhere, after a corrupt value was decoded.
"""

from __future__ import annotations

import zlib

import msgpack
import pytest

from persistence import snapshot


def _reframed(body_end_cut: int) -> tuple[bytes, int]:
    """A one-key snapshot without its end record and with its last `body_end_cut` bytes cut, CRC fixed;
    and the offset where the key's record starts."""
    data = b"".join(snapshot.iter_chunks([(0, {b"k": b"v" * 100}, {})], snapshot.Header()))
    body = data[: -snapshot._CRC.size]
    eof = msgpack.packb(["eof"])
    assert body.endswith(eof)
    body = body[: -len(eof) - body_end_cut]
    record = data.index(msgpack.packb(["db", 0, 1])) + len(msgpack.packb(["db", 0, 1]))
    return body + snapshot._CRC.pack(zlib.crc32(body)), record


@pytest.mark.parametrize("cut", [1, 4, 30])
def test_a_record_cut_at_the_end_of_the_body_is_truncated_where_it_starts(cut):
    data, record = _reframed(cut)
    with pytest.raises(snapshot.SnapshotError) as excinfo:
        snapshot.parse(data)
    assert (excinfo.value.offset, excinfo.value.reason) == (record, "truncated record")


def test_the_uncut_frame_loads():
    data = b"".join(snapshot.iter_chunks([(0, {b"k": b"v" * 100}, {})], snapshot.Header()))
    assert snapshot.parse(data).dbs[0][0] == {b"k": b"v" * 100}
    assert snapshot.parse(bytearray(data)).dbs[0][0] == {b"k": b"v" * 100}  # a replica's full sync buffer
