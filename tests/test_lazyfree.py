"""server/lazyfree.py in process: a flushed database is freed a bounded batch per event-loop turn,
never in one go (what keeps FLUSHALL of a big keyspace from holding every other client)."""

from __future__ import annotations

import server.commands  # noqa: F401  (registers the command table)
from server import lazyfree
from server.server import Server


class TurnLoop:
    """An event loop's call_soon, run by hand one turn at a time."""

    def __init__(self) -> None:
        self.soon: list = []

    def call_soon(self, callback, *args) -> None:
        self.soon.append((callback, args))

    def turn(self) -> int:
        ready, self.soon = self.soon, []
        for callback, args in ready:
            callback(*args)
        return len(ready)


def test_a_flushed_table_is_freed_a_batch_per_turn_once_the_budget_is_spent(monkeypatch):
    monkeypatch.setattr(lazyfree, "SLICE_SECONDS", 0.0)  # every turn's budget is spent after one batch
    server = Server()
    server.loop = TurnLoop()
    keys = 10 * lazyfree._BATCH
    server.lazyfree.free({b"k%d" % i: b"v" for i in range(keys)}, {b"k0": 1})
    assert server.lazyfree.pending == keys and server.lazyfree.freed == 0  # nothing freed inside the command
    turns = 0
    while server.loop.turn():
        turns += 1
        assert server.lazyfree.freed == min(keys, turns * lazyfree._BATCH)  # one batch a turn
    assert server.lazyfree.pending == 0 and server.lazyfree.freed == keys and not server.lazyfree.tables
    assert turns >= 10
