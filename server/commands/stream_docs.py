"""COMMAND DOCS arguments of Redis 8's stream commands, declared as Redis's JSON has them.

The syntax-line parser (server/syntax.py) cannot know Redis's argument names
(`condition` for KEEPREF|DELREF|ACKED, `ids` for the IDS block, `strategy`,
`operator`), so these trees are written out, copied in shape from Redis 8.2.3's
COMMAND DOCS (tests/test_r8_docs.py compares them with the oracle).
"""

from __future__ import annotations

from ..syntax import DECLARED, HISTORY, Arg


def _token(name: str, token: str, since: str | None = None) -> Arg:
    return Arg(name, "pure-token", token=token, since=since)


def _condition() -> Arg:
    """[KEEPREF | DELREF | ACKED] (8.2)."""
    return Arg("condition", "oneof", flags=["optional"], arguments=[
        _token("keepref", "KEEPREF"), _token("delref", "DELREF"), _token("acked", "ACKED"),
    ])  # fmt: skip


def _ids() -> Arg:
    """IDS numids id [id ...]."""
    return Arg("ids", "block", token="IDS", arguments=[Arg("numids", "integer"), Arg("id", "string", flags=["multiple"])])


def _trim(optional: bool) -> Arg:
    """<MAXLEN | MINID> [= | ~] threshold [LIMIT count]."""
    return Arg("trim", "block", flags=["optional"] if optional else [], arguments=[
        Arg("strategy", "oneof", arguments=[_token("maxlen", "MAXLEN"), _token("minid", "MINID", since="6.2.0")]),
        Arg("operator", "oneof", flags=["optional"], arguments=[_token("equal", "="), _token("approximately", "~")]),
        Arg("threshold", "string"),
        Arg("count", "integer", token="LIMIT", since="6.2.0", flags=["optional"]),
    ])  # fmt: skip


DECLARED["xdelex"] = [Arg("key", "key"), _condition(), _ids()]
DECLARED["xackdel"] = [Arg("key", "key"), Arg("group", "string"), _condition(), _ids()]
_xtrim = _trim(optional=False)
_xtrim.arguments.append(_condition())
DECLARED["xtrim"] = [Arg("key", "key"), _xtrim]

_POLICIES_ADDED = ("8.2.0", "Added the `KEEPREF`, `DELREF` and `ACKED` options.")
HISTORY["xtrim"] = [("6.2.0", "Added the `MINID` trimming strategy and the `LIMIT` option."), _POLICIES_ADDED]
HISTORY["xadd"] = [
    ("6.2.0", "Added the `NOMKSTREAM` option, `MINID` trimming strategy and the `LIMIT` option."),
    ("7.0.0", "Added support for the `<ms>-*` explicit ID form."),
    _POLICIES_ADDED,
]
HISTORY["xread"] = [("8.10.0", "Added the `MAXCOUNT` and `MAXSIZE` options.")]
HISTORY["xreadgroup"] = [("8.4.0", "Added the `CLAIM` option."), ("8.10.0", "Added the `MAXCOUNT` and `MAXSIZE` options.")]


def _idmp() -> Arg:
    """[IDMPAUTO producer-id | IDMP producer-id idempotent-id] (8.6): names as redis.io's syntax line shows them."""
    return Arg("idmp", "oneof", flags=["optional"], since="8.6.0", arguments=[
        Arg("producer-id", "string", token="IDMPAUTO"),
        Arg("idmp-block", "block", token="IDMP", arguments=[Arg("producer-id", "string"), Arg("idempotent-id", "string")]),
    ])  # fmt: skip


# XADD as Redis 8.2.3's COMMAND DOCS gives it (tests/test_r8_docs.py), with 8.6's IDMP options after the policies.
DECLARED["xadd"] = [
    Arg("key", "key"),
    Arg("nomkstream", "pure-token", token="NOMKSTREAM", since="6.2.0", flags=["optional"]),
    _condition(),
    _idmp(),
    _trim(optional=True),
    Arg("id-selector", "oneof", arguments=[_token("auto-id", "*"), Arg("id", "string")]),
    Arg("data", "block", flags=["multiple"], arguments=[Arg("field", "string"), Arg("value", "string")]),
]
HISTORY["xadd"].append(("8.6.0", "Added the `IDMPAUTO` and `IDMP` options."))
