"""`XSETID ... ENTRIESADDED` below a group's entries-read clamps it (redis#15489, after Redis 8.2.3), and the
clamped counter survives a reload: Redis's own test case, through a real server."""

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
