"""Redis's pre-AUTH request limits (10 arguments, 16 KB a bulk) against Redis 8.2.3, request by request.

Redis parses one request at a time and judges each by the client's state at that moment: a
request after a successful AUTH in the same write is free of the limits, one after a failed
AUTH is not, and an inline command has only the inline line's limit. Each case sends the same
bytes to both servers (in one write, or cut where it says) and compares what comes back and
whether the link was closed.
"""

from __future__ import annotations

import pytest

from tests.rawclient import RawConn, encode_command, probe
from tests.servers import millrace_and_redis

E = encode_command
PASSWORD = "pw"
TWELVE = E("DEL", *[f"k{i}" for i in range(11)])  # 12 arguments: over the 10 before AUTH
BIG = E("SET", "k", "v" * 20000)  # a 20,000-byte bulk: over the 16 KB before AUTH


@pytest.fixture(scope="module")
def pair():
    for servers in millrace_and_redis():
        for proc in servers:
            conn = RawConn(proc.port)
            conn.call("CONFIG", "SET", "requirepass", PASSWORD)
            conn.close()
        yield servers


def both(pair, *chunks: bytes) -> tuple:
    ours, theirs = (probe(proc.port, *chunks, password=PASSWORD) for proc in pair)
    assert ours == theirs
    return theirs


CASES = {
    # a successful AUTH lifts the limits for the very next request, in the same write or cut after it
    "auth, then 12 arguments": (E("AUTH", PASSWORD) + TWELVE,),
    "auth, then a 20 KB bulk": (E("AUTH", PASSWORD) + BIG + E("STRLEN", "k"),),
    "auth, then 12 arguments cut in the middle": ((E("AUTH", PASSWORD) + TWELVE)[:60], (E("AUTH", PASSWORD) + TWELVE)[60:]),
    "auth, then a 20 KB bulk cut in its header": ((E("AUTH", PASSWORD) + BIG)[:62], (E("AUTH", PASSWORD) + BIG)[62:]),
    "auth, then a 200 KB bulk (more than one read)": (E("AUTH", PASSWORD) + E("SET", "k", "v" * 200_000) + E("STRLEN", "k"),),
    "auth as default, then 12 arguments": (E("AUTH", "default", PASSWORD) + TWELVE,),
    "inline auth, then a 20 KB bulk": (b"AUTH " + PASSWORD.encode() + b"\r\n" + BIG,),
    # a failed one does not
    "wrong auth, then 12 arguments": (E("AUTH", "wrong") + TWELVE,),
    "wrong auth, then a 20 KB bulk": (E("AUTH", "wrong") + BIG,),
    "wrong inline auth, then 12 arguments": (b"AUTH wrong\r\n" + TWELVE,),
    "wrong hello auth, then 12 arguments": (E("HELLO", "2", "AUTH", "default", "wrong") + TWELVE,),
    "wrong auth, then a 20 KB bulk cut in its header": ((E("AUTH", "wrong") + BIG)[:65], (E("AUTH", "wrong") + BIG)[65:]),
    "auth, its name cut by the read, then 12 arguments": (E("AUTH", PASSWORD)[:10], E("AUTH", PASSWORD)[10:] + TWELVE),
    "inline auth, its name cut by the read, then 12 arguments": (b"AU", b"TH " + PASSWORD.encode() + b"\r\n" + TWELVE),
    # inline commands have only the inline limit
    "inline, 22 arguments": (b"PING" + b" a" * 21 + b"\r\n",),
    "inline, one 30,000-byte argument": (b"PING " + b"a" * 30000 + b"\r\n",),
    "inline auth with 11 arguments": (b"AUTH" + b" x" * 10 + b"\r\n",),
    # the name spelled inside other requests changes nothing
    "auth spelled in a payload, then 12 arguments": (E("ECHO", "auth hello\nauth") + TWELVE,),
}


@pytest.mark.parametrize("chunks", CASES.values(), ids=CASES.keys())
def test_pre_auth_limits_request_by_request(pair, chunks):
    both(pair, *chunks)
