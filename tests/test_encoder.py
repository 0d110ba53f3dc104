"""Reply encoding: the packed stream-range shape writes what the generic arrays write."""

import pytest

from protocol.encoder import encode
from protocol.reply import NULL_ARRAY, Entries


@pytest.mark.parametrize("resp", [2, 3])
def test_entries_encode_like_nested_arrays(resp):
    pairs = [
        [b"1-0", [b"sensor-id", b"1234", b"temperature", b"10.5"]],
        [b"2-0", [b"", b"\r\n binary \x00"]],
        [b"3-0", NULL_ARRAY],  # XREADGROUP history: a deleted entry's nil body
        [b"4-0", None],
    ]
    generic = encode([list(pair) for pair in pairs], resp)
    assert encode(Entries(pairs), resp) == generic
    assert generic.startswith(b"*4\r\n*2\r\n$3\r\n1-0\r\n*4\r\n$9\r\nsensor-id\r\n")


def test_empty_entries():
    assert encode(Entries(), 2) == b"*0\r\n" == encode(Entries(), 3)
