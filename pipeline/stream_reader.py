"""Structured streaming reads with exact offsets.

An offset is, per stream, the last ID included so far and `entries_read`, the
number of entries ever added up to that ID (Redis's consumer-group counter;
-1 when unknown, e.g. after starting at an arbitrary ID, or after a batch cut
short by maxRecordsPerTrigger with an XDEL'd entry possibly inside it: never a
guess, since a count that is too low fails a healthy query for data loss).
An unknown counter comes with `next`, the first live entry after the position
when the offset was fixed: unread, so if it is gone later, unread entries were
removed (a trim past the position always removes it), which is how data loss
is told without the counter. Redis's max-deleted-entry-id cannot do that: XDEL
moves it, trimming does not. Spark keeps offsets
in its checkpoint and every micro-batch reads exactly `(start.id, end.id]`, so
a restarted query resumes where it stopped: no loss, nothing twice.

With option `group`, each commit records the position in a consumer group
(`XGROUP SETID key group id ENTRIESREAD n`), so XINFO GROUPS shows the Spark
query's lag beside other consumers'. Spark commits a batch's end offset when it
plans the next batch, so the group is one batch behind what was processed.
"""

from __future__ import annotations

from collections.abc import Iterator

import redis
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from pipeline.arrow_batches import plan_for
from pipeline.batch_reader import read_range, start_after
from pipeline.client import SourceError, StreamInfo, connect, group_lag, live_after, nth_id_after, ping, stream_info
from pipeline.options import SourceOptions
from pipeline.partitioning import Span, plan, share_out
from pipeline.stream_ids import MAX_ID, exclusive_start, format_id, parse_id

try:  # read limits and Trigger.AvailableNow for Python sources: PySpark 4.2+
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
except ImportError:  # older 4.x: every micro-batch reads all that is available

    class ReadLimit:  # type: ignore[no-redef]
        pass

    class ReadAllAvailable(ReadLimit):  # type: ignore[no-redef]
        pass

    class ReadMaxRows(ReadLimit):  # type: ignore[no-redef]
        def __init__(self, max_rows: int) -> None:
            self.max_rows = max_rows

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        pass


Offset = dict[str, dict]


def _pos(stream_id: int, entries_read: int, next_id: int | None = None) -> dict:
    position = {"id": format_id(stream_id), "entries_read": entries_read}
    if next_id is not None:  # with an unknown counter: the first unread entry, for the data-loss check
        position["next"] = format_id(next_id)
    return position


def _next_live(client: redis.Redis, key: str, after: int, upto: int | None = None) -> int | None:
    """The ID of the first live entry after `after` (up to `upto`), None when there is none."""
    if after >= MAX_ID:
        return None
    page = client.execute_command("XRANGE", key, exclusive_start(after), format_id(upto) if upto else "+", "COUNT", 1)
    return parse_id(page[0][0]) if page else None


def _tail(info: StreamInfo) -> dict:
    return _pos(info.last_generated_id, info.entries_added)


def earliest(info: StreamInfo) -> dict:
    """Kafka's `earliest`: just before the first entry still there, so entries trimmed before the
    query began are not a loss. entries_read is exact when nothing after that entry was deleted
    (max-deleted-entry-id below it), else unknown (-1)."""
    if info.entries_added == info.length:  # nothing was ever removed: the very beginning
        return _pos(0, 0)
    if not info.length:
        return _tail(info)
    before = info.first_entry_id - 1
    if info.max_deleted_entry_id < info.first_entry_id:
        return _pos(before, info.entries_added - info.length)
    return _pos(before, -1)


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.plan = plan_for(schema)
        self._client: redis.Redis | None = None
        self._target: Offset | None = None
        self._last_end: Offset | None = None
        self._infos: dict[str, StreamInfo] = {}
        self._has_xcount: bool | None = None  # None until the server was asked (Redis has no XCOUNT)

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_client"] = None
        return state

    # -- driver side ------------------------------------------------------

    def client(self) -> redis.Redis:
        if self._client is None:
            self._client = connect(self.options.connection)
            ping(self._client, self.options.connection)
        return self._client

    def _refresh(self) -> dict[str, StreamInfo]:
        client = self.client()
        self._infos = {key: stream_info(client, key) for key in self.options.streams}
        return self._infos

    def initialOffset(self) -> Offset:
        offset = {}
        for key, info in self._refresh().items():
            position = self.options.starting[key]
            if position.kind == "earliest" and self.options.starting_timestamp is None:
                offset[key] = earliest(info)
                if offset[key]["entries_read"] < 0:
                    offset[key]["next"] = format_id(info.first_entry_id)
            elif position.kind == "latest" and self.options.starting_timestamp is None:
                offset[key] = _tail(info)
            else:
                after = start_after(position, info, self.options.starting_timestamp)
                nxt = _next_live(self.client(), key, after) if after < info.last_generated_id else None
                offset[key] = _tail(info) if nxt is None else _pos(after, -1, nxt)  # nothing live after it: the tail
        if self.options.group:
            self._create_groups(offset)
        return offset

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {key: _tail(info) for key, info in self._refresh().items()}

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_records_per_trigger:
            return ReadMaxRows(self.options.max_records_per_trigger)
        return ReadAllAvailable()

    def _check_loss(self, key: str, start: dict, info: StreamInfo) -> dict:
        """Entries after our position removed before we read them: fail, or skip them when allowed."""
        start_id, entries_read = parse_id(start["id"]), start["entries_read"]
        if entries_read < 0:
            return self._check_next(key, start)
        if info.entries_added <= entries_read:
            return start
        if info.length and info.first_entry_id <= start_id:
            return start  # we are inside the stream: trimming has not reached unread entries
        missing = info.entries_added - entries_read - info.length
        if missing <= 0:
            return start
        if self.options.fail_on_data_loss:
            raise SourceError(
                f"millrace: {missing} entries of stream {key!r} after ID {start['id']} were removed (trimmed or deleted) "
                "before this query read them; set option 'failOnDataLoss' to false to skip them"
            )
        return _pos(start_id, entries_read + missing)

    def _check_next(self, key: str, start: dict) -> dict:
        """Without a counter: the first unread entry seen when `start` was fixed must still be there
        (deletions before that are not this query's loss). An offset without `next` cannot be checked."""
        nxt = start.get("next")
        if nxt is None or self.client().execute_command("XRANGE", key, nxt, nxt):
            return start
        if self.options.fail_on_data_loss:
            raise SourceError(
                f"millrace: entries of stream {key!r} after ID {start['id']} were removed (trimmed or deleted) before "
                f"this query read them (the first of them, {nxt}, is gone); set option 'failOnDataLoss' to false to "
                "skip them"
            )
        return _pos(parse_id(start["id"]), -1)

    def latestOffset(self, start: Offset | None = None, limit: ReadLimit | None = None) -> Offset:
        if start is None:  # PySpark before 4.2 asks without a start or a limit: all there is (no loss check)
            self._last_end = {key: _tail(info) for key, info in self._refresh().items()}
            return self._last_end
        infos = self._refresh()
        starts = {key: self._check_loss(key, start.get(key, _pos(0, 0)), infos[key]) for key in self.options.streams}
        caps = {key: self._target[key] if self._target else _tail(infos[key]) for key in self.options.streams}
        end = {}
        if isinstance(limit, ReadMaxRows):
            end = self._limited(starts, caps, limit.max_rows)
        else:
            for key in self.options.streams:
                ahead = parse_id(caps[key]["id"]) > parse_id(starts[key]["id"])
                end[key] = caps[key] if ahead else starts[key]
        # Spark compares offsets as JSON: hand back `start` itself when nothing moved.
        end = {
            key: start[key] if key in start and parse_id(end[key]["id"]) == parse_id(start[key]["id"]) else end[key]
            for key in end
        }
        self._last_end = end
        return end

    def _limited(self, starts: Offset, caps: Offset, budget: int) -> Offset:
        """At most `budget` entries in all, shared by the streams in proportion to their backlog."""
        backlog = {}
        for key in self.options.streams:
            after, cap = parse_id(starts[key]["id"]), parse_id(caps[key]["id"])
            if cap <= after:
                backlog[key] = 0
            elif starts[key]["entries_read"] >= 0 and caps[key]["entries_read"] >= 0:
                backlog[key] = max(1, caps[key]["entries_read"] - starts[key]["entries_read"])
            else:
                backlog[key] = max(1, self._infos[key].length)
        waiting = [key for key in self.options.streams if backlog[key]]
        shares = (
            dict(zip(waiting, share_out(budget, [backlog[k] for k in waiting]), strict=True)) if budget >= len(waiting) else {}
        )
        if not shares and waiting:  # a budget smaller than the number of streams: serve them in turn
            shares = {key: (budget if key == waiting[0] else 0) for key in waiting}
        end = {}
        client = self.client()
        for key in self.options.streams:
            share = shares.get(key, 0)
            if not share:
                end[key] = starts[key]
                continue
            if share >= backlog[key] and starts[key]["entries_read"] >= 0:
                end[key] = caps[key]
                continue
            after, cap = parse_id(starts[key]["id"]), parse_id(caps[key]["id"])
            last, seen = nth_id_after(client, key, after, cap, share, self.options.read_count)
            nxt = _next_live(client, key, last, cap) if seen >= share else None
            if nxt is None:  # nothing live after `last` up to the cap: the cap, with its exact counter
                end[key] = caps[key]
                continue
            # `seen` counts live entries only: read + seen is exact only if nothing after `after` was ever
            # XDEL'd (max-deleted-entry-id, asked after counting); otherwise unknown, never too low
            read = starts[key]["entries_read"]
            if read >= 0 and stream_info(client, key).max_deleted_entry_id <= after:
                end[key] = _pos(last, read + seen)
            else:
                end[key] = _pos(last, -1, nxt)
        return end

    def reportLatestOffset(self) -> Offset | None:
        """The tail of each stream and the query's lag behind it (shown in the query progress).

        `lag` counts the live entries after the last planned batch's end: on a
        server with XCOUNT (Millrace) exactly, `XCOUNT key (end-id +`; on one
        without (Redis) it is entries-added minus the query's entries-read,
        which counts deleted and trimmed entries too (-1 when unknown). -1
        before the first batch is planned. With option `group` on a server
        that has XGROUPLAG (Millrace), `group_lag` adds the group's exact lag:
        live entries after the last committed batch (one batch behind `lag`'s
        position, see the module's docstring).
        """
        if not self._infos:
            return None
        report = {}
        for key, info in self._infos.items():
            position = (self._last_end or {}).get(key)
            report[key] = {
                "id": format_id(info.last_generated_id),
                "entries_added": info.entries_added,
                "lag": self._lag(key, info, position),
            }
            exact = group_lag(self.client(), key, self.options.group) if self.options.group else None
            if exact is not None:
                report[key]["group_lag"] = exact
        return report

    def _lag(self, key: str, info: StreamInfo, position: dict | None) -> int:
        """Live entries after `position` (XCOUNT), else entries-added minus its entries-read; -1 when unknown."""
        if position is None:
            return -1
        if self._has_xcount is not False:
            exact = live_after(self.client(), key, parse_id(position["id"]))
            self._has_xcount = exact is not None
            if exact is not None:
                return exact
        read = position["entries_read"]
        return info.entries_added - read if read >= 0 else -1

    def partitions(self, start: Offset, end: Offset) -> list[InputPartition]:
        spans = []
        for key in self.options.streams:
            after, upto = parse_id(start.get(key, _pos(0, 0))["id"]), parse_id(end[key]["id"])
            if upto <= after:
                continue
            info = self._infos.get(key)
            first = info.first_entry_id if info and info.length else after + 1
            spans.append(Span(key, after, upto, max(first, after + 1), upto, max(1, upto - after)))
        return plan(spans, self.options.num_partitions or len(spans))

    def commit(self, end: Offset) -> None:
        if not self.options.group:
            return
        client = self.client()
        for key, position in end.items():
            args = ["XGROUP", "SETID", key, self.options.group, position["id"]]
            if position["entries_read"] >= 0:
                args += ["ENTRIESREAD", position["entries_read"]]
            try:
                client.execute_command(*args)
            except redis.ResponseError as exc:
                if "NOGROUP" not in str(exc):
                    raise
                self._create_groups({key: position})

    def _create_groups(self, offset: Offset) -> None:
        client = self.client()
        for key, position in offset.items():
            args = ["XGROUP", "CREATE", key, self.options.group, position["id"]]
            if position["entries_read"] >= 0:
                args += ["ENTRIESREAD", position["entries_read"]]
            try:
                client.execute_command(*args)
            except redis.ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    # -- executor side ----------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator:
        return read_range(self.options, self.plan, partition)
