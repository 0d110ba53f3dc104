"""Parse and validate the data source's options; every error names the option at fault.

Options are plain strings (Spark hands them over case-insensitively), so each
one is parsed once here, on the driver, into a frozen `SourceOptions` that is
pickled to the executors along with the reader or writer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pipeline.stream_ids import parse_id

DEFAULT_URL = "redis://127.0.0.1:6379"
DEFAULT_READ_COUNT = 1000
DEFAULT_WRITE_BATCH = 1000

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


class OptionError(ValueError):
    """A bad option: the message names the option and says what is accepted."""


@dataclass(frozen=True)
class Connection:
    """Where the server is: a URL, or host/port/... pieces (the URL wins when both are given)."""

    url: str | None = None
    host: str = "127.0.0.1"
    port: int = 6379
    username: str | None = None
    password: str | None = None
    db: int = 0
    ssl: bool = False
    timeout: float = 30.0
    sentinels: tuple[tuple[str, int], ...] = ()  # option 'sentinel': ask these for the primary of sentinel_master
    sentinel_master: str = "mymaster"

    def describe(self) -> str:
        if self.sentinels:
            return f"the primary of {self.sentinel_master!r} at sentinels " + ",".join(f"{h}:{p}" for h, p in self.sentinels)
        if self.url:
            return _redact(self.url)
        scheme = "rediss" if self.ssl else "redis"
        return f"{scheme}://{self.host}:{self.port}/{self.db}"


@dataclass(frozen=True)
class Position:
    """A per-stream starting or ending position before it is resolved against the server."""

    kind: str  # "earliest", "latest" or "id"
    id: int = 0


@dataclass(frozen=True)
class SourceOptions:
    connection: Connection
    streams: tuple[str, ...] = ()
    starting: dict[str, Position] = field(default_factory=dict)
    ending: dict[str, Position] = field(default_factory=dict)
    starting_timestamp: int | None = None
    num_partitions: int | None = None
    read_count: int = DEFAULT_READ_COUNT
    max_records_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    group: str | None = None
    # write side
    stream: str | None = None
    maxlen: int | None = None
    minid: int | None = None
    approximate: bool = False
    write_batch_size: int = DEFAULT_WRITE_BATCH
    exactly_once: str = "auto"  # XADD IDMP per row: auto (when the server has it), true (required), false
    write_id: str | None = None  # df.write's identity for IDMP (default: drawn per write on the driver)


def _redact(url: str) -> str:
    """Hide a password in a URL before it goes into an error message."""
    if "@" not in url or "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    creds, host = rest.rsplit("@", 1)
    user = creds.split(":", 1)[0] if ":" in creds else ""
    return f"{scheme}://{user}:***@{host}"


def _int(options: dict[str, str], name: str, default: int | None, minimum: int | None = None) -> int | None:
    raw = options.get(name.lower())
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise OptionError(f"option '{name}' must be an integer, got {raw!r}")
    if minimum is not None and value < minimum:
        raise OptionError(f"option '{name}' must be >= {minimum}, got {value}")
    return value


def _bool(options: dict[str, str], name: str, default: bool) -> bool:
    raw = options.get(name.lower())
    if raw is None or raw == "":
        return default
    low = raw.strip().lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise OptionError(f"option '{name}' must be true or false, got {raw!r}")


def _position(name: str, stream: str, value: Any) -> Position:
    if isinstance(value, str) and value.lower() in ("earliest", "latest"):
        return Position(value.lower())
    if isinstance(value, int) and value in (-2, -1):  # Kafka's spelling
        return Position("earliest" if value == -2 else "latest")
    try:
        return Position("id", parse_id(str(value)))
    except ValueError:
        raise OptionError(
            f"option '{name}': bad position {value!r} for stream {stream!r} "
            "(use earliest, latest, or a stream ID such as 1700000000000-0)"
        )


def _positions(options: dict[str, str], name: str, streams: tuple[str, ...], default: str) -> dict[str, Position]:
    raw = options.get(name.lower())
    if raw is None or raw.strip() == "":
        raw = default
    text = raw.strip()
    if text.lower() in ("earliest", "latest"):
        return {s: Position(text.lower()) for s in streams}
    try:
        spec = json.loads(text)
    except json.JSONDecodeError:
        raise OptionError(
            f'option \'{name}\' must be earliest, latest, or JSON like {{"stream": "1700000000000-0"}}, got {raw!r}'
        )
    if not isinstance(spec, dict):
        raise OptionError(f"option '{name}' must be a JSON object mapping stream names to IDs, got {raw!r}")
    unknown = sorted(set(spec) - set(streams))
    if unknown:
        raise OptionError(f"option '{name}' names streams not listed in option 'streams': {', '.join(unknown)}")
    return {s: _position(name, s, spec[s]) if s in spec else Position(default) for s in streams}


def connection_from(options: dict[str, str]) -> Connection:
    url = options.get("url") or None
    if url is not None and not url.startswith(("redis://", "rediss://", "unix://")):
        raise OptionError(f"option 'url' must start with redis://, rediss:// or unix://, got {_redact(url)!r}")
    timeout = options.get("timeout")
    try:
        timeout_s = float(timeout) if timeout else 30.0
    except ValueError:
        raise OptionError(f"option 'timeout' must be a number of seconds, got {timeout!r}")
    sentinels = []
    for address in (options.get("sentinel") or "").split(","):
        if not address.strip():
            continue
        host, _, port = address.strip().rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise OptionError(f"option 'sentinel' must be host:port[,host:port...], got {address.strip()!r}")
        sentinels.append((host, int(port)))
    return Connection(
        sentinels=tuple(sentinels),
        sentinel_master=options.get("sentinelmaster") or "mymaster",
        url=url,
        host=options.get("host") or "127.0.0.1",
        port=_int(options, "port", 6379, 1),
        username=options.get("username") or None,
        password=options.get("password") or None,
        db=_int(options, "db", 0, 0),
        ssl=_bool(options, "ssl", False),
        timeout=timeout_s,
    )


def _normalize(options) -> dict[str, str]:
    return {str(k).lower(): ("" if v is None else str(v)) for k, v in dict(options).items()}


def read_options(raw, streaming: bool) -> SourceOptions:
    """Options of a batch (`streaming=False`) or streaming read."""
    from pipeline.option_names import READ, check_names

    options = _normalize(raw)
    check_names(options, READ, "streaming read" if streaming else "read")
    names = options.get("streams") or options.get("stream") or ""
    streams = tuple(s.strip() for s in names.split(",") if s.strip())
    if not streams:
        raise OptionError("option 'streams' is required: a comma-separated list of stream keys to read")
    if len(set(streams)) != len(streams):
        raise OptionError(f"option 'streams' lists a stream twice: {names!r}")
    starting = _positions(options, "startingOffsets", streams, "latest" if streaming else "earliest")
    ending = _positions(options, "endingOffsets", streams, "latest")
    if streaming and "endingoffsets" in options:
        raise OptionError("option 'endingOffsets' is for batch reads only; a streaming read has no end")
    if not streaming and any(p.kind == "latest" for p in starting.values()) and "startingoffsets" in options:
        pass  # allowed: an empty read, as Kafka does
    max_records = _int(options, "maxRecordsPerTrigger", None, 1)
    if max_records is None:
        max_records = _int(options, "maxOffsetsPerTrigger", None, 1)
    return SourceOptions(
        connection=connection_from(options),
        streams=streams,
        starting=starting,
        ending=ending,
        starting_timestamp=_int(options, "startingTimestamp", None, 0),
        num_partitions=_int(options, "numPartitions", None, 1),
        read_count=_int(options, "readCount", DEFAULT_READ_COUNT, 1),
        max_records_per_trigger=max_records,
        fail_on_data_loss=_bool(options, "failOnDataLoss", True),
        group=options.get("group") or None,
    )


def write_options(raw) -> SourceOptions:
    """Options of a batch or streaming write."""
    from pipeline.option_names import WRITE, check_names

    options = _normalize(raw)
    check_names(options, WRITE, "write")  # a new option's name goes into pipeline/option_names.py too
    maxlen = _int(options, "maxlen", None, 0)
    minid_raw = options.get("minid") or None
    minid = None
    if minid_raw is not None:
        try:
            minid = parse_id(minid_raw)
        except ValueError:
            raise OptionError(f"option 'minid' must be a stream ID such as 1700000000000-0, got {minid_raw!r}")
    if maxlen is not None and minid is not None:
        raise OptionError("options 'maxlen' and 'minid' cannot be used together (XADD accepts one trimming strategy)")
    return SourceOptions(
        connection=connection_from(options),
        stream=(options.get("stream") or options.get("streams") or None),
        maxlen=maxlen,
        minid=minid,
        approximate=_bool(options, "approximate", False),
        write_batch_size=_int(options, "writeBatchSize", DEFAULT_WRITE_BATCH, 1),
        exactly_once=_exactly_once(options),
        write_id=options.get("writeid") or None,
    )


def _exactly_once(options: dict[str, str]) -> str:
    """Option exactlyOnce: auto | true | false (pipeline/idempotence.py)."""
    raw = options.get("exactlyonce", "auto").strip().lower()
    if raw in _TRUE:
        return "true"
    if raw in _FALSE:
        return "false"
    if raw != "auto":
        raise OptionError(f"option 'exactlyOnce' must be auto, true or false, got {raw!r}")
    return raw
