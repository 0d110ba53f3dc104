"""Which option names the source takes, and what to say about any other (issue 26).

A typo such as `startingOffset` must not silently read everything: an unknown
option is an error naming the closest valid one. Kafka-source options, which a
Spark user types from habit, get the Millrace equivalent, or a note that there
is none; on a write they are named Kafka sink options.
"""

from __future__ import annotations

import difflib

from pipeline.options import OptionError

CONNECTION = ("url", "host", "port", "username", "password", "db", "ssl", "timeout", "sentinel", "sentinelMaster")
READ = (*CONNECTION, "streams", "stream", "startingOffsets", "endingOffsets", "startingTimestamp", "numPartitions",
        "readCount", "maxRecordsPerTrigger", "maxOffsetsPerTrigger", "failOnDataLoss", "group")
WRITE = (*CONNECTION, "stream", "streams", "maxlen", "minid", "approximate", "writeBatchSize", "exactlyOnce", "writeId")
SPARK_OWN = ("path", "checkpointLocation", "queryName")  # options Spark itself may hand a source

# Kafka source/sink option -> what to use with Millrace (None: no equivalent, and why)
KAFKA: dict[str, str] = {
    "subscribe": "use option 'streams' (comma-separated stream keys)",
    "assign": "use option 'streams' (a stream is not split into partitions; numPartitions splits the reading)",
    "subscribePattern": "there is no pattern subscription: list the keys in option 'streams'",
    "topic": "use option 'stream' (the stream key to write to)",
    "kafka.bootstrap.servers": "use option 'url' (redis://host:port) or 'host'/'port'",
    "startingOffsetsByTimestamp": "use option 'startingTimestamp' (ms; one value for all streams)",
    "startingOffsetsByTimestampStrategy": "there is no equivalent: 'startingTimestamp' starts at the first entry at or after it",
    "endingOffsetsByTimestamp": "use option 'endingOffsets' with stream IDs, which are ms timestamps (e.g. 1700000000000-0)",
    "endingTimestamp": "use option 'endingOffsets' with stream IDs, which are ms timestamps (e.g. 1700000000000-0)",
    "minPartitions": "use option 'numPartitions'",
    "minOffsetsPerTrigger": "there is no equivalent: each micro-batch reads what is there, up to 'maxRecordsPerTrigger'",
    "maxTriggerDelay": "there is no equivalent (no minOffsetsPerTrigger either)",
    "includeHeaders": "there is no equivalent: stream entries have no headers; every field is in the 'fields' map column",
    "groupIdPrefix": "use option 'group' (a consumer group that mirrors the query's position)",
    "kafka.group.id": "use option 'group' (a consumer group that mirrors the query's position)",
    "kafkaConsumer.pollTimeoutMs": "use option 'timeout' (seconds)",
    "fetchOffset.numRetries": "there is no equivalent: redis-py reconnects itself",
    "fetchOffset.retryIntervalMs": "there is no equivalent: redis-py reconnects itself",
    "maxOffsetsPerTrigger": "",  # accepted as an alias of maxRecordsPerTrigger
}


def check_names(options: dict[str, str], valid: tuple[str, ...], what: str) -> None:
    """Refuse option names the source does not use; `options` keys are lower case (Spark's)."""
    known = {name.lower(): name for name in (*valid, *SPARK_OWN)}
    kafka = {name.lower(): (name, hint) for name, hint in KAFKA.items() if hint}
    for key in options:
        if key in known:
            continue
        if key in kafka or key.startswith("kafka."):
            name, hint = kafka.get(key, (key, "connection settings are options 'url' or 'host'/'port'/'password'"))
            side, verb = ("sink", "writes") if what == "write" else ("source", "reads")
            raise OptionError(f"option '{name}' is a Kafka {side} option; Millrace {verb} Redis streams: {hint}")
        close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
        hint = f"; did you mean '{known[close[0]]}'?" if close else ""
        raise OptionError(f"unknown option '{key}' for a Millrace {what}{hint} (valid: {', '.join(valid)})")
