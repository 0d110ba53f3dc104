"""Inline requests are split as Redis's sdssplitargs splits them: any isspace() byte separates
tokens, but only space, tab, CR, LF and NUL end one, so a \\v or \\f inside a token is kept (Millrace
cut the token there). Each case goes to Millrace and Debian's redis-server 7.0.15."""

from __future__ import annotations

import pytest

from tests.rawclient import probe

CASES = [
    b"ECHO a\x0bb\r\n",
    b"ECHO a\x0cb\r\n",
    b"ECHO a\x0b\r\n",
    b"ECHO \x0b\x0ca\r\n",
    b'ECHO "a"\x0b\r\n',
    b"ECHO 'a'\x0cb\r\n",
    b"\x0bPING\x0c\r\n",
    b"ECHO a\tb\r\n",
]


@pytest.mark.parametrize("line", CASES)
def test_inline_tokens_split_as_redis_splits_them(servers, line):
    ours, redis = (probe(proc.port, line) for proc in servers)
    assert ours == redis
