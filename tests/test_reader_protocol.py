"""RequestReader unit tests: inline quoting, mixed pipelines, bare CRLFs, every
split point, huge declared lengths and malformed frames with Redis's exact
"Protocol error" texts (checked against redis-server by tests/test_protocol_server.py)."""

from __future__ import annotations

import random
import tracemalloc

import hiredis
import pytest

from protocol.errors import ProtocolError
from protocol.reader import INLINE_MAX, RequestReader, split_args
from tests.test_reader_splits import read


def pack(*args) -> bytes:
    return hiredis.pack_command(tuple(a if isinstance(a, bytes) else str(a).encode() for a in args))


def feed_all(*chunks: bytes, lane: bool = False, **limits) -> tuple[list, str | None]:
    """Every chunk a read; `lane` takes each through `request` first, as the server's one-request lane does."""
    reader = RequestReader(**limits)
    commands: list = []
    for chunk in chunks:
        got, error = read(reader, chunk, lane)
        commands += got
        if error:
            return commands, error
    return commands, None


# -- inline commands ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "args"),
    [
        (b"PING", [b"PING"]),
        (b"  SET  k   v  ", [b"SET", b"k", b"v"]),
        (b"SET k \"a b\"", [b"SET", b"k", b"a b"]),
        (b"ECHO 'it''", None),
        (b"ECHO 'a\\'b'", [b"ECHO", b"a'b"]),
        (b'ECHO "\\x41\\x4a\\n\\r\\t\\b\\a\\"\\\\"', [b"ECHO", b'AJ\n\r\t\b\a"\\']),
        (b'ECHO "\\xZZ"', [b"ECHO", b"xZZ"]),
        (b'ECHO ""', [b"ECHO", b""]),
        (b"ECHO ''", [b"ECHO", b""]),
        (b'ECHO "a"b', None),
        (b"ECHO 'a'b", None),
        (b'ECHO "abc', None),
        (b"ECHO 'abc", None),
        (b"a\tb\x0bc", [b"a", b"b\x0bc"]),  # \v and \f end no token (sdssplitargs), as Redis reads it
        (b"", []),
    ],
)
def test_split_args(line, args):
    if args is None:
        with pytest.raises(ProtocolError, match="unbalanced quotes in request"):
            split_args(line)
    else:
        assert split_args(line) == args


def test_inline_lines_and_bare_crlfs():
    assert feed_all(b"PING\r\n\r\n\n  \r\nECHO hi\nSET a 'b c'\r\n") == ([[b"PING"], [b"ECHO", b"hi"], [b"SET", b"a", b"b c"]], None)


def test_inline_unbalanced_quotes():
    assert feed_all(b'PING\r\nSET k "v\r\nPING\r\n') == ([[b"PING"]], "ERR Protocol error: unbalanced quotes in request")


def test_inline_too_big():
    assert feed_all(b"x" * (INLINE_MAX + 1)) == ([], "ERR Protocol error: too big inline request")
    # exactly the limit without a newline is still waited for
    reader = RequestReader()
    assert reader.feed(b"ECHO " + b"y" * (INLINE_MAX - 5)) == ([], None)
    assert reader.feed(b"\r\n")[0] == [[b"ECHO", b"y" * (INLINE_MAX - 5)]]
    # a line grown over several reads
    reader = RequestReader()
    for _ in range(INLINE_MAX // 1000):
        assert reader.feed(b"z" * 1000) == ([], None)
    assert reader.feed(b"z" * 1000) == ([], "ERR Protocol error: too big inline request")


def test_inline_nul_never_ends_a_line():
    """Redis finds the newline with strchr, so a NUL hides it (the line waits until too big)."""
    reader = RequestReader()
    assert reader.feed(b"PING\r\nGARBAGE\x00\xff\r\n") == ([[b"PING"]], None)
    assert reader.feed(b"PING\r\n") == ([], None)
    assert reader.feed(b"p" * INLINE_MAX) == ([], "ERR Protocol error: too big inline request")


# -- multibulk ------------------------------------------------------------------------------


def test_mixed_inline_and_multibulk_pipeline():
    stream = pack("SET", "k", "v") + b"PING\r\n" + pack("GET", "k") + b"\r\n" + b"ECHO x\r\n" + pack("ECHO", "a\r\nb")
    want = [[b"SET", b"k", b"v"], [b"PING"], [b"GET", b"k"], [b"ECHO", b"x"], [b"ECHO", b"a\r\nb"]]
    assert feed_all(stream) == (want, None)
    for cut in range(1, len(stream)):
        assert feed_all(stream[:cut], stream[cut:]) == (want, None), cut
    assert feed_all(*[stream[i : i + 1] for i in range(len(stream))]) == (want, None)


def test_top_level_empty_bulk_after_a_command_is_an_inline_line():
    """`$0\r\n\r\n` where a command starts: Redis reads the line `$0` (an unknown command), then skips the empty one."""
    stream = pack("PING") + b"$0\r\n\r\nPING\r\n"
    want = [[b"PING"], [b"$0"], [b"PING"]]
    assert feed_all(stream) == (want, None)
    assert feed_all(pack("PING"), b"$0\r\n\r\nPING\r\n") == (want, None)
    assert feed_all(b"*0\r\n$0\r\n\r\nPING\r\n") == ([[b"$0"], [b"PING"]], None)
    # `$` at the end of one read and `0` in the next: Redis reads the line `$0` all the same
    assert feed_all(pack("PING") + b"$", b"0\r\n\r\nPING\r\n") == (want, None)
    # a top-level bulk cut inside its header or payload: an inline line too, not a protocol error
    stream = pack("PING") + b"$3\r\nfoo\r\n" + pack("PING")
    for cut in range(len(pack("PING")) + 1, len(stream)):
        assert feed_all(stream[:cut], stream[cut:]) == ([[b"PING"], [b"$3"], [b"foo"], [b"PING"]], None), cut


def test_binary_and_empty_arguments():
    payload = bytes(range(256)) * 3
    assert feed_all(pack("SET", b"\x00k\r\n", payload)) == ([[b"SET", b"\x00k\r\n", payload]], None)
    assert feed_all(pack("ECHO", b"")) == ([[b"ECHO", b""]], None)


def test_empty_and_negative_counts_are_skipped():
    assert feed_all(b"*0\r\n*-1\r\n" + pack("PING")) == ([[b"PING"]], None)
    assert feed_all(b"*-5\r\n" + pack("PING")) == ([[b"PING"]], None)


def test_incomplete_commands_wait():
    reader = RequestReader()
    assert reader.feed(b"*2\r\n$4\r\nECHO\r\n$5\r\nhel") == ([], None)
    assert reader.feed(b"lo\r") == ([], None)
    assert reader.feed(b"\n") == ([[b"ECHO", b"hello"]], None)


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b"*abc\r\n", "invalid multibulk length"),
        (b"*1x\r\n", "invalid multibulk length"),
        (b"*\r\n", "invalid multibulk length"),
        (b"*01\r\n$4\r\nPING\r\n", "invalid multibulk length"),
        (b"*3000000000\r\n", "invalid multibulk length"),
        (b"*2147483648\r\n", "invalid multibulk length"),
        (b"*1\r\n$-1\r\n", "invalid bulk length"),
        (b"*1\r\n$abc\r\n", "invalid bulk length"),
        (b"*2\r\n$4\r\nECHO\r\n$-5\r\n", "invalid bulk length"),
        (b"*1\r\n$600000000\r\n", "invalid bulk length"),
        (b"*1\r\n*1\r\n$1\r\na\r\n", "expected '$', got '*'"),
        (b"*1\r\n*3000000000\r\n", "expected '$', got '*'"),
        (b"*1\r\n>99999999\r\n", "expected '$', got '>'"),
        (b"*2\r\n$4\r\nECHO\r\n~4294967295\r\n", "expected '$', got '~'"),
        (b"*1\r\n|999999999\r\n", "expected '$', got '|'"),
        (b"*1\r\n:1\r\n", "expected '$', got ':'"),
        (b"*1\r\n-1\r\n", "expected '$', got '-'"),
        # a bad element with more bytes behind it in the same read (hiredis then fails on those)
        (b"*1\r\n$-1\r\nPING\r\n", "invalid bulk length"),
        (b"*1\r\n:1\r\nx", "expected '$', got ':'"),
        (b"*1\r\n-1\r\n\r\n", "expected '$', got '-'"),
        (b"*" + b"1" * (INLINE_MAX + 10), "too big mbulk count string"),
        (b"*1\r\n$" + b"1" * (INLINE_MAX + 10), "too big bulk count string"),
    ],
)
def test_protocol_errors(data, error):
    commands, got = feed_all(pack("PING") + data)
    assert commands == [[b"PING"]]  # what came before still runs
    assert got == f"ERR Protocol error: {error}"
    # alone, from a boundary: the one-request lane sees the read first
    assert feed_all(pack("PING"), data, lane=True) == ([[b"PING"]], got)


def _peak_allocation(steps) -> int:
    tracemalloc.start()
    try:
        steps()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("lane", [False, True])
@pytest.mark.parametrize("cut", [0, 1, 2, 3, 5, 8, 10])
def test_huge_count_never_reaches_hiredis(cut, lane):
    """hiredis allocates a list as long as the count: 3e9 slots are 24GB to free."""
    header = b"*3000000000\r\n"

    def steps():
        commands, error = feed_all(pack("PING") + header[:cut], header[cut:], lane=lane)
        assert (commands, error) == ([[b"PING"]], "ERR Protocol error: invalid multibulk length")

    assert _peak_allocation(steps) < 10 * 1024 * 1024


@pytest.mark.parametrize("lane", [False, True])
@pytest.mark.parametrize("kind", [b">", b"~", b"|"])
@pytest.mark.parametrize("cut", [0, 1, 2, 5, 9, 10])
def test_huge_resp3_aggregate_never_reaches_hiredis(kind, cut, lane):
    """A push, set or attribute count is sized like an array's (a push's 100M slots are written: 800 MB).
    Where an argument belongs it is Redis's "expected '$'"; at a command start, an inline line."""
    header = kind + b"99999999\r\n"

    def steps():
        element = feed_all(pack("PING") + b"*2\r\n$4\r\nECHO\r\n" + header[:cut], header[cut:], lane=lane)
        assert element == ([[b"PING"]], f"ERR Protocol error: expected '$', got '{kind.decode()}'")
        start = feed_all(pack("PING") + header[:cut], header[cut:] + pack("PING"), lane=lane)
        assert start == ([[b"PING"], [header[:-2]], [b"PING"]], None)

    assert _peak_allocation(steps) < 10 * 1024 * 1024


@pytest.mark.parametrize("lane", [False, True])
def test_huge_resp3_aggregate_inside_a_payload_is_data(lane):
    value = b">999999999\r\n~99999999|4294967295\r\n>"
    want = [[b"SET", b"k", value], [b"PING"]]
    stream = pack("SET", "k", value) + pack("PING")
    for cut in range(1, len(stream)):
        assert feed_all(stream[:cut], stream[cut:], lane=lane) == (want, None), cut


@pytest.mark.parametrize("lane", [False, True])
def test_huge_count_inside_a_payload_is_data(lane):
    value = b"*3000000000\r\n*1\r\n*9999999999"
    assert feed_all(pack("SET", "k", value) + pack("PING"), lane=lane) == ([[b"SET", b"k", value], [b"PING"]], None)
    assert feed_all(pack("SET", "k", value), pack("PING"), lane=lane) == ([[b"SET", b"k", value], [b"PING"]], None)
    stream = pack("SET", "k", value) + b"ECHO *1234567890\r\n"
    want = [[b"SET", b"k", value], [b"ECHO", b"*1234567890"]]
    for cut in range(1, len(stream)):
        assert feed_all(stream[:cut], stream[cut:], lane=lane) == (want, None), cut


def test_bulk_length_limit_is_configurable():
    """Socket reads are far smaller than the 1MB minimum limit, so the header is seen first."""
    limit = 1024 * 1024
    for size, error in ((limit, None), (limit + 1, "ERR Protocol error: invalid bulk length")):
        command = pack("SET", "k", b"v" * size)
        chunks = [command[i : i + 65536] for i in range(0, len(command), 65536)]
        commands, got = feed_all(*chunks, max_bulk_len=limit)
        assert got == error
        assert commands == ([] if error else [[b"SET", b"k", b"v" * size]])


def test_query_buffer_limit():
    reader = RequestReader(max_query_buffer=1024 * 1024)
    assert reader.feed(b"*2\r\n$3\r\nSET\r\n$2000000\r\n") == ([], None)
    error = None
    for _ in range(20):
        _, error = reader.feed(b"x" * 100_000)
        if error:
            break
    assert error == ""  # no reply: Redis just closes the connection


def test_many_tiny_commands_in_one_buffer():
    stream = pack("PING") * 50_000 + b"PING\r\n" * 50_000
    commands, error = feed_all(stream)
    assert error is None and len(commands) == 100_000 and commands[-1] == [b"PING"]


def test_strings_of_other_types_are_refused_where_an_argument_belongs():
    """hiredis hands back simple (+), verbatim (=) and big-number (() strings as bytes, like a bulk;
    Redis takes only bulk strings as arguments and names the type byte. The same bytes inside an
    argument are data."""
    for lane in (False, True):
        assert feed_all(b"*2\r\n$4\r\nECHO\r\n~1\r\n+a\r\n", lane=lane) == ([], "ERR Protocol error: expected '$', got '~'")
        data = pack("SET", "k", "+1") + pack("ECHO", "\n=(x")
        assert feed_all(data, lane=lane) == ([[b"SET", b"k", b"+1"], [b"ECHO", b"\n=(x"]], None)
    # on the general path (a read after a cut one): +, = and ( too
    cut = b"*2\r\n$4\r\nECHO\r\n$1\r\na"
    assert feed_all(cut, b"\r\n*1\r\n+PING\r\n") == ([[b"ECHO", b"a"]], "ERR Protocol error: expected '$', got '+'")
    assert feed_all(cut, b"\r\n*2\r\n$4\r\nECHO\r\n=5\r\ntxt:a\r\n") == ([[b"ECHO", b"a"]], "ERR Protocol error: expected '$', got '='")
    assert feed_all(cut, b"\r\n*2\r\n$4\r\nECHO\r\n(12\r\n") == ([[b"ECHO", b"a"]], "ERR Protocol error: expected '$', got '('")
    # a cut request after one of them, read whole: the bytes they take differ from a bulk's (no crash)
    for lane in (False, True):
        assert feed_all(b"*1\r\n+PINGPONGXY\r\n*1\r\n", lane=lane) == ([], "ERR Protocol error: expected '$', got '+'")
    # cut across reads: the element read in the next one, and a header line hiredis refuses before it ends
    assert feed_all(b"*2\r\n$4\r\nECHO\r\n", b"+a\r\n") == ([], "ERR Protocol error: expected '$', got '+'")
    assert feed_all(b"*2\r\n$4\r\nECHO\r\n!1", b"\r", b"\na\r\n") == ([], "ERR Protocol error: expected '$', got '!'")


# -- simple, verbatim and big-number strings where an argument belongs: every split, both lanes ------------

OTHER = "ERR Protocol error: expected '$', got '{}'"
# (stream, commands Redis runs, its error): checked against redis-server 8.2.3 by test_protocol_server.py
OTHER_STRING_CASES = [
    (b"*1\r\n+PING\r\n", [], OTHER.format("+")),
    (pack("PING") + b"*2\r\n$4\r\nECHO\r\n+PING\r\n" + pack("PING"), [[b"PING"]], OTHER.format("+")),
    (b"*2\r\n$4\r\nECHO\r\n=5\r\ntxt:a\r\n", [], OTHER.format("=")),
    (b"*2\r\n$4\r\nECHO\r\n(12\r\n" + pack("PING"), [], OTHER.format("(")),
    (pack("PING") * 2 + b"*2\r\n$4\r\nECHO\r\n(12\r\n" + pack("PING"), [[b"PING"]] * 2, OTHER.format("(")),
    # a simple string 4 bytes shorter than its bulk, a verbatim 4 longer: the request's size is a bulk-only one's
    (b"*3\r\n$4\r\nECHO\r\n+0123456789\r\n=5\r\ntxt:a\r\n", [], OTHER.format("+")),
    (b"*3\r\n$4\r\nECHO\r\n=5\r\ntxt:a\r\n+0123456789\r\n", [], OTHER.format("=")),
    # the two bytes after a payload are passed over unread (Redis, hiredis): no line end before the '+'
    (b"*2\r\n$4\r\nECHOxx+PING\r\n" + pack("PING"), [], OTHER.format("+")),
    (pack("PING") + b"*3\r\n$4\r\nECHOxx(1\r\n$1\r\na\r\n", [[b"PING"]], OTHER.format("(")),
    (b"*2\r\n$4\r\nECHO\r\n+\r\n", [], OTHER.format("+")),
    # six simple strings 18 bytes short: read with the next request cut, its '*' payload byte 18 bytes in looks like a start
    (b"*7\r\n$4\r\nECHO\r\n" + b"+a\r\n" * 6 + b"*3\r\n$4\r\nECHO\r\n$5\r\n**abc\r\n$1\r\nx\r\n", [], OTHER.format("+")),
    (b"*2\r\n$4\r\nECHO\r\n*1\r\n+a\r\n", [], OTHER.format("*")),
    # no error: the same bytes as data, and a payload's two trailing bytes that are no CRLF
    (pack("XRANGE", "k", "-", "+") + pack("ECHO", "(1=") + pack("ECHO", "=5\r\ntxt:a"), [[b"XRANGE", b"k", b"-", b"+"], [b"ECHO", b"(1="], [b"ECHO", b"=5\r\ntxt:a"]], None),
    (b"*2\r\n$4\r\nECHOxx$1\r\n+\r\n", [[b"ECHO", b"+"]], None),
    (b"*2\r\n$4\r\nECHO+($1\r\n+\r\n" + pack("PING"), [[b"ECHO", b"+"], [b"PING"]], None),
]


@pytest.mark.parametrize("lane", [False, True])
@pytest.mark.parametrize(("stream", "commands", "error"), OTHER_STRING_CASES, ids=[repr(c[0][:28]) for c in OTHER_STRING_CASES])
def test_other_strings_refused_however_split(stream, commands, error, lane):
    """Redis takes bulk strings only as request elements; hiredis hands simple (+), verbatim (=) and
    big-number (() strings back as bytes. Read whole, cut in two anywhere, or a byte a read."""
    assert feed_all(stream, lane=lane) == (commands, error)
    for cut in range(1, len(stream)):
        assert feed_all(stream[:cut], stream[cut:], lane=lane) == (commands, error), cut
    assert feed_all(*[stream[i : i + 1] for i in range(len(stream))], lane=lane) == (commands, error)


def _element(rng) -> bytes:
    """One request element: mostly a bulk, else a type Redis refuses there (some hiredis reads as bytes)."""
    text = rng.choice([b"", b"+", b"a", b"(1", b"=", b"0123456789", b"txt:abcdefgh"])
    kind = rng.choices(["bulk", "simple", "bignum", "verbatim", "trailer", "nested"], [12, 2, 1, 1, 1, 1])[0]
    if kind == "simple":
        return b"+%s\r\n" % text.replace(b"\r", b"")
    if kind == "bignum":
        return b"(%d\r\n" % rng.randrange(-99, 10**12)
    if kind == "verbatim":
        return b"=%d\r\ntxt:%s\r\n" % (len(text) + 4, text)
    if kind == "trailer":
        return b"$%d\r\n%sxx" % (len(text), text)
    if kind == "nested":
        return b"*1\r\n+%s\r\n" % text
    return b"$%d\r\n%s\r\n" % (len(text), text)


def random_stream(rng) -> bytes:
    """A few requests of 1-4 elements each, bulk strings mostly, with others mixed in."""
    parts = []
    for _ in range(rng.randint(1, 4)):
        elements = [b"$4\r\nECHO\r\n"] + [_element(rng) for _ in range(rng.randint(0, 3))]
        parts.append(b"*%d\r\n" % len(elements) + b"".join(elements))
    return b"".join(parts)


def test_random_mixes_parse_the_same_however_split():
    """Whole, on either lane, and cut at random points: the same commands and the same error.
    (The reference, one byte a read, is Redis's answer: tests/test_protocol_server.py checks it.)"""
    rng = random.Random(25)
    for _ in range(1500):
        stream = random_stream(rng)
        want = feed_all(*[stream[i : i + 1] for i in range(len(stream))])
        for lane in (False, True):
            assert feed_all(stream, lane=lane) == want, stream
            cuts = sorted(rng.sample(range(1, len(stream)), min(rng.randint(1, 3), len(stream) - 1)))
            chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
            assert feed_all(*chunks, lane=lane) == want, (stream, cuts)


# What the size check in the reader (`_bulks_only`) rests on: hiredis's reading, tested, not assumed.


def _hiredis_element(element: bytes):
    """What hiredis makes of `ECHO <element>`: the element, or the exception it raises."""
    reader = hiredis.Reader()
    reader.feed(b"*2\r\n$4\r\nECHO\r\n" + element)
    try:
        got = reader.gets()
    except Exception as exc:  # noqa: BLE001 - any refusal will do
        return exc
    return got[1] if type(got) is list else got


def test_hiredis_reads_only_four_types_as_bytes():
    """Only '$' '+' '(' '=' elements come back as bytes: any other type fails the join that checks arguments."""
    bodies = [b"1\r\nx\r\n", b"5\r\ntxt:a\r\n", b"12\r\n", b"x\r\n", b"\r\n", b"-1\r\n", b"0\r\n"]
    as_bytes = {kind for kind in range(256) for body in bodies if type(_hiredis_element(bytes([kind]) + body)) is bytes}
    assert as_bytes == set(b"$+(=")


def test_hiredis_keeps_every_byte_of_these_strings_but_the_type():
    """The reader's check counts '+' '=' '(' in the data and in the arguments: hiredis refuses them in a
    header (no sign in a length), and keeps the text of a simple, big-number or verbatim string as it is,
    dropping only the type byte (and a verbatim's 4-byte content type)."""
    for header in (b"$+4", b"$4+", b"$=4", b"$(4", b"$04", b"$-0"):
        assert isinstance(_hiredis_element(header + b"\r\nPING\r\n"), hiredis.ProtocolError), header
    for header in (b"*+1", b"*1+", b"*=1", b"*(1", b"*01"):
        reader = hiredis.Reader()
        reader.feed(header + b"\r\n$4\r\nPING\r\n")
        with pytest.raises(hiredis.ProtocolError):
            reader.gets()
    assert isinstance(_hiredis_element(b"=+9\r\ntxt:a+=(b\r\n"), hiredis.ProtocolError)
    assert _hiredis_element(b"++a=(\r\n") == b"+a=("
    assert _hiredis_element(b"=9\r\ntxt:a+=(b\r\n") == b"a+=(b"
    assert _hiredis_element(b"(-12\r\n") == b"-12"
    assert isinstance(_hiredis_element(b"(+12\r\n"), hiredis.ProtocolError)  # a big number's text: digits and a '-'
