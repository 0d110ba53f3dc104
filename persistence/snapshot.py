"""The snapshot file: every database and key, Redis's RDB in our own msgpack format.

Layout (all integers big-endian):

    b"MLRCSNAP"  u16 version
    header      msgpack map: ctime (ms), replid, repl_offset, millrace (version text)
    per non-empty database:
        ["db", index, keys]           then `keys` records [key, type, expire-ms or -1, payload]
    ["eof"]
    u32 crc32 of every byte before it

A stream's payload is `Stream.dump()` (its nodes exactly as they are packed, so
saving and loading cost about a copy) and `dump_groups()`. Unknown types or
versions are refused, never skipped: a reader must not half-understand a file.
Writing goes to a temporary file that is fsynced and renamed into place, and
the directory is fsynced, so a crash leaves either the old file or the new one.
"""

from __future__ import annotations

import mmap
import os
import struct
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field

import msgpack

from storage import retention
from storage.consumer_group import dump_groups, load_groups
from storage.idmp import load_extras, snapshot_extras
from storage.stream import Stream

MAGIC = b"MLRCSNAP"
VERSION = 1  # bump when a record's form changes; load every older version
_PREFIX = struct.Struct(">8sH")
_CRC = struct.Struct(">I")
STRING, STREAM = 0, 1  # record types
_CHUNK = 1 << 20  # write in pieces of about this size


class SnapshotError(Exception):
    """A file that is not a complete, intact snapshot: where and why."""

    def __init__(self, path: str, offset: int, reason: str) -> None:
        super().__init__(f"Bad snapshot file '{path}' at offset {offset}: {reason}")
        self.path, self.offset, self.reason = path, offset, reason


@dataclass
class Header:
    """Who wrote a snapshot and where in the replication stream it stands (Redis's RDB aux fields).

    `stream_db` is the database the replication stream had selected (-1: the
    stream names one before its next command), so a replica loading this
    snapshot applies what follows in the right one.
    """

    replid: str = ""
    repl_offset: int = 0
    stream_db: int = -1
    version: str = ""


@dataclass
class Snapshot:
    """What a snapshot file holds: its header and, per database index, (data, expires)."""

    ctime: int = 0
    replid: str = ""
    repl_offset: int = 0
    stream_db: int = -1
    dbs: dict[int, tuple[dict[bytes, object], dict[bytes, int]]] = field(default_factory=dict)
    keys: int = 0


def encode_value(value: object) -> tuple[int, object]:
    """A value's record type and msgpack-able payload."""
    if type(value) is bytes:
        return STRING, value
    if type(value) is Stream:
        extras = snapshot_extras(value)  # optional keys: a third element only when there are any
        retained = retention.dump(value)
        if retained is not None:  # a consumption-based retention policy, roles, counters
            extras["retention"] = retained
        return STREAM, [value.dump(), dump_groups(value.groups), extras] if extras else [value.dump(), dump_groups(value.groups)]
    raise TypeError(f"cannot snapshot a {type(value).__name__}")


def decode_value(kind: int, payload: object) -> object:
    if kind == STRING:
        if type(payload) is not bytes:
            raise ValueError("a string's payload is not bytes")
        return payload
    if kind == STREAM:
        state, groups, *extras = payload
        stream = Stream.load(state)
        stream.groups = load_groups(groups)
        if extras:
            load_extras(stream, extras[0])
            if "retention" in extras[0]:
                retention.load(stream, extras[0]["retention"])
        return stream
    raise ValueError(f"unknown value type {kind}")


def iter_chunks(dbs, header: Header) -> Iterator[bytes]:
    """The snapshot's bytes in pieces; `dbs` is a sequence of (index, data, expires)."""
    packer = msgpack.Packer(use_bin_type=True, autoreset=False)
    packer.pack({
        "ctime": int(time.time() * 1000), "replid": header.replid, "repl_offset": header.repl_offset,
        "repl_stream_db": header.stream_db, "millrace": header.version,
    })  # fmt: skip
    head = _PREFIX.pack(MAGIC, VERSION) + packer.bytes()
    packer.reset()
    crc = zlib.crc32(head)
    yield head
    for index, data, expires in dbs:
        if not data:
            continue
        packer.pack(["db", index, len(data)])
        for key, value in data.items():
            kind, payload = encode_value(value)
            packer.pack([key, kind, expires.get(key, -1), payload])
            if len(packer.getbuffer()) >= _CHUNK:
                chunk = packer.bytes()
                packer.reset()
                crc = zlib.crc32(chunk, crc)
                yield chunk
    packer.pack(["eof"])
    chunk = packer.bytes()
    crc = zlib.crc32(chunk, crc)
    yield chunk + _CRC.pack(crc)


def keyspace_dbs(keyspace) -> list[tuple[int, dict, dict]]:
    return [(db.id, db.data, db.expires) for db in keyspace.dbs]


def write(path: str, dbs, header: Header, fsync: bool = True) -> int:
    """Write a snapshot atomically at path (temp file, fsync, rename, fsync of the directory); returns its size."""
    directory = os.path.dirname(os.path.abspath(path))
    temp = os.path.join(directory, f"temp-{os.getpid()}-{os.path.basename(path)}")
    size = 0
    try:
        with open(temp, "wb") as handle:
            for chunk in iter_chunks(dbs, header):
                handle.write(chunk)
                size += len(chunk)
            handle.flush()
            if fsync:
                os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
    if fsync:
        fsync_dir(directory)
    return size


def fsync_dir(directory: str) -> None:
    """Make a rename or a new file in directory durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read(path: str) -> Snapshot:
    """Load a whole snapshot file, or raise SnapshotError; nothing is returned half-read.

    The file is memory-mapped and decoded a chunk at a time: the heap holds the decoded data,
    not also one or two copies of the file (the page cache holds it, and the kernel can reclaim
    that)."""
    with open(path, "rb") as handle:
        if os.fstat(handle.fileno()).st_size == 0:  # mmap refuses an empty file
            return parse(b"", path)
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return parse(data, path)


class _Window:
    """data[start:stop] as a file for msgpack.Unpacker, read a chunk at a time (no copy of the whole)."""

    __slots__ = ("data", "pos", "stop")

    def __init__(self, data: bytes | bytearray | mmap.mmap, start: int, stop: int) -> None:
        self.data, self.pos, self.stop = data, start, stop

    def read(self, n: int) -> bytes:
        pos = self.pos
        self.pos = end = min(pos + n, self.stop)
        chunk = self.data[pos:end]
        return chunk if type(chunk) is bytes else bytes(chunk)  # msgpack takes bytes only (a replica's is a bytearray)


def _crc32(data: bytes | bytearray | mmap.mmap, end: int) -> int:
    view = memoryview(data)
    try:
        return zlib.crc32(view[:end])
    finally:
        view.release()  # an mmap cannot close while a view of it is alive


def parse(data: bytes | bytearray | mmap.mmap, path: str = "<bytes>") -> Snapshot:
    """Check the frame and checksum, then decode every record."""
    if len(data) < _PREFIX.size or data[:8] != MAGIC:
        raise SnapshotError(path, 0, "not a Millrace snapshot (wrong magic)")
    version = _PREFIX.unpack_from(data)[1]
    if version > VERSION:
        raise SnapshotError(path, 8, f"format version {version} is newer than this server's {VERSION}")
    if len(data) < _PREFIX.size + _CRC.size:
        raise SnapshotError(path, len(data), "truncated")
    body_end = len(data) - _CRC.size
    expected = _CRC.unpack_from(data, body_end)[0]
    if _crc32(data, body_end) != expected:
        raise SnapshotError(path, body_end, "checksum mismatch (the file is truncated or corrupted)")
    limit = max(body_end, 1024)  # one record may be as big as the body, not bigger
    window = _Window(data, _PREFIX.size, body_end)
    unpacker = msgpack.Unpacker(window, read_size=min(1 << 20, limit), max_buffer_size=limit, raw=False, strict_map_key=False)
    snapshot = Snapshot()
    offset = _PREFIX.size
    try:
        header = unpacker.unpack()
        if not isinstance(header, dict):
            raise ValueError("the header is not a map")
        snapshot.ctime = int(header.get("ctime", 0))
        snapshot.replid = str(header.get("replid", ""))
        snapshot.repl_offset = int(header.get("repl_offset", 0))
        snapshot.stream_db = int(header.get("repl_stream_db", -1))
        while True:
            offset = _PREFIX.size + unpacker.tell()
            record = unpacker.unpack()
            tag = record[0]
            if tag == "eof":
                break
            if tag != "db":
                raise ValueError(f"unexpected record {tag!r}")
            _, index, count = record
            data_, expires = snapshot.dbs.setdefault(index, ({}, {}))
            for _ in range(count):
                offset = _PREFIX.size + unpacker.tell()
                key, kind, expire, payload = unpacker.unpack()
                if type(key) is not bytes:
                    raise ValueError("a key is not bytes")
                data_[key] = decode_value(kind, payload)
                if expire != -1:
                    expires[key] = int(expire)
                snapshot.keys += 1
        offset = _PREFIX.size + unpacker.tell()
        if offset != body_end:
            raise ValueError("data after the end record")
    except msgpack.OutOfData:
        raise SnapshotError(path, offset, "truncated record") from None
    except (ValueError, TypeError, KeyError, IndexError, msgpack.UnpackException) as exc:
        raise SnapshotError(path, offset, f"malformed record ({exc})") from None
    return snapshot
