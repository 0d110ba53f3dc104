"""Redis 8 stream state through DEBUG RELOAD, Redis's own test cases through a real server: the `XSETID ...
ENTRIESADDED` clamp of groups' entries-read (redis#15489, after Redis 8.2.3), and ACKED's protection."""

from __future__ import annotations

import pytest

from tests.servers import start_millrace


@pytest.fixture(scope="module")
def debug_server():
    proc = start_millrace("--enable-debug-command", "yes")
    yield proc
    proc.stop()


def test_entriesadded_below_entries_read_clamps_the_groups(debug_server):
    r = debug_server.client(decode_responses=True)
    r.flushall()
    for i in range(1, 11):
        r.xadd("s", {"f": "v"}, id=f"{i}-0")
    r.xgroup_create("s", "g", id="0")
    r.xgroup_create("s", "other", id="0")
    r.xreadgroup("g", "c", {"s": ">"})
    r.xreadgroup("other", "c", {"s": ">"}, count=1)
    r.xtrim("s", maxlen=2, approximate=False)
    r.execute_command("XSETID", "s", "10-0", "ENTRIESADDED", "2")
    groups = {g["name"]: g for g in r.xinfo_groups("s")}
    assert (groups["g"]["entries-read"], groups["g"]["lag"]) == (2, 0)
    assert groups["other"]["entries-read"] == 1  # below entries-added: untouched
    r.execute_command("DEBUG", "RELOAD")
    again = {g["name"]: g for g in r.xinfo_groups("s")}
    assert (again["g"]["entries-read"], again["g"]["lag"]) == (2, 0)
    assert again["other"]["entries-read"] == 1


def test_acked_still_protects_after_reload(debug_server):
    """stream.tcl: after DEBUG RELOAD, ACKED still keeps what a group has pending or has not read."""
    r = debug_server.client(decode_responses=True)
    r.flushall()
    for i in range(1, 6):
        r.xadd("s", {"f": "v"}, id=f"{i}-0")
    r.xgroup_create("s", "g", id="0")
    r.xreadgroup("g", "c", {"s": ">"}, count=3)
    r.xack("s", "g", "1-0")
    r.execute_command("DEBUG", "RELOAD")
    assert r.xdelex("s", "1-0", "2-0", "4-0", ref_policy="ACKED") == [1, 2, 2]
    assert r.xtrim("s", maxlen=0, approximate=False, ref_policy="ACKED") == 0
