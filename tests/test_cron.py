"""The periodic task (server/main.py's _cron): one failing task stops neither the others nor the next tick.

A task that raises (a full disk under a rewrite, a bug) used to end the cron
for good: no more active expiry, saves, fsyncs, replication pings or timeouts.
"""

from __future__ import annotations

import logging

from server import main


class Loop:
    def __init__(self) -> None:
        self.scheduled: list = []

    def call_later(self, delay, callback, *args) -> None:
        self.scheduled.append((delay, callback, args))


class Server:
    def __init__(self) -> None:
        self.config = {"hz": 10, "dynamic-hz": True}
        self.loop = Loop()
        self.clients: dict = {}
        self.hz = 10

    def clock(self) -> int:
        return 1234


def test_a_failing_task_stops_neither_the_others_nor_the_next_tick(monkeypatch, caplog):
    ran = []

    def full_disk(server, now):
        raise OSError(28, "No space left on device")

    def later(server, now):
        ran.append(now)

    monkeypatch.setattr(main, "CRON_TASKS", (full_disk, later))
    server = Server()
    with caplog.at_level(logging.ERROR):
        main._cron(server)
    assert ran == [1234]
    assert server.loop.scheduled == [(0.1, main._cron, (server,))]
    assert "full_disk" in caplog.text and "No space left on device" in caplog.text


def test_the_next_tick_is_scheduled_even_when_the_clock_fails(monkeypatch):
    server = Server()

    def broken_clock():
        raise RuntimeError("boom")

    server.clock = broken_clock
    try:
        main._cron(server)
    except RuntimeError:
        pass
    assert server.loop.scheduled == [(0.1, main._cron, (server,))]


def test_every_periodic_task_is_in_the_list():
    """Active expiry, stream housekeeping, measures, clients, persistence, replication, retention, refusals,
    the client-side caching table's limit, the end of a shutdown's wait for its replicas."""
    names = [f"{task.__module__.rsplit('.', 1)[-1]}.{task.__name__}" for task in main.CRON_TASKS]
    assert names == [
        "main._active_expire", "main._streams", "main._measure", "main._clients", "main._persistence", "main._replication",
        "main._retention", "main._refusal", "main._tracking", "shutdown.cron",
    ]  # fmt: skip


def test_the_next_tick_comes_at_the_rate_dynamic_hz_sets(monkeypatch):
    """dynamic-hz: with hz 1 and 450 clients the cron runs at 4 a second (450 // 2 > 200, 450 // 4 is
    not): the next tick comes a quarter second later, and with dynamic-hz no a second later."""
    monkeypatch.setattr(main, "CRON_TASKS", ())
    server = Server()
    server.config.update({"hz": 1})
    server.clients = dict.fromkeys(range(450))
    main._cron(server)
    assert server.hz == 4 and server.loop.scheduled == [(0.25, main._cron, (server,))]
    server.config["dynamic-hz"] = False
    server.loop.scheduled.clear()
    main._cron(server)
    assert server.loop.scheduled == [(1.0, main._cron, (server,))]


def test_adapt_hz_doubles_while_more_than_200_clients_share_a_tick():
    """Redis's serverCron: `while (clients / hz > MAX_CLIENTS_PER_CLOCK_TICK) hz *= 2`, capped at 500."""
    assert [main.adapt_hz(1, clients, True) for clients in (200, 201, 401, 403, 1607)] == [1, 2, 2, 4, 8]  # (integer division)
    assert main.adapt_hz(10, 10**7, True) == 500
    assert main.adapt_hz(1, 10**6, False) == 1
