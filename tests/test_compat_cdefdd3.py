"""Files written by the release before the Redis 8 work (commit cdefdd3) load into today's server unchanged.

ARCHITECTURE.md rule 7: every new piece of state extends the snapshot, and a
test loads the previous version. tests/data/compat_cdefdd3 holds that server's
dump.mpk, its AOF directory (a preamble-less base: the old rewrite's command
forms; an increment: the old effect forms) and expected.json, the old server's
own replies captured right after SAVE (see tests/compat_state.py for the
workload). Today's server must report exactly that state, whichever file it
loads; the only differences allowed are the fields newer releases add to
XINFO, each at its "nothing configured" value.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.compat_state import capture
from tests.servers import start_millrace

DATA = Path(__file__).parent / "data" / "compat_cdefdd3"
EXPECTED = json.loads((DATA / "expected.json").read_text())["state"]

# Fields today's XINFO STREAM FULL adds to what cdefdd3 sent, with the value a
# stream loaded from an old file must show: nothing configured, nothing counted.
NEW_STREAM_FIELDS = {
    "idmp-duration": 100, "idmp-maxsize": 100, "pids-tracked": 0,
    "iids-tracked": 0, "iids-added": 0, "iids-duplicates": 0,
}
NEW_GROUP_FIELDS = {"nacked-count": 0}


@pytest.fixture(scope="module", params=["snapshot", "aof"])
def loaded(request):
    """Today's server started on a copy of the old files (the copy: loading may rewrite them)."""
    work = tempfile.mkdtemp(prefix="compat-load-")
    if request.param == "snapshot":
        shutil.copy(DATA / "dump.mpk", Path(work) / "dump.mpk")
        proc = start_millrace("--appendonly", "no", "--save", "", workdir=work)
    else:
        shutil.copytree(DATA / "appendonlydir", Path(work) / "appendonlydir")
        proc = start_millrace("--appendonly", "yes", "--save", "", workdir=work)
    yield proc
    proc.stop()


def test_recorded_state_is_what_the_workload_made():
    """The fixture itself, stated by hand: what the workload did, so a regenerated fixture is checked too."""
    orders = EXPECTED["0/orders"]
    assert len(orders["xrange"]) == 148  # 150 added, 3 deleted, 1 late add; '~' trims removed nothing
    assert orders["xinfo_full"]["max-deleted-entry-id"] == "1120-0"
    assert orders["xinfo_full"]["entries-added"] == 151
    assert orders["xpending"]["billing"][:3] == [8, "1001-0", "1012-0"]
    assert orders["xpending"]["billing"][3] == [["alice", "2"], ["bob", "5"], ["erin", "1"]]
    assert EXPECTED["3/events"]["xinfo_full"]["last-generated-id"] == "9-9"
    assert EXPECTED["3/events"]["xinfo_full"]["entries-added"] == 12
    assert EXPECTED["0/forever"]["pexpiretime"] == 4102444800000
    assert EXPECTED["3/db3string"]["pexpiretime"] == 4102444800000 - 1
    assert EXPECTED["0/soon"]["value"] == "gone"  # alive at SAVE, expired long before any load


def _without_new_fields(full: dict) -> dict:
    """XINFO STREAM FULL with the fields newer releases add checked and dropped."""
    full = dict(full)
    for name, value in NEW_STREAM_FIELDS.items():
        assert full.pop(name) == value, name
    groups = []
    for group in full["groups"]:
        group = dict(group)
        for name, value in NEW_GROUP_FIELDS.items():
            assert group.pop(name) == value, name
        groups.append(group)
    full["groups"] = groups
    return full


def test_today_reports_the_old_state(loaded):
    state = capture(loaded.client())  # built as tests/compat_state.make built its client
    expected = {k: v for k, v in EXPECTED.items() if k != "0/soon"}
    assert sorted(state) == sorted(expected)  # the expired key is not loaded
    for key, want in expected.items():
        got = dict(state[key])
        if got["type"] == "stream":
            got["xinfo_full"] = _without_new_fields(got["xinfo_full"])
        assert got == want, key


def test_loaded_streams_take_new_writes(loaded):
    """The loaded counters go on: the next ID, entries-added and a group's reads continue from them."""
    client = loaded.client(protocol=2, decode_responses=True)
    client.select(3)
    assert client.xadd("events", {"a": "3"}, id="9-*") == "9-10"
    info = client.xinfo_stream("events")
    assert info["entries-added"] == 13
    assert info["max-deleted-entry-id"] == "7-0"
