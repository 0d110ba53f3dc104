"""tests/test_backlog.py's model scan on an in-process server (issue 27, README "Mutation testing").

The model test talks to a server process through redis-py, so mutmut cannot
attribute it to storage/backlog.py. Here the same test function runs with a
redis-py client whose commands are answered by a Server in this process:
each reply goes through the RESP2 encoder and hiredis, then redis-py's own
response callbacks, as over a socket.
"""

from __future__ import annotations

import hiredis
import pytest
import redis

import server.commands  # noqa: F401  (registers the command table)
from protocol.encoder import encode
from protocol.reply import Error
from server.client import Client
from server.server import Server
from tests.test_backlog import test_backlog_matches_model_scan as model_scan


class InProcessRedis(redis.Redis):
    """redis-py's command methods and reply parsing, over an in-process Server instead of a socket."""

    def __init__(self) -> None:
        super().__init__(protocol=2)
        self.server = Server()
        self.client = Client(self.server)

    def execute_command(self, *args, **options):
        name = args[0].decode() if isinstance(args[0], bytes) else str(args[0])
        argv = [*name.encode().split(), *(a if isinstance(a, bytes) else str(a).encode() for a in args[1:])]
        reply = self.server.execute(self.client, argv)
        if isinstance(reply, Error):
            raise redis.ResponseError(bytes(reply).decode(errors="replace").removeprefix("-").strip())
        reader = hiredis.Reader()
        reader.feed(encode(reply, 2))
        response = reader.gets()
        callback = self.response_callbacks.get(name) or self.response_callbacks.get(name.upper())
        return callback(response, **options) if callback else response


@pytest.mark.parametrize("seed", range(5))
def test_backlog_matches_model_scan_in_process(seed: int) -> None:
    model_scan(InProcessRedis(), seed)
