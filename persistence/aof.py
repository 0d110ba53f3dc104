"""The append-only file: Redis 7's multi-part layout of RESP commands.

A directory (`appenddirname`) holds a manifest naming one base file and the
increments that follow it, in order:

    file appendonly.aof.1.base.mpk seq 1 type b
    file appendonly.aof.1.incr.aof seq 1 type i

The base is a snapshot (`aof-use-rdb-preamble yes`, our msgpack format, hence
`.mpk`) or plain commands (`no`, `.aof`). Increments hold the normalized
effects the server propagates, as RESP arrays, so any RESP tool can read them,
and with `aof-timestamp-enabled yes` a `#TS:<unix seconds>` annotation line
before the first command of each second (Redis's; loaders skip `#` lines).
This module knows files and bytes only: which commands they mean is the
server's business (the loader replays them through the command table).
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from hiredis import pack_command

from protocol.errors import ProtocolError
from protocol.reader import INT_MAX, split_args

from .snapshot import MAGIC as SNAPSHOT_MAGIC
from .snapshot import fsync_dir

BASE, INCR, HISTORY = "b", "i", "h"
# What a client may send (protocol/reader.py: a count up to INT_MAX, a bulk up to proto-max-bulk-len,
# at most LONG_MAX) is what the loader must take back. Neither costs memory before the bytes it
# declares are in the file: arguments are collected as they are read, and a length past the file's
# end is a truncated command.
MAX_ARGS = INT_MAX
MAX_BULK = 2**63 - 1


class AofError(Exception):
    """A file that cannot be replayed as it is: where, why, and whether it only ends early."""

    def __init__(self, path: str, offset: int, reason: str, truncated: bool = False) -> None:
        super().__init__(f"Bad file format reading the append only file '{path}' at offset {offset}: {reason}")
        self.path, self.offset, self.reason, self.truncated = path, offset, reason, truncated


class EmptyManifestError(AofError):
    """A manifest that exists but names no base or increment: Redis refuses to start (an empty
    one), and starting anew would overwrite the base and append to the old increment, which the
    next restart would then load back."""

    def __init__(self, path: str, empty: bool) -> None:
        super().__init__(path, 0, "Found an empty AOF manifest" if empty else "The AOF manifest names no base or incr file")

    def __str__(self) -> str:
        return f"*** FATAL AOF MANIFEST FILE ERROR *** {self.reason}: {self.path}"


class ManifestWriteError(OSError):
    """Writing the manifest failed; str() is Redis's log line for the step that did."""

    def __str__(self) -> str:
        return self.strerror


# -- encoding ------------------------------------------------------------------


def encode(argv: list[bytes]) -> bytes:
    """One command as a RESP array of bulk strings (hiredis's C packer: the same bytes, in half the time)."""
    try:
        return pack_command(tuple(argv))
    except TypeError:  # it takes bytes but no bytearray
        return _encode(argv)


def _encode(argv: list[bytes]) -> bytes:
    parts = [b"*%d\r\n" % len(argv)]
    for arg in argv:
        parts.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
    return b"".join(parts)


def encode_batch(batch: list[list[bytes]]) -> bytes:
    """Commands one after another; the usual batch is one command (a write's single effect)."""
    if len(batch) == 1:
        return encode(batch[0])
    return b"".join(map(encode, batch))


# -- decoding ------------------------------------------------------------------


def parse_commands(data: bytes | mmap.mmap, path: str, start: int = 0, stop: int | None = None):
    """Yield (argv, end offset) for each complete command in data[start:stop].

    Raises AofError: truncated=True when the data ends inside a command (the
    only damage `aof-load-truncated` may repair), False for anything else.
    A line starting with '#' where a command may start is an annotation
    (`#TS:...`), skipped as Redis does; one cut before its newline is a torn
    write, cut as a truncated command.
    """
    pos = start
    size = len(data) if stop is None else stop
    find = data.find

    def header(pos: int, begin: int, kind: int, low: int, high: int) -> tuple[int, int]:
        """The number after a '*' or '$' at pos, checked against [low, high], and where its line ends."""
        if data[pos] != kind:
            raise AofError(path, pos, f"expected {chr(kind)!r}, got {chr(data[pos])!r}")
        eol = find(b"\r\n", pos)
        if eol < 0:
            raise AofError(path, begin, "truncated command", truncated=True)
        what = "argument count" if kind == 42 else "bulk length"
        try:
            value = int(data[pos + 1 : eol])
        except ValueError:
            raise AofError(path, pos, f"invalid {what}") from None
        if not low <= value <= high:
            raise AofError(path, pos, f"invalid {what} {value}")
        return value, eol + 2

    while pos < size:
        begin = pos
        if data[pos] == 35:  # '#'
            eol = find(b"\n", pos, size)
            if eol < 0:
                raise AofError(path, begin, "truncated annotation", truncated=True)
            pos = eol + 1
            continue
        argc, pos = header(pos, begin, 42, 1, MAX_ARGS)  # '*'
        argv = []
        for _ in range(argc):
            if pos >= size:
                raise AofError(path, begin, "truncated command", truncated=True)
            length, pos = header(pos, begin, 36, 0, MAX_BULK)  # '$'
            end = pos + length
            if end + 2 > size:
                raise AofError(path, begin, "truncated command", truncated=True)
            if data[end : end + 2] != b"\r\n":
                raise AofError(path, end, "bulk string not followed by CRLF")
            argv.append(data[pos:end])
            pos = end + 2
        yield argv, pos


@contextmanager
def mapped(path: str) -> Iterator[bytes | mmap.mmap]:
    """A file's bytes for parsing, memory-mapped: a multi-GB AOF is then held in the page cache,
    which the kernel can reclaim, not copied into the heap beside the data it loads (Redis reads
    it in chunks for the same reason)."""
    with open(path, "rb") as handle:
        if os.fstat(handle.fileno()).st_size == 0:  # mmap refuses an empty file
            yield b""
            return
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            yield data


def valid_prefix(data: bytes | mmap.mmap, path: str) -> tuple[int, AofError | None]:
    """How many leading bytes hold whole commands (a MULTI left open counts as cut), and the error after them."""
    good = 0
    in_multi_from = -1
    try:
        for argv, end in parse_commands(data, path):
            name = argv[0].lower()
            if name == b"multi":
                in_multi_from = good
            elif name == b"exec":
                in_multi_from = -1
            good = end
    except AofError as exc:
        return (in_multi_from if in_multi_from >= 0 else good), exc
    if in_multi_from >= 0:
        return in_multi_from, AofError(path, in_multi_from, "MULTI without EXEC", truncated=True)
    return len(data), None  # all of it, annotations after the last command too


def is_snapshot(path: str) -> bool:
    with open(path, "rb") as handle:
        return handle.read(len(SNAPSHOT_MAGIC)) == SNAPSHOT_MAGIC


# -- the manifest ----------------------------------------------------------------


@dataclass
class AofFile:
    name: str
    seq: int
    type: str


@dataclass
class Manifest:
    """Which files make up the AOF, in replay order (Redis 7's aofManifest)."""

    base: AofFile | None = None
    incrs: list[AofFile] = field(default_factory=list)
    history: list[AofFile] = field(default_factory=list)

    @property
    def files(self) -> list[AofFile]:
        return ([self.base] if self.base else []) + self.incrs

    def next_seq(self, kind: str) -> int:
        files = [self.base] if kind == BASE and self.base else self.incrs if kind == INCR else []
        seqs = [f.seq for f in files] + [f.seq for f in self.history if f.name.endswith(".incr.aof") == (kind == INCR)]
        return max(seqs, default=0) + 1

    def render(self) -> bytes:
        lines = []
        for item in [*self.files, *self.history]:
            name = item.name.encode("utf-8", "surrogateescape")
            if any(c in name for c in b' "\\\r\n\t') or not name:
                name = _quote(name)
            lines.append(b"file %s seq %d type %s\n" % (name, item.seq, item.type.encode()))
        return b"".join(lines)

    @classmethod
    def parse(cls, text: bytes, path: str) -> Manifest:
        """Read a manifest; raise AofError naming the line on anything malformed."""
        manifest = cls()
        offset = 0
        for line in text.split(b"\n"):
            here, offset = offset, offset + len(line) + 1
            line = line.strip()
            if not line or line.startswith(b"#"):
                continue
            try:
                words = split_args(line)
            except ProtocolError:
                raise AofError(path, here, "invalid manifest line (unbalanced quotes)") from None
            if len(words) % 2:
                raise AofError(path, here, "invalid manifest line")
            pairs = dict(zip(words[0::2], words[1::2], strict=True))
            try:
                item = AofFile(pairs[b"file"].decode("utf-8", "surrogateescape"), int(pairs[b"seq"]), pairs[b"type"].decode())
            except (KeyError, ValueError):
                raise AofError(path, here, "invalid manifest line (needs file, seq and type)") from None
            if "/" in item.name or item.name in (".", ".."):
                raise AofError(path, here, f"invalid file name {item.name!r}")
            if item.type == BASE:
                if manifest.base is not None:
                    raise AofError(path, here, "more than one base file")
                manifest.base = item
            elif item.type == INCR:
                if manifest.incrs and item.seq <= manifest.incrs[-1].seq:
                    raise AofError(path, here, "incr files out of order")
                manifest.incrs.append(item)
            elif item.type == HISTORY:
                manifest.history.append(item)
            else:
                raise AofError(path, here, f"unknown file type {item.type!r}")
        return manifest


def _quote(name: bytes) -> bytes:
    out = bytearray(b'"')
    for c in name:
        if c in b'"\\':
            out += b"\\" + bytes([c])
        elif c == 10:
            out += b"\\n"
        elif c == 13:
            out += b"\\r"
        elif c == 9:
            out += b"\\t"
        elif 32 <= c < 127:
            out.append(c)
        else:
            out += b"\\x%02x" % c
    return bytes(out + b'"')


def manifest_name(appendfilename: str) -> str:
    return f"{appendfilename}.manifest"


def base_name(appendfilename: str, seq: int, snapshot: bool) -> str:
    return f"{appendfilename}.{seq}.base.{'mpk' if snapshot else 'aof'}"


def incr_name(appendfilename: str, seq: int) -> str:
    return f"{appendfilename}.{seq}.incr.aof"


def write_manifest(directory: str, appendfilename: str, manifest: Manifest) -> None:
    """Replace the manifest atomically: temp file, fsync, rename, fsync of the directory.

    Raises ManifestWriteError naming the step that failed, in Redis's words."""
    name = manifest_name(appendfilename)
    path = os.path.join(directory, name)
    temp = os.path.join(directory, f"temp-{name}")
    step = f"Can't open the AOF manifest file temp-{name}"
    try:
        with open(temp, "wb") as handle:
            step = f"Error trying to write the temporary AOF manifest file temp-{name}"
            handle.write(manifest.render())
            handle.flush()
            step = f"Fail to fsync the temp AOF file temp-{name}"
            os.fsync(handle.fileno())
        step = f"Error trying to rename the temporary AOF manifest file temp-{name} into {name}"
        os.replace(temp, path)
        step = f"Fail to fsync AOF directory {os.path.basename(directory)}"
        fsync_dir(directory)
    except ManifestWriteError:
        raise
    except OSError as exc:
        raise ManifestWriteError(exc.errno, f"{step}: {exc.strerror or exc}") from exc


def read_manifest(directory: str, appendfilename: str) -> Manifest | None:
    """The manifest in directory, or None if there is no AOF there (no such regular file, as
    Redis's fileExist). One that names no base or increment raises EmptyManifestError."""
    path = os.path.join(directory, manifest_name(appendfilename))
    if not os.path.isfile(path):
        return None
    with open(path, "rb") as handle:
        text = handle.read(1 << 20)
    manifest = Manifest.parse(text, path)
    if not manifest.files:
        raise EmptyManifestError(path, empty=not text)
    return manifest
