"""dynamic-hz against Redis 8.2.3: the cron's rate doubles while more than 200 clients share a tick
(up to 500), INFO's `hz` shows the rate in force and `configured_hz` the setting."""

from __future__ import annotations

import socket
import time

from tests.servers import on_each


def hz_after_a_change(client, before: int, timeout: float = 5.0) -> tuple[int, int]:
    """INFO's (hz, configured_hz) once hz moved from `before` (or the timeout passed: it did not)."""
    deadline = time.monotonic() + timeout
    while True:
        fields = client.info("server")
        if fields["hz"] != before or time.monotonic() > deadline:
            return fields["hz"], fields["configured_hz"]
        time.sleep(0.05)


def story(server) -> list:
    admin = server.client()
    out = [hz_after_a_change(admin, 0)]
    sockets = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(249)]  # 250 clients with admin
    try:
        out.append(hz_after_a_change(admin, 1))  # 250 // 1 > 200: doubled once
        sockets += [socket.create_connection(("127.0.0.1", server.port)) for _ in range(200)]
        out.append(hz_after_a_change(admin, 2))  # 450 // 2 > 200: twice
        admin.config_set("hz", "2")
        out.append(hz_after_a_change(admin, 4, timeout=0))  # in force at once
        out.append(hz_after_a_change(admin, 2))  # then raised at the next tick: 450 // 2 > 200
        admin.config_set("dynamic-hz", "no")
        out.append(hz_after_a_change(admin, 4))  # back to the setting at the next tick
    finally:
        for sock in sockets:
            sock.close()
    admin.config_set("dynamic-hz", "yes")
    out.append(hz_after_a_change(admin, 0, timeout=0))
    return out


def test_dynamic_hz_as_redis():
    found = on_each(story, "--hz", "1")
    assert found["millrace"] == found["redis"]
    assert found["millrace"][1:6] == [(2, 1), (4, 1), (2, 2), (4, 2), (2, 2)]
