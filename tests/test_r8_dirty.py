"""rdb_changes_since_last_save for Redis 8's group writes whose count the spec leaves open (a real server).

XNACK counts one change per ID it NACKed (its reply), as XACK and XCLAIM count
one per ID they changed: Redis's group commands count per entry, and the
count must not depend on how Millrace batches its effects (one XNACK effect
per run of IDs with the same delivery count).
"""

from __future__ import annotations


def changes(client) -> int:
    return client.info("persistence")["rdb_changes_since_last_save"]


def test_xnack_counts_one_change_per_nacked_id(r2):
    ids = [r2.xadd("s", {"f": str(n)}) for n in range(4)]
    r2.xgroup_create("s", "g", "0")
    r2.xreadgroup("g", "c", {"s": ">"})
    before = changes(r2)
    # three pending entries with the same delivery count (one effect), and one ID not pending
    assert r2.execute_command("XNACK", "s", "g", "FAIL", "IDS", "4", ids[0], ids[1], ids[2], "9-9") == 3
    assert changes(r2) == before + 3
    before = changes(r2)
    assert r2.execute_command("XNACK", "s", "g", "SILENT", "IDS", "1", "9-9") == 0
    assert changes(r2) == before  # nothing NACKed, nothing changed
