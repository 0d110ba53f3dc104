"""RESP3 aggregates in requests: a map keyed by an aggregate made hiredis raise TypeError (a list or
dict is no dict key) out of data_received, which dropped the connection and the replies already
due; a set (`~3 SET k v`) after a command in the same read ran as the array hiredis makes of it.
Redis reads either as inline lines where a command starts and refuses it ("expected '$'") where
an argument is due. Each case goes to Millrace and Debian's redis-server 7.0.15, whole
and cut in two reads: the same bytes back and the same close."""

from __future__ import annotations

import pytest

from tests.rawclient import encode_command, probe

PING = encode_command("PING")
CASES = {
    "map keyed by an array, where a command starts": PING + b"%1\r\n*1\r\n$1\r\na\r\n$1\r\nb\r\n" + PING,
    "map keyed by an array, where an argument is due": PING + b"*2\r\n$4\r\nECHO\r\n%1\r\n*1\r\n$1\r\na\r\n$1\r\nb\r\n" + PING,
    "map keyed by a map, where an argument is due": PING + b"*2\r\n$4\r\nECHO\r\n%1\r\n%1\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n",
    "map keyed by a set, alone": b"%1\r\n~1\r\n$1\r\na\r\n$1\r\nb\r\n" + PING,
    "set after a command": PING + b"~3\r\n$3\r\nSET\r\n$2\r\nxp\r\n$1\r\nv\r\n" + PING + encode_command("EXISTS", "xp"),
    "set after a skipped request": PING + b"*0\r\n~1\r\n$4\r\nPING\r\n" + encode_command("EXISTS", "xp"),
    "set holding an array, after a command": PING + b"~1\r\n*1\r\n$4\r\nPING\r\n" + PING,
    "XADD's ~ argument is data": b"".join(encode_command("XADD", "xs", "MAXLEN", "~", "10", f"{i}-1", "f", "~1") for i in (1, 2))
    + encode_command("DEL", "xs"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_map_keyed_by_an_aggregate_answered_as_redis_answers(servers, name):
    data = CASES[name]
    marker = data.index(b"%") if b"%" in data else data.index(b"~")
    for cut in (None, marker + 3, len(data) - 6):
        chunks = [data] if cut is None else [data[:cut], data[cut:]]
        ours, redis = (probe(proc.port, *chunks) for proc in servers)
        assert ours == redis, chunks


def test_map_keyed_by_a_simple_string_cut_after_its_key(servers):
    """A read ending in a map's key (a simple string, which sends the read to the header walk): the
    walk stops where no array starts, and the map's lines are inline commands, as Redis reads them."""
    chunks = [PING + b"%1\r\n+x\r\n", b"$1\r\nv\r\n" + PING]
    ours, redis = (probe(proc.port, *chunks) for proc in servers)
    assert ours == redis
