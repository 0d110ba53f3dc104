"""maxmemory is checked before every write command, against the memory the data uses.

The issue: the limit was compared with the process RSS ten times a second, so one pipeline of
60,000 × 1 KB XADDs with the limit 20 MB above use was accepted whole (Redis stopped at 20,353).
Now each denyoom command is checked first, against the memory at start-up plus the data's size
(MEMORY USAGE of every key, measured once a second, what each admitted write's arguments add in
between). The same pipeline goes to Millrace and to Redis 8.2.3, each with its limit 5 MB above its
own figure (Millrace's start-up memory with no data, Redis's used_memory).
"""

from __future__ import annotations

import time

import pytest
import redis

from tests.servers import millrace_and_redis

OOM = "command not allowed when used memory > 'maxmemory'."  # redis-py drops the "OOM " code


@pytest.fixture(scope="module")
def servers():
    yield from millrace_and_redis()


def _pipeline_until_oom(proc, count: int, margin: int) -> tuple[int, list[str]]:
    with proc.client() as client:
        info = client.info("memory")
        base = info["used_memory_startup"] if proc.name == "millrace" else info["used_memory"]
        client.config_set("maxmemory", base + margin)
        pipe = client.pipeline(transaction=False)
        for _ in range(count):
            pipe.xadd("s", {"f": "x" * 1000})
        replies = pipe.execute(raise_on_error=False)
        errors = sorted({str(reply) for reply in replies if isinstance(reply, Exception)})
        accepted = sum(1 for reply in replies if not isinstance(reply, Exception))
        return accepted, errors


def test_one_pipeline_stops_at_the_limit_as_redis_does(servers):
    outcomes = {}
    try:
        for proc in servers:
            outcomes[proc.name] = _pipeline_until_oom(proc, 20_000, 5 << 20)
    finally:
        for proc in servers:
            with proc.client() as client:
                client.config_set("maxmemory", 0)
                client.delete("s")
    (millrace, m_errors), (redis_, r_errors) = outcomes["millrace"], outcomes["redis"]
    assert m_errors == r_errors == [OOM]
    assert 0.85 * redis_ <= millrace <= 1.15 * redis_, (millrace, redis_)


def test_reads_and_deletes_still_run_and_a_deletion_frees_room(servers):
    millrace = servers[0]
    try:
        accepted, errors = _pipeline_until_oom(millrace, 8_000, 2 << 20)
        assert errors == [OOM] and accepted < 8_000
        with millrace.client() as client:
            with pytest.raises(redis.exceptions.OutOfMemoryError):
                client.set("k", "v")
            assert client.xlen("s") == accepted
            assert client.delete("s") == 1
            time.sleep(1.5)  # the next measure sees the stream gone
            assert client.set("k", "v")
    finally:
        with millrace.client() as client:
            client.config_set("maxmemory", 0)
            client.delete("s", "k")
