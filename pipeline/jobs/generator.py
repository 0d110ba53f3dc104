"""Write a realistic sensor workload into a stream with plain redis-py (as devices would).

Sensors at a few sites report temperature, humidity and battery every couple of
seconds of event time; readings arrive slightly out of order (up to a few
seconds late), temperatures drift through the day and now and then spike. The
event time is simulated, so minutes of sensor time are written in seconds:

    python -m pipeline.jobs.generator --url redis://127.0.0.1:6379 --minutes 10 --sensors 20
"""

from __future__ import annotations

import argparse
import math
import random
import time

import redis

from pipeline.jobs.common import RAW_STREAM, add_common_args, say

SITES = ("north", "harbour", "quarry")


def readings(sensors: int, minutes: float, period_ms: int, start_ms: int, seed: int):
    """(arrival order) dicts of readings; event times spread over `minutes`, each sensor every `period_ms`."""
    rng = random.Random(seed)
    base = {f"sensor-{i:03d}": (SITES[i % len(SITES)], rng.uniform(12.0, 24.0)) for i in range(sensors)}
    end_ms = start_ms + int(minutes * 60_000)
    pending: list[tuple[int, dict]] = []
    for tick in range(start_ms, end_ms, period_ms):
        for name, (site, baseline) in base.items():
            event_ms = tick + rng.randrange(period_ms)
            day = math.sin((event_ms % 86_400_000) / 86_400_000 * 2 * math.pi)
            temperature = baseline + 4 * day + rng.gauss(0, 0.4) + (rng.uniform(8, 15) if rng.random() < 0.002 else 0)
            reading = {
                "sensor": name,
                "site": site,
                "temperature": f"{temperature:.2f}",
                "humidity": f"{min(100.0, max(0.0, 55 - 2 * day + rng.gauss(0, 3))):.1f}",
                "battery": f"{max(0.0, 100 - (event_ms - start_ms) / 60_000 * 0.05 - rng.random()):.1f}",
                "event_ms": str(event_ms),
            }
            arrival = event_ms + (rng.randrange(5000) if rng.random() < 0.05 else rng.randrange(200))
            pending.append((arrival, reading))
        # release what has "arrived" by now, in arrival order
        pending.sort(key=lambda p: p[0])
        cut = next((i for i, (arrival, _) in enumerate(pending) if arrival > tick), len(pending))
        for _, reading in pending[:cut]:
            yield reading
        del pending[:cut]
    pending.sort(key=lambda p: p[0])
    for _, reading in pending:
        yield reading


def generate(
    url: str, stream: str, sensors: int, minutes: float, period_ms: int, seed: int = 7, maxlen: int | None = None
) -> int:
    client = redis.Redis.from_url(url)
    start_ms = int(time.time() * 1000) - int(minutes * 60_000)
    pipe = client.pipeline(transaction=False)
    written = 0
    started = time.perf_counter()
    trim = {"maxlen": maxlen, "approximate": True} if maxlen else {}
    for reading in readings(sensors, minutes, period_ms, start_ms, seed):
        pipe.xadd(stream, reading, **trim)
        written += 1
        if written % 1000 == 0:
            pipe.execute()
        if written % 20_000 == 0:
            say("generator", f"{written} readings written")
    pipe.execute()
    elapsed = time.perf_counter() - started
    info = client.xinfo_stream(stream)
    say(
        "generator",
        f"wrote {written} readings from {sensors} sensors covering {minutes:g} min of event time "
        f"to {stream!r} in {elapsed:.1f}s ({written / elapsed:,.0f}/s); stream length {info['length']}",
    )
    client.close()
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(parser)
    parser.add_argument("--stream", default=RAW_STREAM)
    parser.add_argument("--sensors", type=int, default=20)
    parser.add_argument("--minutes", type=float, default=10.0, help="minutes of event time to simulate")
    parser.add_argument("--period-ms", type=int, default=2000, help="each sensor reports this often (event time)")
    parser.add_argument("--maxlen", type=int, default=None, help="cap the stream with XADD MAXLEN ~")
    args = parser.parse_args(argv)
    generate(args.url, args.stream, args.sensors, args.minutes, args.period_ms, maxlen=args.maxlen)


if __name__ == "__main__":
    main()
