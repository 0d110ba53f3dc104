"""COMMAND DOCS of the Redis 8 stream commands and options, compared with Redis 8.2.3 (what redis-cli's hints read)."""

from __future__ import annotations

import pytest


def docs(proc, protocol: int, name: str) -> dict:
    client = proc.client(protocol=protocol)
    for callback in ("COMMAND", "COMMAND DOCS"):
        client.response_callbacks.pop(callback, None)
    reply = client.execute_command("COMMAND", "DOCS", name)
    client.close()
    if isinstance(reply, list):  # RESP2: name, docs as a flat list
        reply = dict(zip(reply[0::2], reply[1::2], strict=True))
    return reply[name.encode()]


@pytest.mark.parametrize("protocol", [2, 3])
@pytest.mark.parametrize("name", ["xdelex", "xackdel", "xtrim"])
def test_docs_match_redis(server, oracle_server, protocol, name):
    assert docs(server, protocol, name) == docs(oracle_server, protocol, name)


def test_xadd_documents_the_reference_policies(server, oracle_server):
    """XADD's docs come from its syntax line (IDMP is newer than the oracle): the policies are there, in order."""

    def condition(arguments) -> list:
        for argument in arguments:
            fields = argument if isinstance(argument, dict) else dict(zip(argument[0::2], argument[1::2], strict=True))
            if b"KEEPREF" in repr(fields).encode():
                return [dict(zip(a[0::2], a[1::2], strict=True)).get(b"token") if isinstance(a, list) else a[b"token"] for a in fields[b"arguments"]]
        return []

    ours = docs(server, 3, "xadd")[b"arguments"]
    assert condition(ours) == condition(docs(oracle_server, 3, "xadd")[b"arguments"]) == [b"KEEPREF", b"DELREF", b"ACKED"]
