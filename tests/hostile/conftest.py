"""The pair every hostile-input comparison runs on: Millrace and Debian's redis-server 7.0.15 (the issue measured 7.0)."""

from __future__ import annotations

import pytest

from tests.servers import DEBIAN_VERSION, require_redis, start_millrace, start_redis


@pytest.fixture(scope="module")
def servers():
    require_redis(DEBIAN_VERSION)
    procs = []
    try:
        procs.append(start_millrace())
        procs.append(start_redis(version=DEBIAN_VERSION))
        yield procs
    finally:
        for proc in procs:
            proc.stop()
