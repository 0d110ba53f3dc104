"""The thinnest RESP server Python can run here: the ceiling Millrace is measured against.

asyncio + uvloop + hiredis. It parses each request, answers PING, SET, GET and
XADD (auto IDs only: the entry is appended to a list) with the least work that
still does the job, and writes one reply buffer per read batch. Everything
else gets an error, except CONFIG (an empty array, so redis-benchmark does not
warn). No expiry, no databases, no command table: any Python server that does
more per command cannot be faster than this one.

    python -m bench.thin_server --port 7000
"""

from __future__ import annotations

import argparse
import asyncio
import time

import hiredis
import uvloop

_PONG = b"+PONG\r\n"
_OK = b"+OK\r\n"
_NIL = b"$-1\r\n"
_EMPTY = b"*0\r\n"


class ThinProtocol(asyncio.Protocol):
    def __init__(self, strings: dict, streams: dict) -> None:
        self.reader = hiredis.Reader()
        self.strings = strings
        self.streams = streams
        self.transport = None

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        reader = self.reader
        reader.feed(data)
        out = []
        append = out.append
        try:
            argv = reader.gets()
            while argv is not False:
                name = argv[0].upper()
                if name == b"PING":
                    append(_PONG)
                elif name == b"SET" and len(argv) >= 3:
                    self.strings[argv[1]] = argv[2]
                    append(_OK)
                elif name == b"GET" and len(argv) == 2:
                    value = self.strings.get(argv[1])
                    append(_NIL if value is None else b"$%d\r\n%s\r\n" % (len(value), value))
                elif name == b"XADD" and len(argv) >= 5 and argv[2] == b"*":
                    append(self.xadd(argv[1], argv[3:]))
                elif name == b"CONFIG":
                    append(_EMPTY)
                else:
                    append(b"-ERR unknown command\r\n")
                argv = reader.gets()
        except hiredis.ProtocolError:
            self.transport.write(b"".join(out) + b"-ERR Protocol error\r\n")
            self.transport.close()
            return
        self.transport.write(b"".join(out))

    def xadd(self, key: bytes, fields: list) -> bytes:
        stream = self.streams.get(key)
        if stream is None:
            stream = self.streams[key] = [0, 0, []]  # last ms, last seq, entries
        ms = int(time.time() * 1000)
        if ms > stream[0]:
            stream[0], stream[1] = ms, 0
        else:
            stream[1] += 1
        entry_id = b"%d-%d" % (stream[0], stream[1])
        stream[2].append((entry_id, fields))
        return b"$%d\r\n%s\r\n" % (len(entry_id), entry_id)


async def serve(port: int) -> None:
    loop = asyncio.get_running_loop()
    strings: dict = {}
    streams: dict = {}
    server = await loop.create_server(lambda: ThinProtocol(strings, streams), "127.0.0.1", port, backlog=511)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=7379)
    args = parser.parse_args()
    uvloop.run(serve(args.port))


if __name__ == "__main__":
    main()
