"""millrace-lag: the consumer groups of streams and how far behind they are, in a table.

In the spirit of `kafka-consumer-groups --describe`: one row per stream and
group with its consumers, entries-read, lag, pending, the age of its oldest
undelivered entry and its lag-status. Against Millrace the figures come from
XGROUPLAG (exact lag, Burrow's status); against a server without it (Redis)
from XINFO GROUPS, whose lag may be unknown (shown as `-`), the age from one
XRANGE and no status. `--watch SECONDS` redraws the table live (rich),
`--json` prints the rows for scripts.

    millrace-lag [--url redis://host:port/db] [--watch SECONDS [--count N]] [--json] [stream ...]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import redis

MAX_ID = b"18446744073709551615-18446744073709551615"
COLUMNS = ("stream", "group", "consumers", "entries-read", "lag", "pending", "oldest-undelivered-ms", "status")


def _text(value) -> str:
    return value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else str(value)


def _fields(reply) -> dict:
    """A map reply (RESP2 flat list or RESP3 dict) with text keys."""
    if isinstance(reply, list):
        reply = dict(zip(reply[0::2], reply[1::2], strict=True))
    return {_text(k): v for k, v in reply.items()}


def streams_of(client: redis.Redis) -> list[bytes]:
    """Every stream key of the database, by name."""
    return sorted(client.scan_iter(_type="stream", count=1000))


def _id_ms(entry_id: bytes) -> int:
    return int(entry_id.split(b"-")[0])


class Probe:
    """Rows for one server, remembering whether it has XGROUPLAG."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self.exact: bool | None = None  # unknown until the first stream with groups

    def rows(self, streams: list[bytes]) -> list[dict]:
        out = []
        for key in streams:
            if self.exact is not False:
                try:
                    groups = self.client.execute_command("XGROUPLAG", key)
                    self.exact = True
                    out += [self._exact_row(key, _fields(g)) for g in groups]
                    continue
                except redis.ResponseError as exc:
                    if "unknown command" not in str(exc).lower():
                        raise
                    self.exact = False
            out += self._xinfo_rows(key)
        return out

    @staticmethod
    def _exact_row(key: bytes, g: dict) -> dict:
        return {
            "stream": _text(key),
            "group": _text(g["name"]),
            "consumers": g["consumers"],
            "entries-read": g["entries-read"],
            "lag": g["lag"],
            "pending": g["pending"],
            "oldest-undelivered-ms": g["oldest-undelivered-ms"],
            "status": _text(g["lag-status"]),
        }

    def _xinfo_rows(self, key: bytes) -> list[dict]:
        rows = []
        now_ms = int(time.time() * 1000)
        for raw in self.client.execute_command("XINFO", "GROUPS", key):
            g = _fields(raw)
            last = g["last-delivered-id"]
            first = [] if last == MAX_ID else self.client.execute_command("XRANGE", key, b"(" + last, "+", "COUNT", 1)
            rows.append(
                {
                    "stream": _text(key),
                    "group": _text(g["name"]),
                    "consumers": g["consumers"],
                    "entries-read": g.get("entries-read"),
                    "lag": g.get("lag"),
                    "pending": g["pending"],
                    "oldest-undelivered-ms": max(now_ms - _id_ms(first[0][0]), 0) if first else 0,
                    "status": None,
                }
            )
        return rows


def _cell(value) -> str:
    return "-" if value is None else str(value)


def render_text(rows: list[dict]) -> str:
    """A plain aligned table (numbers right-aligned), as kafka-consumer-groups prints."""
    header = [c.upper() for c in COLUMNS]
    cells = [header] + [[_cell(row[c]) for c in COLUMNS] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(COLUMNS))]
    lines = []
    for line in cells:
        parts = [text.ljust(widths[i]) if i < 2 or i == len(COLUMNS) - 1 else text.rjust(widths[i]) for i, text in enumerate(line)]
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)


def render_rich(rows: list[dict], url: str, exact: bool | None):
    from rich.table import Table

    source = "XGROUPLAG (exact)" if exact else "XINFO GROUPS (Redis's estimate)"
    table = Table(title=f"{url} - {source} - {time.strftime('%H:%M:%S')}")
    for i, column in enumerate(COLUMNS):
        table.add_column(column.upper(), justify="left" if i < 2 or i == len(COLUMNS) - 1 else "right")
    colours = {"OK": "green", "WARN": "yellow", "STALL": "red", "STOP": "red", "REWIND": "magenta"}
    for row in rows:
        cells = [_cell(row[c]) for c in COLUMNS]
        status = row["status"]
        if status in colours:
            cells[-1] = f"[{colours[status]}]{status}[/]"
        table.add_row(*cells)
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="millrace-lag", description="Consumer-group lag of streams, like kafka-consumer-groups --describe.")
    parser.add_argument("--url", default="redis://127.0.0.1:6379/0", help="server URL (redis://[user:pass@]host:port/db)")
    parser.add_argument("--watch", type=float, metavar="SECONDS", help="redraw the table every SECONDS")
    parser.add_argument("--count", type=int, metavar="N", help="with --watch: stop after N tables")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON (one array per refresh)")
    parser.add_argument("streams", nargs="*", help="stream keys (default: every stream of the database)")
    args = parser.parse_args(argv)
    if args.count is not None and args.watch is None:
        parser.error("--count needs --watch")
    if args.watch is not None and args.watch <= 0:
        parser.error("--watch needs a positive number of seconds")
    client = redis.Redis.from_url(args.url)
    probe = Probe(client)

    def collect() -> list[dict]:
        keys = [s.encode() for s in args.streams] if args.streams else streams_of(client)
        return probe.rows(keys)

    try:
        if args.watch is None:
            rows = collect()
            print(json.dumps(rows) if args.json else render_text(rows))
            return 0
        shown = 0
        if args.json or not sys.stdout.isatty():
            while args.count is None or shown < args.count:
                rows = collect()
                print(json.dumps(rows) if args.json else render_text(rows) + "\n", flush=True)
                shown += 1
                if args.count is None or shown < args.count:
                    time.sleep(args.watch)
            return 0
        from rich.live import Live

        with Live(render_rich(collect(), args.url, probe.exact), auto_refresh=False) as live:
            shown = 1
            while args.count is None or shown < args.count:
                time.sleep(args.watch)
                live.update(render_rich(collect(), args.url, probe.exact), refresh=True)
                shown += 1
        return 0
    except redis.RedisError as exc:
        print(f"millrace-lag: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
