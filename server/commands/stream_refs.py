"""Redis 8.2's deletions with a reference policy: XDELEX, XACKDEL, and the effects of policy trims.

The policies (KEEPREF, DELREF, ACKED) are storage/refs.py's. Effects state what
happened, never the request: the entries deleted become `XDEL key id...`, the
PEL references removed (an acknowledgement, a DELREF) `XACK key group id...`
per group; a policy trim becomes the exact threshold it reached, `MAXLEN = <length>`,
with DELREF's references as XACKs and ACKED kept as `ACKED MAXLEN = <length>`:
an exact ACKED trim to that length deletes, from the same state, exactly the
unreferenced entries the original trim deleted (the first ones in ID order).
Deletions, unlike trims, move max-deleted-entry-id, which XDEL's replay does too.
"""

from __future__ import annotations

from protocol.errors import SYNTAX, ReplyError
from storage.refs import ACKED, DELREF, KEEPREF, POLICIES, References, TrimOutcome, delete_entries, drop_references
from storage.stream import Stream
from storage.stream_id import format_id

from ..command import command
from .args import to_int
from .stream_args import lookup_stream, read_stream

NUMIDS_NOT_POSITIVE = "ERR Number of IDs must be a positive integer"
NUMIDS_MISMATCH = "ERR The `numids` parameter must match the number of arguments"


def parse_policy_ids(argv: list[bytes], start: int) -> tuple[bytes, list[bytes]]:
    """`[KEEPREF | DELREF | ACKED] IDS numids id...` in any order: the policy and the ID arguments.

    As Redis: a second policy or any other word is a syntax error, a later IDS
    block replaces an earlier one, surplus IDs are read as options (syntax error).
    """
    policy = None
    ids: list[bytes] | None = None
    argc = len(argv)
    i = start
    while i < argc:
        word = argv[i].lower()
        if word == b"ids" and i + 1 < argc:
            try:
                numids = to_int(argv[i + 1])
            except ReplyError:
                raise ReplyError(NUMIDS_NOT_POSITIVE) from None
            if numids <= 0:
                raise ReplyError(NUMIDS_NOT_POSITIVE)
            if numids > argc - (i + 2):
                raise ReplyError(NUMIDS_MISMATCH)
            ids = argv[i + 2 : i + 2 + numids]
            i += 2 + numids
            continue
        if word in POLICIES and policy is None:
            policy = POLICIES[word]
        else:
            raise ReplyError(SYNTAX)
        i += 1
    if ids is None:
        raise ReplyError(SYNTAX)
    return policy or KEEPREF, ids


def _parse_ids(args: list[bytes]) -> list[int]:
    """The IDs, parsed as XACK parses them (a memo of the IDs recently delivered: acks send them back)."""
    from .groups import _delivered_ids  # groups.py imports streams.py, which imports this module

    return _delivered_ids.parse(args)


def _xack(key: bytes, group: bytes, entry_ids: list[int]) -> list[bytes]:
    return [b"XACK", key, group, *map(format_id, entry_ids)]


def _codes(entry_ids: list[int], removed: set[int], kept: set[int], acked: list[bool] | None) -> list[int]:
    """Per requested ID: 2 kept for its references, 1 deleted (or acknowledged: XACKDEL), -1 otherwise.

    A repeated ID is answered once: its repeats find nothing left to do.
    """
    codes = []
    credited: set[int] = set()
    for n, entry_id in enumerate(entry_ids):
        if acked is not None and not acked[n]:
            codes.append(-1)
        elif entry_id in kept:
            codes.append(2)
        elif acked is not None or (entry_id in removed and entry_id not in credited):
            codes.append(1)
            credited.add(entry_id)
        else:
            codes.append(-1)
    return codes


def _apply(stream: Stream, key: bytes, policy: bytes, candidates: list[int], effects: list) -> tuple[set[int], set[int]]:
    """Delete candidates under policy; (IDs removed, IDs kept because still referenced)."""
    kept: set[int] = set()
    if policy == ACKED:
        refs = References(stream)
        kept = {entry_id for entry_id in candidates if refs.referenced(entry_id)}
        candidates = [entry_id for entry_id in candidates if entry_id not in kept]
    elif policy == DELREF:
        for name, gone in drop_references(stream, candidates).items():
            effects.append(_xack(key, name, gone))
    removed = delete_entries(stream, candidates, trimming=False) if candidates else []  # in request order, each once
    if removed:
        effects.append([b"XDEL", key, *map(format_id, removed)])
    return set(removed), kept


@command(
    "xdelex", -5, "write fast", keys=(1, 1, 1), group="stream", since="8.2.0",
    summary="Deletes one or multiple entries from the stream.",
    complexity="O(1) for each single item to delete in the stream, regardless of the stream size.",
)  # fmt: skip
def xdelex(ctx, argv):
    """XDELEX key [KEEPREF | DELREF | ACKED] IDS numids id [id ...] -> per ID: 1 deleted, 2 still referenced (ACKED), -1 not found."""
    stream = lookup_stream(ctx, argv[1])
    policy, id_args = parse_policy_ids(argv, 2)
    if stream is None:
        return [-1] * len(id_args), []
    entry_ids = _parse_ids(id_args)
    effects: list = []
    removed, kept = _apply(stream, argv[1], policy, entry_ids, effects)
    return _codes(entry_ids, removed, kept, None), effects


@command(
    "xackdel", -6, "write fast", keys=(1, 1, 1), group="stream", since="8.2.0",
    summary="Acknowledges and deletes one or multiple messages for a stream consumer group.",
    complexity="O(1) for each message ID processed.",
)  # fmt: skip
def xackdel(ctx, argv):
    """XACKDEL key group [KEEPREF | DELREF | ACKED] IDS numids id [id ...] -> per ID: 1 acknowledged and deleted, 2 acknowledged but still referenced (ACKED), -1 not pending in the group."""
    stream = read_stream(ctx, argv[1])  # a read lookup in Redis: a keyspace hit or miss
    policy, id_args = parse_policy_ids(argv, 3)
    group = stream.groups.get(argv[2]) if stream is not None else None
    if group is None:
        return [-1] * len(id_args), []
    entry_ids = _parse_ids(id_args)
    acked = group.ack_many(entry_ids)
    done = [entry_id for entry_id, ok in zip(entry_ids, acked, strict=True) if ok]
    effects: list = []
    if not done:
        return [-1] * len(entry_ids), effects
    effects.append(_xack(argv[1], argv[2], done))
    _removed, kept = _apply(stream, argv[1], policy, done, effects)
    return _codes(entry_ids, set(), kept, acked), effects


def trim_effects(
    name: bytes, key: bytes, stream: Stream, policy: bytes, outcome: TrimOutcome, tail: list[bytes], minid: int | None = None
) -> list[list[bytes]]:
    """The effects of a trim that deleted entries: XADD/XTRIM at the exact length reached, plus DELREF's XACKs.

    tail: what follows the trim options (XADD's ID and fields). minid: an exact MINID trim's threshold,
    kept as it was: the length it reached would, replayed, also remove a node whose live entries all
    went but whose tombstones reach the threshold, which MINID keeps (as Redis).
    """
    threshold = [b"MAXLEN", b"=", b"%d" % stream.length] if minid is None else [b"MINID", b"=", format_id(minid)]
    if policy == ACKED and stream.groups:
        head = [name, key, ACKED, *threshold] if name == b"XADD" else [name, key, *threshold, ACKED]
    else:
        head = [name, key, *threshold]
    effects = [head + tail]
    for group, gone in outcome.dropped.items():
        effects.append(_xack(key, group, gone))
    return effects
