"""The request reader gives the same commands however the byte stream is split.

TCP may cut a pipeline anywhere: inside a header, between the CR and the LF,
between elements of one command (hiredis then reports no pending data), in
a payload, or around inline lines and ignored `*0` requests.
"""

import random

import hiredis
import pytest

from protocol.reader import RequestReader

STREAM = (
    b"".join(hiredis.pack_command((b"SET", b"k%d" % i, b"v" * (i % 40))) for i in range(60))
    + b"PING\r\n\r\n"
    + hiredis.pack_command((b"GET", b"x"))
    + b"*0\r\n*-1\r\n"
    + hiredis.pack_command((b"SET", b"big", b"z" * 3000))
    + hiredis.pack_command((b"ECHO", b""))
)


def read(reader: RequestReader, data: bytes, lane: bool) -> tuple[list[list[bytes]], str | None]:
    """One read as Client.data_received takes it: through `request` first in the lane, else `feed` alone."""
    argv = reader.request(data) if lane else None
    return ([argv], None) if argv is not None else reader.feed(data)


def parse_in_pieces(cuts: list[int], lane: bool = False) -> list[list[bytes]]:
    reader, commands, prev = RequestReader(), [], 0
    for cut in [*cuts, len(STREAM)]:
        got, error = read(reader, STREAM[prev:cut], lane)
        assert error is None, (prev, cut, error)
        commands += got
        prev = cut
    return commands


def expected() -> list[list[bytes]]:
    commands, error = RequestReader().feed(STREAM)
    assert error is None
    assert len(commands) == 60 + 1 + 1 + 1 + 1
    return commands


@pytest.mark.parametrize("lane", [False, True])
def test_every_two_way_split(lane):
    want = expected()
    for cut in range(1, len(STREAM)):
        assert parse_in_pieces([cut], lane) == want, cut


@pytest.mark.parametrize("lane", [False, True])
@pytest.mark.parametrize("pieces", [3, 20, 200])
def test_random_splits(pieces, lane):
    want = expected()
    rng = random.Random(pieces)
    for _ in range(150):
        cuts = sorted(rng.sample(range(1, len(STREAM)), pieces))
        assert parse_in_pieces(cuts, lane) == want


def test_huge_length_refused_even_when_split_at_element_boundary():
    reader = RequestReader()
    assert reader.feed(b"*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n") == ([[b"PING"]], None)
    assert reader.feed(b"$99999999999\r\n") == ([], "ERR Protocol error: invalid bulk length")


@pytest.mark.parametrize(
    "aggregate",
    [b"%1\r\n$1\r\na\r\n$1\r\nb\r\n", b">1\r\n$4\r\nPING\r\n", b"+PING\r\n", b"$4\r\nPING\r\n"],
    ids=["map", "push", "status", "bulk"],
)
def test_resp3_aggregates_where_a_command_starts_are_inline_lines(aggregate):
    """After a command, Redis reads a non-'*' line as inline: never a dict/set/push argv."""
    commands, error = RequestReader().feed(hiredis.pack_command((b"PING",)) + aggregate)
    assert error is None
    assert commands[0] == [b"PING"]
    assert all(type(argv) is list and all(type(a) is bytes for a in argv) for argv in commands)
    # each remaining line is an inline command, as Redis splits it
    assert commands[1:] == [line.split() for line in aggregate.split(b"\r\n") if line]


def test_resp3_set_where_a_command_starts_is_read_inline():
    """hiredis hands a RESP3 set over as a list, as it does an array; Redis reads the set's lines as
    inline commands, and so does the reader, cut anywhere (issue 25: `~3 SET k v` ran as a SET)."""
    stream = hiredis.pack_command((b"PING",)) + b"~3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n" + hiredis.pack_command((b"PING",))
    want = [[b"PING"], [b"~3"], [b"$3"], [b"SET"], [b"$1"], [b"k"], [b"$1"], [b"v"], [b"PING"]]
    for lane in (False, True):
        for cut in range(len(stream)):
            reader, got = RequestReader(), []
            for chunk in (stream[:cut], stream[cut:]) if cut else (stream,):
                commands, error = read(reader, chunk, lane)
                assert error is None
                got += commands
            assert got == want, (cut, lane)


def test_read_ending_inside_a_request_with_the_last_commands_last_argument():
    """hiredis reports no pending data after a complete element inside an array: a read
    ending `...$1\\r\\n1\\r\\n` (a request cut after an argument equal to the previous
    command's last) is not a command boundary; the next reads must go on with that request."""
    one = hiredis.pack_command((b"XADD", b"s", b"1-1", b"f", b"1"))
    two = hiredis.pack_command((b"XADD", b"s", b"*", b"f", b"1", b"g", b"2"))
    cut = two.index(b"$1\r\ng")  # after `f 1`: the read ends as `one` does
    reader = RequestReader()
    assert reader.feed(one + two[:cut]) == ([[b"XADD", b"s", b"1-1", b"f", b"1"]], None)
    assert reader.feed(two[cut : cut + 5]) == ([], None)  # `$1\r\ng`: inside the request, not at its start
    assert reader.feed(two[cut + 5 :] + one) == ([[b"XADD", b"s", b"*", b"f", b"1", b"g", b"2"], [b"XADD", b"s", b"1-1", b"f", b"1"]], None)


@pytest.mark.parametrize("lane", [False, True])
def test_random_pipelines_of_repeated_values_in_pieces(lane):
    """Requests whose arguments repeat (and start with `*`), cut anywhere: the same commands."""
    rng = random.Random(7)
    values = [b"1", b"2", b"f", b"XADD", b"s1", b"10-1", b"*", b"*2", b"$1", b"\r\n"]
    for _ in range(3000):
        commands = [[rng.choice(values) for _ in range(rng.randint(1, 6))] for _ in range(rng.randint(1, 6))]
        stream = b"".join(hiredis.pack_command(tuple(argv)) for argv in commands)
        cuts = sorted(rng.sample(range(1, len(stream)), min(len(stream) - 1, rng.randint(1, 5))))
        reader, got, prev = RequestReader(), [], 0
        for cut in [*cuts, len(stream)]:
            parsed, error = read(reader, stream[prev:cut], lane)
            assert error is None, (commands, cuts)
            got += parsed
            prev = cut
        assert got == commands, cuts
