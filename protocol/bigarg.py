"""Big arguments read outside hiredis, straight into one buffer of their declared size.

hiredis copies every byte it is fed into its own buffer and builds an argument's bytes
object from that buffer once the bulk is whole, so a 64 MB SET was held twice at its
peak, and the final copy froze the loop. Redis, once it reads the header of a bulk of
PROTO_MBULK_BIG_ARG bytes or more, sizes its query buffer to exactly that bulk
(sdsMakeRoomForNonGreedy), reads into it and makes the buffer the argument's object.

The same here: when a read ends inside the payload of a bulk of `BIG_ARG` bytes or more,
`RequestReader` hands the rest of that request to a `BigRequest`. Each argument goes
into a bytes object of its declared size, created uninitialized (the C API's
PyBytes_FromStringAndSize(NULL, n): address space reserved as Redis's malloc reserves
it, memory committed only as the bytes arrive and are written, so a declared 500 MB
costs nothing until it is sent), filled read by read, and handed over once full, after
which nothing writes to it: storage receives an ordinary, immutable bytes object and
no copy of it is ever made.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

import hiredis

from .errors import ProtocolError

BIG_ARG = 1 << 20  # a bulk this long, cut by a read, is read here rather than by hiredis

_new_bytes = ctypes.pythonapi.PyBytes_FromStringAndSize
_new_bytes.argtypes = (ctypes.c_void_p, ctypes.c_ssize_t)
_new_bytes.restype = ctypes.py_object
_bytes_address = ctypes.pythonapi.PyBytes_AsString
_bytes_address.argtypes = (ctypes.py_object,)
_bytes_address.restype = ctypes.c_void_p


def blank(size: int) -> tuple[bytes, memoryview]:
    """A new bytes object of `size` uninitialized bytes and a writable view of them.

    Only the creator may write through the view, and only until the object is shared
    (the C API allows a fresh bytes object's contents to be filled in place, as
    CPython's own readers do); MemoryError when the size cannot be reserved.
    """
    obj = _new_bytes(None, size)
    return obj, memoryview((ctypes.c_char * size).from_address(_bytes_address(obj))).cast("B")


class BigRequest:
    """The rest of one request, from a big bulk on: its arguments read without hiredis.

    Headers are refused exactly as `_HeaderCheck` refuses them (its `bulk_length`), at
    the same byte; the two bytes after a payload are passed over unread, as Redis and
    hiredis pass them. `carry` counts the request's bytes for client-query-buffer-limit.
    """

    __slots__ = ("argv", "args", "line", "target", "view", "filled", "crlf", "carry", "bulk_length", "line_max")

    def __init__(self, argv: list[bytes], size: int, args: int, carry: int, bulk_length: Callable[[bytes], int], line_max: int) -> None:
        self.argv = argv  # the arguments read so far
        self.args = args  # bulk headers still due after the current one
        self.line = b""  # a header line not yet ended
        self.target: bytes | None = None
        self.view: memoryview | None = None
        self.filled = 0
        self.crlf = 0  # bytes still to pass over after the last payload
        self.carry = carry
        self.bulk_length = bulk_length
        self.line_max = line_max
        self._start(size)

    def _start(self, size: int) -> None:
        """Make the next argument's buffer, or take an empty one at once."""
        if size:
            self.target, self.view = blank(size)
            self.filled = 0
        else:
            self.argv.append(b"")
            self.crlf = 2

    def feed(self, data: bytes) -> int:
        """Read on from data[0]: the offset just after the request, or -1 if it goes on past data."""
        pos, end = 0, len(data)
        source = memoryview(data)
        while True:
            view = self.view
            if view is not None:  # inside a payload: copy what this read has of it
                filled = self.filled
                take = min(len(view) - filled, end - pos)
                view[filled : filled + take] = source[pos : pos + take]
                pos += take
                self.filled = filled = filled + take
                if filled < len(view):
                    return -1
                self.argv.append(self.target)
                self.target = self.view = None
                view.release()
                self.crlf = 2
            if self.crlf:
                step = min(self.crlf, end - pos)
                self.crlf -= step
                pos += step
                if self.crlf:
                    return -1
            if not self.args:
                return pos
            if pos >= end:
                return -1
            if self.line[-1:] == b"\r" and data[pos] == 0x0A:  # CRLF split between reads
                header, pos = self.line[:-1], pos + 1
            else:
                nl = data.find(b"\r\n", pos)
                if nl < 0:
                    self.line += data[pos:]
                    if len(self.line) > self.line_max:
                        raise ProtocolError("too big bulk count string")
                    return -1
                header, pos = self.line + data[pos:nl], nl + 2
            self.line = b""
            size = self.bulk_length(header)
            self.args -= 1
            if end - pos >= size:  # the whole payload is here: one slice
                self.argv.append(data[pos : pos + size])
                pos += size
                self.crlf = 2
            else:
                self._start(size)


def args_before(head: bytes, end: int, size: int, count: int) -> list[bytes] | None:
    """The `count` arguments of a request whose first `end` bytes are `head[:end]`, which end with the
    header of a bulk of `size` bytes: the arguments before that bulk, parsed by hiredis at C speed
    (their headers already checked by `_HeaderCheck`; that bulk's header is `$<size>` exactly, as a
    checked length has no sign and no leading zero). None if they do not make `count` arguments."""
    start = head.index(b"\r\n") + 2  # past '*N'
    stop = end - len(b"$%d\r\n" % size)
    reader = hiredis.Reader()
    reader.feed(b"*%d\r\n" % count)
    if stop > start:
        reader.feed(head, start, stop - start)
    argv = reader.gets()
    if type(argv) is not list or len(argv) != count or reader.has_data():
        return None
    return argv
