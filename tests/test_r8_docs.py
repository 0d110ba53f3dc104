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


def without_idmp(reply: dict) -> dict:
    """XADD's docs with the IDMP options and their history entry left out (the oracle predates them)."""
    reply = dict(reply)
    reply[b"arguments"] = [a for a in reply[b"arguments"] if (a[b"name"] if isinstance(a, dict) else a[1]) != b"idmp"]
    reply[b"history"] = [h for h in reply[b"history"] if h[0] != b"8.6.0"]
    return reply


@pytest.mark.parametrize("protocol", [2, 3])
def test_xadd_docs_match_redis_but_for_idmp(server, oracle_server, protocol):
    """Every argument Redis 8.2.3 has (names, types, tokens, flags, since), in its order; IDMP after the policies."""
    ours = docs(server, protocol, "xadd")
    if protocol == 2:
        ours = dict(zip(ours[0::2], ours[1::2], strict=True))
        theirs = docs(oracle_server, protocol, "xadd")
        theirs = dict(zip(theirs[0::2], theirs[1::2], strict=True))
    else:
        theirs = docs(oracle_server, protocol, "xadd")
    assert without_idmp(ours) == theirs


def test_xadd_docs_idmp_options(server):
    """`[IDMPAUTO producer-id | IDMP producer-id idempotent-id]`: one optional choice, IDMPAUTO with one string, IDMP with two."""
    arguments = docs(server, 3, "xadd")[b"arguments"]
    assert [a[b"name"] for a in arguments] == [b"key", b"nomkstream", b"condition", b"idmp", b"trim", b"id-selector", b"data"]
    idmp = arguments[3]
    assert (idmp[b"type"], idmp[b"flags"], idmp[b"since"]) == (b"oneof", [b"optional"], b"8.6.0")
    auto, explicit = idmp[b"arguments"]
    assert (auto[b"token"], auto[b"type"], auto[b"display_text"]) == (b"IDMPAUTO", b"string", b"producer-id")
    assert (explicit[b"token"], explicit[b"type"]) == (b"IDMP", b"block")
    assert [(a[b"display_text"], a[b"type"]) for a in explicit[b"arguments"]] == [(b"producer-id", b"string"), (b"idempotent-id", b"string")]
