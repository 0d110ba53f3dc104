"""The pair every hostile-input comparison runs on: Millrace and Debian's redis-server 7.0.15 (the issue measured 7.0)."""

from __future__ import annotations

import pytest

from tests.servers import DEBIAN_VERSION, millrace_and_redis


@pytest.fixture(scope="module")
def servers():
    yield from millrace_and_redis(DEBIAN_VERSION)
