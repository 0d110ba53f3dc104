"""RESP3 aggregates in requests: a map keyed by an aggregate made hiredis raise TypeError (a list or
dict is no dict key) out of data_received, which dropped the connection and the replies already
due. Redis reads such a map as an inline line where a command starts and refuses it ("expected
'$'") where an argument is due. Each case goes to Millrace and Debian's redis-server 7.0.15, whole
and cut in two reads: the same bytes back and the same close."""

from __future__ import annotations

import pytest

from tests.rawclient import encode_command, probe
from tests.servers import DEBIAN_VERSION, require_redis, start_millrace, start_redis

PING = encode_command("PING")
CASES = {
    "map keyed by an array, where a command starts": PING + b"%1\r\n*1\r\n$1\r\na\r\n$1\r\nb\r\n" + PING,
    "map keyed by an array, where an argument is due": PING + b"*2\r\n$4\r\nECHO\r\n%1\r\n*1\r\n$1\r\na\r\n$1\r\nb\r\n" + PING,
    "map keyed by a map, where an argument is due": PING + b"*2\r\n$4\r\nECHO\r\n%1\r\n%1\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n",
    "map keyed by a set, alone": b"%1\r\n~1\r\n$1\r\na\r\n$1\r\nb\r\n" + PING,
}


@pytest.fixture(scope="module")
def servers():
    require_redis(DEBIAN_VERSION)
    procs = []
    try:
        procs.append(start_millrace())
        procs.append(start_redis(version=DEBIAN_VERSION))
        yield procs
    finally:
        for proc in procs:
            proc.stop()


@pytest.mark.parametrize("name", list(CASES))
def test_map_keyed_by_an_aggregate_answered_as_redis_answers(servers, name):
    data = CASES[name]
    for cut in (None, data.index(b"%") + 3, len(data) - 6):
        chunks = [data] if cut is None else [data[:cut], data[cut:]]
        ours, redis = (probe(proc.port, *chunks) for proc in servers)
        assert ours == redis, chunks
