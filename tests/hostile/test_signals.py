"""SIGHUP is ignored, as Redis ignores it: a closed terminal or a stray `kill -HUP` must not stop
the server (it died at once, with no log line and no shutdown hooks, which would lose data)."""

from __future__ import annotations

import signal

from tests.servers import DEBIAN_VERSION, require_redis, start_millrace, start_redis


def test_sighup_is_ignored():
    require_redis(DEBIAN_VERSION)
    for proc in (start_millrace(), start_redis(version=DEBIAN_VERSION)):
        try:
            with proc.client() as client:
                client.set("k", "v")
                for _ in range(3):
                    proc.proc.send_signal(signal.SIGHUP)
                # the signal is delivered before the server can read this request: its default action would end it first
                assert client.get("k") == b"v"
                assert proc.proc.poll() is None, proc.name
        finally:
            proc.stop()
