"""Exactly-once writes: every row's XADD carries `IDMP pid iid` derived from where the row comes from.

A Spark task that is retried, or a streaming query restarted from its
checkpoint, writes the same rows again in the same order; with IDMP (Redis 8.6,
Millrace) the server answers those repeats with the original entry IDs and adds
nothing. The identity of a row:

    pid = millrace-spark:<write>:<batch>:<partition>:<chunk>     iid = <row number in the partition>

`write` is the streaming query's ID (kept in its checkpoint, so a restarted
query has the same one) or, for `df.write`, option `writeId` (default: an ID the
driver draws once per write, shared by the retries of its tasks); `batch` is
the micro-batch ID (0 for `df.write`); `chunk` is the row number divided by the
stream's IDMP-MAXSIZE, so no producer ever holds more iids than the server keeps
and none is evicted early. What remains is IDMP-DURATION: a retry or restart
must come within that many seconds (100 by default) of the first attempt's
write, and the rows must reach the writer in the same order (Spark's own
deterministic replay of a source's offsets gives that).

Servers without IDMP (Redis before 8.6) get plain XADDs: at-least-once, with a
warning (option `exactlyOnce`: `auto`, the default; `true` refuses such a
server; `false` never uses IDMP).
"""

from __future__ import annotations

import logging
import uuid

import redis

log = logging.getLogger("millrace.spark")

MODES = ("auto", "true", "false")
DEFAULT_WINDOW = 100  # stream-idmp-maxsize's default: the chunk when the server does not say
IDMP_SINCE = (8, 6)  # the Redis release that added XADD IDMP


def new_write_id() -> str:
    """The identity of one `df.write`, drawn on the driver (its tasks' retries share it)."""
    return uuid.uuid4().hex


def _version(text: str) -> tuple[int, ...]:
    parts = []
    for part in text.split(".")[:3]:
        digits = "".join(ch for ch in part if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def supports_idmp(client: redis.Redis) -> bool:
    """Does the server take XADD IDMP? Clients decide from the version it reports, as redis-py does."""
    return _version(str(client.info("server").get("redis_version", "0"))) >= IDMP_SINCE


def use_idmp(client: redis.Redis, mode: str, where: str) -> bool:
    """Whether this write uses IDMP; warns (auto) or refuses (true) a server without it."""
    if mode == "false":
        return False
    if supports_idmp(client):
        return True
    if mode == "true":
        from pipeline.client import SourceError

        raise SourceError(
            f"millrace: the server at {where} does not support XADD IDMP (Redis >= 8.6 or Millrace); "
            "option exactlyOnce=true needs it (exactlyOnce=auto or false write at least once)"
        )
    log.warning(
        "millrace: the server at %s has no idempotent XADD (IDMP, Redis >= 8.6): writes are at-least-once, "
        "a retried task or restarted query can add its rows again (option exactlyOnce=false silences this)",
        where,
    )
    return False


class RowIdentity:
    """The pid/iid of each row a task writes (module docstring)."""

    def __init__(self, client: redis.Redis, write_id: str, batch: int, partition: int) -> None:
        self.client = client
        self.prefix = f"millrace-spark:{write_id}:{batch}:{partition}:"
        self.windows: dict[str, int] = {}

    @classmethod
    def for_task(cls, client: redis.Redis, write_id: str | None) -> RowIdentity:
        """From Spark's TaskContext: the query ID and batch of a streaming write, the partition."""
        from pyspark import TaskContext

        context = TaskContext.get()
        partition = context.partitionId() if context is not None else 0
        query = context.getLocalProperty("sql.streaming.queryId") if context is not None else None
        batch = context.getLocalProperty("streaming.sql.batchId") if context is not None else None
        if query:
            return cls(client, query, int(batch or 0), partition)
        return cls(client, write_id or new_write_id(), 0, partition)

    def window(self, key: str) -> int:
        """The stream's IDMP-MAXSIZE (the config's for a stream not there yet): the iids one pid may hold."""
        size = self.windows.get(key)
        if size is None:
            size = DEFAULT_WINDOW
            try:
                info = self.client.execute_command("XINFO", "STREAM", key)
                fields = info if isinstance(info, dict) else dict(zip(info[0::2], info[1::2], strict=True))
                size = int(fields.get(b"idmp-maxsize", fields.get("idmp-maxsize", DEFAULT_WINDOW)))
            except redis.ResponseError:
                try:
                    reply = self.client.config_get("stream-idmp-maxsize")
                    size = int(next(iter(reply.values()), DEFAULT_WINDOW))
                except (redis.ResponseError, ValueError):
                    pass
            self.windows[key] = size
        return size

    def idmp(self, key: str, row: int) -> list:
        """`IDMP pid iid` for the row-th row of this task."""
        window = self.window(key)
        return ["IDMP", f"{self.prefix}{row // window}", str(row)]
