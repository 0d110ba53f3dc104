"""RESP3 replies compared byte for byte with Redis 8.2.3 (a review of RESP3 wire types: map, set, null...).

hiredis hides most RESP3 types (a set is a list, every null is None), so these tests read with
difffuzz's Resp3Reader, which keeps each wire type; one Millrace and one Redis for the whole module.
"""

from __future__ import annotations

import pytest

from tests.difffuzz import Resp3Conn, Resp3Reader, norm, shown
from tests.servers import millrace_and_redis


@pytest.fixture(scope="module")
def servers():
    yield from millrace_and_redis()


def replies(servers, *commands: list[str]) -> list:
    """Each server's replies to `commands` on a fresh RESP3 connection, types kept (Millrace's first)."""
    out = []
    for server in servers:
        conn = Resp3Conn(server.port)
        try:
            out.append([shown(norm(conn.call(*cmd))) for cmd in commands])
        finally:
            conn.close()
    return out


@pytest.mark.parametrize("name", ["xinfo", "xgroup", "config", "client"])
def test_command_info_subcommands_are_an_array(servers, name):
    """COMMAND INFO's tenth field: Redis's addReplyCommandSubCommands sends an empty set when the
    command has no subcommands but an array (not a set) of them when it has some. The entries are
    in Redis's dict order, so only the wire type of the field is compared."""
    ours, theirs = replies(servers, ["COMMAND", "INFO", name, "get"])
    [[container, plain]] = ours
    [[container_r, plain_r]] = theirs
    assert type(container[9]) is type(container_r[9]) is list, (container[9], container_r[9])
    assert plain[9] == plain_r[9] == {"~": []}


def test_command_list_subcommands_types(servers):
    """COMMAND (every command): the same rule for each entry and each subcommand entry."""

    def kinds(entries) -> set[str]:
        return {type(e[9]).__name__ + (":empty" if e[9] == {"~": []} else "") for e in entries}

    ours, theirs = replies(servers, ["COMMAND"])
    assert kinds(ours[0]) == kinds(theirs[0]) == {"list", "dict:empty"}


def test_reader_keeps_the_types_hiredis_hides():
    """The comparison sees what hiredis would merge: set vs array, `_` vs `*-1` vs `$-1`, a double's
    text vs a bulk string, +OK vs $2 OK, a verbatim string's format."""
    reader = Resp3Reader()
    reader.feed(b"~1\r\n:1\r\n*1\r\n:1\r\n_\r\n*-1\r\n$-1\r\n,1.5\r\n,1.50\r\n$3\r\n1.5\r\n+OK\r\n$2\r\nOK\r\n=7\r\ntxt:abc\r\n$3\r\nabc\r\n")
    got = [norm(reader.gets()) for _ in range(12)]
    assert reader.gets() is Ellipsis
    pairs = [(got[0], got[1]), (got[2], got[3]), (got[3], got[4]), (got[5], got[6]), (got[5], got[7]), (got[8], got[9]), (got[10], got[11])]
    for a, b in pairs:
        assert a != b and b != a, (a, b)
    assert [shown(x) for x in got] == [{"~": [1]}, [1], None, "*-1", "$-1", ",1.5", ",1.50", "1.5", "+OK", "OK", "=txt:abc", "abc"]
