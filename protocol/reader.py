"""Request parsing: RESP multibulk via hiredis, inline commands, and Redis's limits.

hiredis parses multibulk requests in C, but it cannot tell where an inline
command starts, and it waits patiently for a bulk of any declared length.
So this reader adds what Redis's `processInlineBuffer`/`processMultibulkBuffer`
do around it: inline lines (and the bare CRLFs `redis-cli --pipe` sends),
and a check of the headers of any command still incomplete after a read, so
a huge declared length is refused at once rather than buffered for ever.
"""

from __future__ import annotations

import hiredis

from .errors import ProtocolError

INLINE_MAX = 64 * 1024  # PROTO_INLINE_MAX_SIZE
INT_MAX = 2**31 - 1
_STAR = 42  # b"*"


def command_length(argv: list[bytes]) -> int:
    """Bytes that `argv` takes as a canonical RESP multibulk request."""
    size = 3 + len(str(len(argv)))
    for arg in argv:
        n = len(arg)
        size += n + len(str(n)) + 5
    return size


def split_args(line: bytes) -> list[bytes]:
    """Split an inline command as Redis's sdssplitargs does (quotes, escapes)."""
    args: list[bytes] = []
    i, n = 0, len(line)
    while True:
        while i < n and line[i] in b" \t\n\r\v\f\x00":
            i += 1
        if i >= n:
            return args
        current = bytearray()
        quote = 0  # 0 none, 1 double, 2 single
        while True:
            if i >= n:
                if quote:
                    raise ProtocolError("unbalanced quotes in request")
                break
            c = line[i]
            if quote == 1:
                if c == 0x5C and i + 3 < n and line[i + 1] == 0x78 and _ishex(line[i + 2]) and _ishex(line[i + 3]):
                    current.append(int(line[i + 2 : i + 4], 16))
                    i += 3
                elif c == 0x5C and i + 1 < n:
                    i += 1
                    current += {0x6E: b"\n", 0x72: b"\r", 0x74: b"\t", 0x62: b"\b", 0x61: b"\a"}.get(line[i], bytes([line[i]]))
                elif c == 0x22:
                    if i + 1 < n and line[i + 1] not in b" \t\n\r\v\f\x00":
                        raise ProtocolError("unbalanced quotes in request")
                    i += 1
                    break
                else:
                    current.append(c)
            elif quote == 2:
                if c == 0x5C and i + 1 < n and line[i + 1] == 0x27:
                    i += 1
                    current.append(0x27)
                elif c == 0x27:
                    if i + 1 < n and line[i + 1] not in b" \t\n\r\v\f\x00":
                        raise ProtocolError("unbalanced quotes in request")
                    i += 1
                    break
                else:
                    current.append(c)
            elif c in b" \t\n\r\v\f\x00":
                break
            elif c == 0x22:
                quote = 1
            elif c == 0x27:
                quote = 2
            else:
                current.append(c)
            i += 1
        args.append(bytes(current))


def _ishex(c: int) -> bool:
    return c in b"0123456789abcdefABCDEF"


class _HeaderCheck:
    """Walks the headers of one incomplete multibulk command as its bytes arrive.

    It validates what Redis validates before buffering a payload: the
    multibulk count, the '$' type byte and each bulk length.
    """

    __slots__ = ("args", "skip", "line", "max_bulk")

    def __init__(self, max_bulk: int) -> None:
        self.args: int | None = None  # arguments still to come; None before '*N'
        self.skip = 0  # payload bytes (with CRLF) still to pass over
        self.line = b""  # a header line not yet ended
        self.max_bulk = max_bulk

    def feed(self, data: bytes, pos: int) -> None:
        end = len(data)
        while pos < end:
            if self.skip:
                step = min(self.skip, end - pos)
                self.skip -= step
                pos += step
                continue
            nl = data.find(b"\r\n", pos)
            if nl < 0:
                self.line += data[pos:]
                if len(self.line) > INLINE_MAX:
                    raise ProtocolError("too big mbulk count string" if self.args is None else "too big bulk count string")
                return
            header = self.line + data[pos:nl]
            self.line = b""
            pos = nl + 2
            if self.args is None:
                try:
                    count = int(header[1:])
                except ValueError:
                    raise ProtocolError("invalid multibulk length") from None
                if count > INT_MAX:
                    raise ProtocolError("invalid multibulk length")
                self.args = count
                continue
            if header[:1] != b"$":
                raise ProtocolError(f"expected '$', got '{header[:1].decode('latin-1')}'")
            try:
                size = int(header[1:])
            except ValueError:
                raise ProtocolError("invalid bulk length") from None
            if size < 0 or size > self.max_bulk:
                raise ProtocolError("invalid bulk length")
            self.args -= 1
            self.skip = size + 2
            if self.args == 0:
                return


class RequestReader:
    """Turns a connection's byte stream into argv lists.

    `feed` returns the complete commands in the bytes read so far and, when the
    stream turns malformed, the Redis error text to answer before closing (the
    commands before the bad one still run, as in Redis).
    """

    __slots__ = ("_reader", "_inline", "_carry", "_check", "max_bulk_len", "max_query_buffer")

    def __init__(self, max_bulk_len: int = 512 * 1024 * 1024, max_query_buffer: int = 1024 * 1024 * 1024) -> None:
        self._reader = hiredis.Reader()
        self._inline = b""  # an inline line not yet ended
        self._carry = 0  # bytes of the incomplete command hiredis holds
        self._check: _HeaderCheck | None = None
        self.max_bulk_len = max_bulk_len
        self.max_query_buffer = max_query_buffer

    def feed(self, data: bytes) -> tuple[list[list[bytes]], str | None]:
        commands: list[list[bytes]] = []
        try:
            self._feed(data, commands)
        except ProtocolError as exc:
            return commands, f"ERR Protocol error: {exc}"
        return commands, None

    def _feed(self, data: bytes, commands: list) -> None:
        if self._inline:
            data = self._inline + data
            self._inline = b""
        pos, end = 0, len(data)
        while pos < end:
            if self._carry or data[pos] == _STAR:
                pos = self._multibulk(data, pos, commands)
                continue
            nl = data.find(b"\n", pos)
            if nl < 0:
                if end - pos > INLINE_MAX:
                    raise ProtocolError("too big inline request")
                self._inline = data[pos:]
                return
            args = split_args(data[pos:nl])
            pos = nl + 1
            if args:
                commands.append(args)

    def _multibulk(self, data: bytes, pos: int, commands: list) -> int:
        """Feed data[pos:] to hiredis; return where parsing must go on (end, or an inline line)."""
        reader = self._reader
        reader.feed(data, pos)
        first = len(commands)
        while True:
            try:
                argv = reader.gets()
            except hiredis.ProtocolError:
                # hiredis met something that is no RESP type byte: an inline line
                # after a multibulk one, or garbage. Find where it starts.
                self._reader = hiredis.Reader()
                at = self._boundary(data, pos, commands, first)
                self._carry, self._check = 0, None
                if data[at] == _STAR:
                    _HeaderCheck(self.max_bulk_len).feed(data, at)
                    raise ProtocolError("invalid multibulk length") from None
                return at
            if argv is False:
                break
            if argv is None or not argv:
                continue  # '*-1' and '*0' are skipped, as Redis does
            if type(argv) is not list or not all(type(a) is bytes for a in argv):
                self._reader = hiredis.Reader()
                self._carry, self._check = 0, None
                raise ProtocolError(_bad_element(argv))
            commands.append(argv)
        if not reader.has_data():
            self._carry, self._check = 0, None
            return len(data)
        # A command is still incomplete: check its headers so far.
        start = self._boundary(data, pos, commands, first)
        if start > pos or not self._carry or self._check is None:
            self._check = _HeaderCheck(self.max_bulk_len)
            self._carry = 0
        self._carry += len(data) - start
        if self._carry > self.max_query_buffer:
            raise ProtocolError("query buffer limit reached")
        self._check.feed(data, start)
        return len(data)

    def _boundary(self, data: bytes, pos: int, commands: list, first: int) -> int:
        """Offset in data just after the commands hiredis completed in this feed."""
        at = pos
        for argv in commands[first:]:
            at += command_length(argv)
        if len(commands) > first:
            at -= self._carry
        return min(at, len(data))


def _bad_element(argv) -> str:
    if argv is None or (type(argv) is list and None in argv):
        return "invalid bulk length"
    if type(argv) is not list:
        return "invalid multibulk length"
    for a in argv:
        if type(a) is not bytes:
            kind = {int: ":", list: "*"}.get(type(a), "?")
            return f"expected '$', got '{kind}'"
    return "invalid bulk length"
