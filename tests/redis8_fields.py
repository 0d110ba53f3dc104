"""XINFO STREAM fields newer than the oracle (Redis 8.2.3): left out where Millrace is compared with it.

Redis 8.6 added six IDMP fields to XINFO STREAM (with and without FULL). The
differential tests compare everything else with 8.2.3; the fields themselves
are tested against the spec in tests/test_idmp.py.
"""

from __future__ import annotations

NEWER_STREAM_FIELDS = frozenset(
    {b"idmp-duration", b"idmp-maxsize", b"pids-tracked", b"iids-tracked", b"iids-added", b"iids-duplicates"}
)


def without_newer_fields(reply):
    """An XINFO STREAM reply (RESP2 flat list or RESP3 dict) without the fields 8.2.3 does not have."""
    if isinstance(reply, dict):
        return {k: v for k, v in reply.items() if k not in NEWER_STREAM_FIELDS}
    if isinstance(reply, list) and len(reply) % 2 == 0:
        out = []
        for i in range(0, len(reply), 2):
            if not (isinstance(reply[i], bytes) and reply[i] in NEWER_STREAM_FIELDS):
                out += reply[i : i + 2]
        return out
    return reply
