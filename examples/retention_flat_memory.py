"""Consumption-based retention keeps a stream's memory flat while its consumers keep up.

    python -m examples.retention_flat_memory [--port 6379] [--seconds 10]

A producer appends sensor readings to `example:readings`; a consumer in the
group `billing` (an AUTO subscriber: entries it has acknowledged may go)
reads and acknowledges them. The stream has the policy `CONSUMPTION MIN-LEN
1000 MAX-BYTES 2000000`: it keeps what billing has not processed, at least
the newest 1000 entries, and never more than 2 MB. Every half second the
script prints the entries written so far, XLEN and MEMORY USAGE: both stay
flat however many entries go through. For the last quarter of the run the
consumer stops: the stream grows up to MAX-BYTES and no further (billing's
entries-lost counts what the limit took from it).
"""

from __future__ import annotations

import argparse
import threading
import time

import redis

KEY = "example:readings"
GROUP = "billing"
POLICY = ("CONSUMPTION", "MIN-LEN", "1000", "MAX-BYTES", "2000000")


def setup(client: redis.Redis) -> None:
    client.delete(KEY)
    client.xgroup_create(KEY, GROUP, id="$", mkstream=True)
    client.execute_command("XGROUP", "SETCONFIG", KEY, GROUP, "SUBSCRIBER", "AUTO")
    client.execute_command("XRETENTION", "SET", KEY, *POLICY)


def produce(client: redis.Redis, stop: threading.Event, written: list[int]) -> None:
    pipe = client.pipeline(transaction=False)
    while not stop.is_set():
        for i in range(100):
            pipe.xadd(KEY, {"sensor": str(i % 7), "temperature": "21.5"})
        pipe.execute()
        written[0] += 100


def consume(client: redis.Redis, stop: threading.Event) -> None:
    while not stop.is_set():
        reply = client.xreadgroup(GROUP, "worker", {KEY: ">"}, count=500, block=100)
        for _key, entries in reply or ():
            if entries:
                client.xack(KEY, GROUP, *[entry_id for entry_id, _fields in entries])


def run(client: redis.Redis, seconds: float, report=print) -> list[tuple[float, int, int, int, bool]]:
    """Run the example; (time, written, XLEN, MEMORY USAGE, consumer running) every half second."""
    setup(client)
    stop_all, stop_consumer = threading.Event(), threading.Event()
    written = [0]
    producer = threading.Thread(target=produce, args=(client, stop_all, written), daemon=True)
    consumer = threading.Thread(target=consume, args=(client, stop_consumer), daemon=True)
    producer.start()
    consumer.start()
    samples = []
    began = time.monotonic()
    try:
        while (now := time.monotonic() - began) < seconds:
            if now >= seconds * 0.75 and not stop_consumer.is_set():
                stop_consumer.set()
                report("-- the consumer stops: MAX-BYTES bounds the stream --")
            time.sleep(0.5)
            sample = (round(now, 1), written[0], client.xlen(KEY), client.memory_usage(KEY), not stop_consumer.is_set())
            samples.append(sample)
            report(f"t={sample[0]:5.1f}s written={sample[1]:8d} xlen={sample[2]:7d} memory={sample[3]:9d} bytes")
    finally:
        stop_all.set()
        stop_consumer.set()
        producer.join()
        consumer.join()
    info = client.execute_command("XRETENTION", "GET", KEY)
    report(f"retention: {info}")
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=6379)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    run(redis.Redis(host=args.host, port=args.port), args.seconds)


if __name__ == "__main__":
    main()
