"""client-query-buffer-limit and one big argument, against Redis 8.2.3.

Redis reads a big bulk, with its CRLF, alone into the query buffer and closes the client, with no
reply, once that buffer passes the limit: a value of limit - 2 bytes is written, one more byte and
the command never runs, whichever read completes it.
"""

from __future__ import annotations

import pytest

from tests.rawclient import RawConn, encode_command, probe
from tests.servers import millrace_and_redis

LIMIT = 1 << 20  # the smallest client-query-buffer-limit Redis takes


@pytest.fixture(scope="module")
def servers():
    for procs in millrace_and_redis():
        for proc in procs:
            conn = RawConn(proc.port)
            conn.call("CONFIG", "SET", "client-query-buffer-limit", str(LIMIT), "proto-max-bulk-len", str(8 * LIMIT))
            conn.close()
        yield procs


def story(port: int, size: int) -> tuple:
    conn = RawConn(port)
    conn.call("DEL", "k")
    replied = probe(port, encode_command("SET", "k", "v" * size) + encode_command("PING"))
    written = conn.call("STRLEN", "k")
    conn.close()
    return replied, written


@pytest.mark.parametrize("size", [LIMIT - 2, LIMIT - 1, LIMIT + 4096, LIMIT * 3 // 2, 4 * LIMIT])
def test_a_bulk_over_the_query_buffer_limit_never_runs(servers, size):
    ours, theirs = (story(proc.port, size) for proc in servers)
    assert ours == theirs
    assert theirs == (((b"+OK\r\n+PONG\r\n", False), size) if size + 2 <= LIMIT else ((b"", True), 0))
