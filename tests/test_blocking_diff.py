"""Blocked XREAD/XREADGROUP, differentially: what a waiting client gets when its key changes under it.

Redis 7.2+ re-run a blocked reader when its key is deleted, retyped or its
group destroyed (XREADGROUP then answers NOGROUP or WRONGTYPE; Redis 7.0
answered UNBLOCKED or kept waiting), so Redis 8.2.3 is the spec. Each case
blocks one client, lets another run some commands, and ends with CLIENT
UNBLOCK, so that a client still waiting answers too (a nil, as a timeout);
the waiter's reply and every reply the other client got are compared.
"""

from __future__ import annotations

import pytest

from tests.rawclient import RawConn, encode_command
from tests.test_streams_blocking import wait_blocked

GROUP_SETUP = [["XADD", "s", "1-0", "f", "v"], ["XGROUP", "CREATE", "s", "g", "$"]]
XREADGROUP = ["XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">"]
XREAD = ["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]

CASES = {
    "group-xadd": (GROUP_SETUP, XREADGROUP, [["XADD", "s", "2-0", "f", "w"]]),
    "group-del": (GROUP_SETUP, XREADGROUP, [["DEL", "s"]]),
    "group-del-then-xadd": (GROUP_SETUP, XREADGROUP, [["MULTI"], ["DEL", "s"], ["XADD", "s", "2-0", "f", "w"], ["EXEC"]]),
    "group-retyped": (GROUP_SETUP, XREADGROUP, [["MULTI"], ["DEL", "s"], ["SET", "s", "x"], ["EXEC"]]),
    "group-destroyed": (GROUP_SETUP, XREADGROUP, [["XGROUP", "DESTROY", "s", "g"]]),
    "group-destroyed-and-recreated": (
        GROUP_SETUP, XREADGROUP,
        [["MULTI"], ["XGROUP", "DESTROY", "s", "g"], ["XGROUP", "CREATE", "s", "g", "0"], ["EXEC"]],
    ),
    "group-flushall": (GROUP_SETUP, XREADGROUP, [["FLUSHALL"]]),
    "group-renamed-away": (GROUP_SETUP, XREADGROUP, [["RENAME", "s", "t"]]),
    "group-consumer-deleted": (GROUP_SETUP, XREADGROUP, [["XGROUP", "DELCONSUMER", "s", "g", "c"], ["XADD", "s", "2-0", "f", "w"]]),
    "group-setid-back": (GROUP_SETUP, XREADGROUP, [["XGROUP", "SETID", "s", "g", "0"]]),
    "group-noack": (GROUP_SETUP, ["XREADGROUP", "GROUP", "g", "c", "NOACK", "BLOCK", "0", "STREAMS", "s", ">"],
                    [["XADD", "s", "2-0", "f", "w"], ["XPENDING", "s", "g"]]),
    "group-unblock-error": (GROUP_SETUP, XREADGROUP, [["UNBLOCK", "ERROR"]]),
    "xread-del": (GROUP_SETUP, XREAD, [["DEL", "s"]]),
    "xread-retyped": (GROUP_SETUP, XREAD, [["MULTI"], ["DEL", "s"], ["SET", "s", "x"], ["EXEC"]]),
    "xread-trimmed-by-its-xadd": (GROUP_SETUP, XREAD, [["XADD", "s", "MAXLEN", "0", "2-0", "f", "w"]]),
    "xread-plus-on-empty": ([["XADD", "s", "1-0", "f", "v"], ["XDEL", "s", "1-0"]], ["XREAD", "BLOCK", "0", "STREAMS", "s", "+"],
                            [["XADD", "s", "2-0", "f", "w"]]),
    "xread-nokey-then-xadd": ([], XREAD, [["XADD", "s", "5-0", "f", "w"]]),
    "xread-unblock-error": (GROUP_SETUP, XREAD, [["UNBLOCK", "ERROR"]]),
}  # fmt: skip


def play(port: int, setup: list, blocking: list, actions: list, protocol: int) -> list:
    """The case on one server: every reply of the other client, then the waiter's, then a PING after it."""
    admin, waiter = RawConn(port), RawConn(port)
    try:
        for conn in (admin, waiter):
            conn.call("HELLO", str(protocol))
        admin.call("FLUSHALL")
        for argv in setup:
            admin.call(*argv)
        client_id = waiter.call("CLIENT", "ID")
        waiter.send(encode_command(*blocking))
        wait_blocked(admin, 1)
        replies = []
        for argv in [*actions, ["UNBLOCK"]]:
            if argv[0] == "UNBLOCK":
                argv = ["CLIENT", "UNBLOCK", client_id, *argv[1:]]
            replies.append(admin.call(*argv))
        replies.append(waiter.read())
        replies.append(waiter.call("PING"))
        return [repr(reply) for reply in replies]  # repr: hiredis errors compare by their text
    finally:
        admin.close()
        waiter.close()


@pytest.mark.parametrize("protocol", [2, 3], ids=["resp2", "resp3"])
@pytest.mark.parametrize("case", list(CASES))
def test_blocked_reader_released_as_redis_releases_it(server, oracle_server, case, protocol):
    setup, blocking, actions = CASES[case]
    assert play(server.port, setup, blocking, actions, protocol) == play(oracle_server.port, setup, blocking, actions, protocol)
