"""Issue 21: Millrace reports Redis 8.10's version, the number clients gate stream features on.

redis-py and other clients decide from `redis_version` (INFO) and HELLO's `version`
whether to offer XDELEX, XACKDEL, CLAIM, IDMP, XNACK, MAXCOUNT...: the literal is
the point of the test, so it is written out, not imported.
"""

from __future__ import annotations

EXPECTED = "8.10.1"  # the newest 8.10 patch release named in the spec (shared/specs/redis-8-streams.md §0)


def test_info_reports_redis_8_10(server):
    client = server.client()
    assert client.info("server")["redis_version"] == EXPECTED


def test_hello_reports_redis_8_10(server):
    client = server.client(protocol=3)
    hello = client.execute_command("HELLO", "3")
    assert hello[b"version"] == EXPECTED.encode()
    hello2 = server.client(protocol=2).execute_command("HELLO", "2")
    assert hello2[hello2.index(b"version") + 1] == EXPECTED.encode()
