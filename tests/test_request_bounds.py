"""RequestBounds (protocol/reader.py) finds where each request ends, however reads cut the stream.

A client before AUTH has its reads cut at the end of each request that may authenticate
(server/client.py): a wrong end would hand the reader half a request. Random streams of multibulk
requests (payloads full of newlines and of "auth"), null and empty arrays and inline lines, cut at
random places, against the ends known from building them.
"""

from __future__ import annotations

import random

import pytest

from protocol.reader import RequestBounds
from tests.rawclient import encode_command


def request(rnd: random.Random) -> bytes:
    kind = rnd.random()
    if kind < 0.1:
        return rnd.choice([b"*0\r\n", b"*-1\r\n"])
    if kind < 0.35:
        words = [rnd.choice([b"PING", b"AUTH", b"hello", b"x" * rnd.randrange(1, 40)]) for _ in range(rnd.randrange(1, 4))]
        return b" ".join(words) + rnd.choice([b"\r\n", b"\n"])
    args = [rnd.choice([b"AUTH", b"SET", b"\n" * rnd.randrange(50), b"auth\r\nhello", bytes(rnd.randrange(256) for _ in range(rnd.randrange(30)))])
            for _ in range(rnd.randrange(1, 12))]  # fmt: skip
    return encode_command(*args)


@pytest.mark.parametrize("seed", range(20))
def test_request_ends_as_built(seed):
    rnd = random.Random(seed)
    requests = [request(rnd) for _ in range(rnd.randrange(1, 60))]
    stream = b"".join(requests)
    expected, at = [], 0
    for one in requests:
        at += len(one)
        expected.append(at)
    cuts = sorted(set(rnd.sample(range(1, len(stream)), min(len(stream) - 1, rnd.randrange(0, 30)))))
    bounds, found = RequestBounds(), []
    for start, stop in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        chunk, pos = stream[start:stop], 0
        while pos < len(chunk):
            end = bounds.end(chunk, pos)
            if end < 0:
                break
            found.append(start + end)
            pos = end
    assert found == expected
    assert bounds.at_boundary
