"""What an IDMP repeat counts and touches, and what the IDMP maps cost in MEMORY USAGE (a real server).

A repeat (an idempotent XADD that answers the original ID) adds no entry but
changes `iids-duplicates`, a persisted counter: Redis 8.6.2 (redis#14858)
counts it in `rdb_changes_since_last_save` and marks the key with
keyModified(..., 0), which touches no WATCH and wakes no blocked reader.
"""

from __future__ import annotations


def changes(client) -> int:
    return client.info("persistence")["rdb_changes_since_last_save"]


def duplicates(client, key: str = "s") -> int:
    info = client.execute_command("XINFO", "STREAM", key)
    return dict(zip(info[0::2], info[1::2], strict=True))[b"iids-duplicates"]


def test_a_repeat_counts_one_change_and_touches_no_watch(server, r2):
    first = r2.execute_command("XADD", "s", "IDMP", "p", "order-1", "*", "f", "v")
    auto = r2.execute_command("XADD", "s", "IDMPAUTO", "p", "*", "a", "1", "b", "2")
    watcher = server.client(protocol=2)
    try:
        for repeat in (("IDMP", "p", "order-1", "*", "f", "other"), ("IDMPAUTO", "p", "*", "b", "2", "a", "1")):
            before, counted = changes(r2), duplicates(r2)
            watcher.execute_command("WATCH", "s")
            assert r2.execute_command("XADD", "s", *repeat) == (first if repeat[0] == "IDMP" else auto)
            assert changes(r2) == before + 1  # one change, as a plain XADD counts
            assert duplicates(r2) == counted + 1
            watcher.execute_command("MULTI")
            watcher.execute_command("XLEN", "s")
            assert watcher.execute_command("EXEC") == [2]  # the WATCH still holds: the key was not signalled
        # a fresh idempotent add does touch it
        watcher.execute_command("WATCH", "s")
        r2.execute_command("XADD", "s", "IDMP", "p", "order-2", "*", "f", "v")
        watcher.execute_command("MULTI")
        watcher.execute_command("XLEN", "s")
        assert watcher.execute_command("EXEC") is None
    finally:
        watcher.close()


def test_memory_usage_counts_the_idmp_maps(r2):
    """Two streams with the same entries, one of them tracking 300 iids of 200 bytes: MEMORY USAGE tells them apart
    by at least the iids' bytes, and a new IDMP-MAXSIZE (which forgets every iid) gives the bytes back."""
    r2.execute_command("XADD", "tracked", "*", "f", "v")
    r2.execute_command("XCFGSET", "tracked", "IDMP-MAXSIZE", "1000")
    r2.execute_command("XADD", "plain", "*", "f", "v")
    pipe = r2.pipeline(transaction=False)
    for n in range(300):
        pipe.execute_command("XADD", "tracked", "IDMP", "producer", f"{n:0200d}", "*", "f", "v")
        pipe.execute_command("XADD", "plain", "*", "f", "v")
    pipe.execute()
    tracked, plain = r2.memory_usage("tracked"), r2.memory_usage("plain")
    assert tracked - plain >= 300 * 200
    r2.execute_command("XCFGSET", "tracked", "IDMP-MAXSIZE", "5")  # a changed limit forgets the map
    emptied = r2.memory_usage("tracked")
    assert tracked - emptied >= 300 * 200
    assert abs(emptied - plain) < 300 * 200 // 10  # what is left: the entries, as the plain stream's
