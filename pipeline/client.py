"""The redis-py side: connect, read stream metadata, page through ID ranges, turn server errors into clear ones."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import redis

from pipeline.options import Connection
from pipeline.stream_ids import MAX_ID, exclusive_start, format_id, parse_id


class SourceError(RuntimeError):
    """An error the user can act on: missing stream, wrong type, unreachable server, lost data."""


def _identity(response, **_options):
    return response


def connect(conn: Connection) -> redis.Redis:
    """A RESP2 client whose stream replies stay raw nested lists (no per-entry dicts: that is the hot path)."""
    common = dict(socket_timeout=conn.timeout, socket_connect_timeout=conn.timeout, protocol=2)
    if conn.sentinels:  # the current primary, found again through Sentinel after a failover
        from redis.sentinel import Sentinel

        sentinel = Sentinel(list(conn.sentinels), socket_timeout=conn.timeout)
        client = sentinel.master_for(
            conn.sentinel_master, db=conn.db, username=conn.username, password=conn.password, ssl=conn.ssl, **common
        )
    elif conn.url:
        client = redis.Redis.from_url(conn.url, **common)
    else:
        client = redis.Redis(
            host=conn.host, port=conn.port, db=conn.db, username=conn.username, password=conn.password, ssl=conn.ssl, **common
        )
    for name in ("XRANGE", "XREVRANGE", "XINFO STREAM", "XINFO GROUPS", "XADD"):
        client.set_response_callback(name, _identity)
    return client


def ping(client: redis.Redis, conn: Connection) -> None:
    """Fail early, naming the server, when it cannot be reached."""
    try:
        client.ping()
    except redis.AuthenticationError as exc:
        raise SourceError(f"millrace: authentication failed at {conn.describe()} (options 'url' or 'username'/'password'): {exc}")
    except redis.ConnectionError as exc:
        raise SourceError(f"millrace: cannot connect to the server at {conn.describe()} (option 'url' or 'host'/'port'): {exc}")
    except redis.ResponseError as exc:
        if "NOAUTH" in str(exc):
            raise SourceError(f"millrace: the server at {conn.describe()} requires a password (option 'password' or the url)")
        raise
    except redis.RedisError as exc:  # InvalidResponse and the like: something answered, but not in RESP
        raise SourceError(
            f"millrace: the server at {conn.describe()} does not speak the Redis protocol (is the url's host:port a "
            f"Millrace or Redis server? option 'url' or 'host'/'port'): {type(exc).__name__}: {exc}"
        )


@dataclass(frozen=True)
class StreamInfo:
    """What XINFO STREAM says about a stream, IDs as ints (0 when absent)."""

    key: str
    length: int
    last_generated_id: int
    entries_added: int
    max_deleted_entry_id: int
    first_entry_id: int  # 0 when the stream is empty
    last_entry_id: int


def _as_str(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def stream_info(client: redis.Redis, key: str) -> StreamInfo:
    """XINFO STREAM, with Redis's errors for a missing key or another type rephrased for a Spark user."""
    try:
        reply = client.execute_command("XINFO STREAM", key)
    except redis.ResponseError as exc:
        text = str(exc)
        if "no such key" in text:
            raise SourceError(
                f"millrace: stream {key!r} does not exist (option 'streams'); create it first, "
                "e.g. with XADD or XGROUP CREATE ... MKSTREAM"
            )
        if text.startswith("WRONGTYPE"):
            kind = _as_str(client.type(key))
            raise SourceError(f"millrace: key {key!r} holds a {kind}, not a stream (option 'streams')")
        raise
    info = {_as_str(reply[i]): reply[i + 1] for i in range(0, len(reply), 2)}

    def entry_id(entry) -> int:
        return parse_id(entry[0]) if entry else 0

    return StreamInfo(
        key=key,
        length=int(info["length"]),
        last_generated_id=parse_id(info["last-generated-id"]),
        entries_added=int(info.get("entries-added", info["length"])),
        max_deleted_entry_id=parse_id(info.get("max-deleted-entry-id", b"0-0")),
        first_entry_id=entry_id(info.get("first-entry")),
        last_entry_id=entry_id(info.get("last-entry")),
    )


def group_lag(client: redis.Redis, key: str, group: str) -> int | None:
    """The group's exact lag from Millrace's XGROUPLAG (issue 23); None from a server without it (Redis) or without the group."""
    try:
        reply = client.execute_command("XGROUPLAG", key, group)
    except redis.ResponseError:
        return None
    fields = reply[0] if isinstance(reply[0], dict) else dict(zip(reply[0][0::2], reply[0][1::2], strict=True))
    return int(fields[b"lag"] if b"lag" in fields else fields["lag"])


def live_after(client: redis.Redis, key: str, after: int) -> int | None:
    """Live entries with an ID after `after`, from Millrace's XCOUNT (issue 23); None from a server without it
    (Redis) or one that refuses it (an ACL): a progress figure never fails the query.

    Deleted and trimmed entries are not counted, unlike entries-added minus a reader's entries-read.
    """
    if after >= MAX_ID:
        return 0
    try:
        return int(client.execute_command("XCOUNT", key, exclusive_start(after), "+"))
    except redis.ResponseError:
        return None


def scan_range(client: redis.Redis, key: str, after: int, upto: int, count: int) -> Iterator[list]:
    """Pages of raw XRANGE entries with `after < id <= upto`, each page starting strictly after the last.

    The request for the next page goes out as soon as a page arrives, before
    the caller converts it, so the server produces page n+1 while the client
    turns page n into Arrow.
    """
    if after >= upto:
        return
    end = format_id(upto)
    conn = client.connection_pool.get_connection()
    pending = False
    try:
        conn.send_command("XRANGE", key, exclusive_start(after), end, "COUNT", count)
        pending = True
        while True:
            page = conn.read_response()
            pending = False
            if not page:
                return
            more = len(page) == count and parse_id(page[-1][0]) < upto
            if more:
                conn.send_command("XRANGE", key, "(" + page[-1][0].decode(), end, "COUNT", count)
                pending = True
            yield page
            if not more:
                return
    finally:
        if pending:  # abandoned with a reply still in flight: never hand that connection out again
            conn.disconnect()
        client.connection_pool.release(conn)


def nth_id_after(client: redis.Redis, key: str, after: int, upto: int, n: int, count: int) -> tuple[int, int]:
    """The ID of the n-th entry after `after` (not beyond `upto`) and how many entries that covers."""
    seen = 0
    end = format_id(upto)
    while seen < n and after < upto:
        page = client.execute_command("XRANGE", key, exclusive_start(after), end, "COUNT", min(count, n - seen))
        if not page:
            break
        seen += len(page)
        after = parse_id(page[-1][0])
    return after, seen
