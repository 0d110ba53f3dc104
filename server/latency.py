"""Latency monitoring as Redis does it: spike events (LATENCY LATEST/HISTORY/GRAPH/DOCTOR)
and per-command latency histograms (LATENCY HISTOGRAM, INFO latencystats).

Redis records each command's duration in whole microseconds, as nanoseconds, into
an HdrHistogram (1 ns .. 1 s, 2 significant figures) and reports its percentiles
and a power-of-two CDF. The hot path here only counts durations per microsecond
in a dict on the command (`record_us`); the HdrHistogram's bucket arithmetic is
applied when someone asks, so every figure is the one Redis's histogram gives
for the same durations.

Spike events (`latency-monitor-threshold`, in ms): one time series per event
name, 160 samples of (unix second, ms), one per second holding that second's
worst, and the all-time maximum; as latency.c.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

# HdrHistogram as Redis configures it: LATENCY_HISTOGRAM_MIN/MAX_VALUE, PRECISION 2
HIST_MIN_NS = 1
HIST_MAX_NS = 1_000_000_000
_SUB_BUCKET_HALF_MAGNITUDE = 7  # sub_bucket_count 256 = 2^ceil(log2(2 * 10^2))
_SUB_BUCKET_HALF = 1 << _SUB_BUCKET_HALF_MAGNITUDE
_SUB_BUCKET_MASK = (1 << (_SUB_BUCKET_HALF_MAGNITUDE + 1)) - 1
EXACT_US = 4096  # durations below this keep their own dict key; longer ones share their HDR bucket's


def _bucket(value: int) -> tuple[int, int]:
    bucket = (value | _SUB_BUCKET_MASK).bit_length() - (_SUB_BUCKET_HALF_MAGNITUDE + 1)
    return bucket, value >> bucket


def hdr_index(value: int) -> int:
    """The counts index HdrHistogram gives a value (ns)."""
    bucket, sub = _bucket(value)
    return ((bucket + 1) << _SUB_BUCKET_HALF_MAGNITUDE) + sub - _SUB_BUCKET_HALF


def value_at_index(index: int) -> int:
    bucket = (index >> _SUB_BUCKET_HALF_MAGNITUDE) - 1
    sub = (index & (_SUB_BUCKET_HALF - 1)) + _SUB_BUCKET_HALF
    if bucket < 0:
        sub -= _SUB_BUCKET_HALF
        bucket = 0
    return sub << bucket


def lowest_equivalent(value: int) -> int:
    bucket, sub = _bucket(value)
    return sub << bucket


def highest_equivalent(value: int) -> int:
    bucket, sub = _bucket(value)
    size = 1 << (bucket + 1 if sub >= 2 * _SUB_BUCKET_HALF else bucket)
    return (sub << bucket) + size - 1


def us_to_ns(us: int) -> int:
    """A duration in whole microseconds as Redis records it: ns, clamped to the histogram's range."""
    return min(max(us * 1000, HIST_MIN_NS), HIST_MAX_NS)


def coarse_us(us: int) -> int:
    """A long duration's key: the smallest whole µs in the same HDR bucket (bounds the dict's size)."""
    low = lowest_equivalent(us_to_ns(us))
    return -(-low // 1000)


def record_us(histogram: dict[int, int], us: int) -> None:
    """Count one duration (what Server.call inlines)."""
    if us >= EXACT_US:
        us = coarse_us(us)
    histogram[us] = histogram.get(us, 0) + 1


def _counts(histogram: dict[int, int]) -> list[tuple[int, int]]:
    """(hdr index, count) in index order."""
    merged: dict[int, int] = {}
    for us, count in histogram.items():
        index = hdr_index(us_to_ns(us))
        merged[index] = merged.get(index, 0) + count
    return sorted(merged.items())


def value_at_percentile(histogram: dict[int, int], percentile: float) -> int:
    """hdr_value_at_percentile, in ns."""
    counts = _counts(histogram)
    total = sum(count for _, count in counts)
    wanted = max(int(min(percentile, 100.0) / 100 * total + 0.5), 1)
    seen = 0
    for index, count in counts:
        seen += count
        if seen >= wanted:
            value = value_at_index(index)
            return lowest_equivalent(value) if percentile == 0.0 else highest_equivalent(value)
    return 0


def cdf(histogram: dict[int, int]) -> list[tuple[int, int]]:
    """LATENCY HISTOGRAM's histogram_usec: (µs bound, cumulative calls) at 1024 ns * 2^k, where it grows."""
    counts = _counts(histogram)
    total = sum(count for _, count in counts)
    out: list[tuple[int, int]] = []
    level, position, cumulative, previous = 1024, 0, 0, 0
    while total and previous < total:
        limit = hdr_index(level)
        while position < len(counts) and counts[position][0] <= limit:
            cumulative += counts[position][1]
            position += 1
        if cumulative > previous:
            out.append((highest_equivalent(level) // 1000, cumulative))
        previous = cumulative
        level *= 2
    return out


def percentile_label(value: float) -> str:
    """Redis's "%f" then trimDoubleString: 50 -> "50", 99.9 -> "99.9"."""
    text = f"{value:f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def percentiles_line(histogram: dict[int, int], percentiles: list[float]) -> str:
    """`p50=1.003,p99=2.007,...` of INFO latencystats."""
    return ",".join(f"p{percentile_label(p)}={value_at_percentile(histogram, p) / 1000.0:.3f}" for p in percentiles)


# -- spike events ------------------------------------------------------------

TS_LEN = 160  # LATENCY_TS_LEN
NEVER = 1 << 62  # a threshold no duration reaches


def threshold_ns(ms: int) -> int:
    """latency-monitor-threshold (ms, 0: off) as the ns a command must reach to be a spike."""
    return ms * 1_000_000 if ms > 0 else NEVER
GRAPH_COLS = 80  # LATENCY_GRAPH_COLS


@dataclass
class TimeSeries:
    samples: list[tuple[int, int]] = field(default_factory=list)  # (unix s, ms), oldest first, at most TS_LEN
    max: int = 0


class LatencyMonitor:
    """The events Redis's latencyAddSampleIfNeeded records, by name, in the order they first happened."""

    def __init__(self) -> None:
        self.events: dict[str, TimeSeries] = {}

    def add(self, event: str, ms: int, now: int | None = None) -> None:
        now = int(time.time()) if now is None else now
        series = self.events.get(event)
        if series is None:
            series = self.events[event] = TimeSeries()
        series.max = max(series.max, ms)
        samples = series.samples
        if samples and samples[-1][0] == now:
            if ms > samples[-1][1]:
                samples[-1] = (now, ms)
            return
        samples.append((now, ms))
        if len(samples) > TS_LEN:
            del samples[0]

    def reset(self, events: list[str]) -> int:
        """LATENCY RESET: how many of the named events (all when none) were there."""
        if not events:
            count = len(self.events)
            self.events.clear()
            return count
        return sum(1 for event in events if self.events.pop(event, None) is not None)

    def latest(self) -> list[list]:
        return [[name.encode(), s.samples[-1][0], s.samples[-1][1], s.max] for name, s in self.events.items()]

    def history(self, event: str) -> list[list[int]]:
        series = self.events.get(event)
        return [] if series is None else [[when, ms] for when, ms in series.samples]


def graph(event: str, series: TimeSeries, now: int) -> str:
    """LATENCY GRAPH: latency.c's header and sparkline.c's rendering (4 rows, filled, age labels)."""
    values = [ms for _, ms in series.samples]
    labels = [_age(now - when) for when, _ in series.samples]
    head = f"{event} - high {max(values)} ms, low {min(values)} ms (all time high {series.max} ms)\n" + "-" * GRAPH_COLS + "\n"
    chunks = [_render(values, labels, start, min(GRAPH_COLS, len(values) - start)) for start in range(0, len(values), GRAPH_COLS)]
    return head + "\n".join(chunks)


def _age(seconds: int) -> str:
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m"
    if seconds < 86400:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


_FILL = "_o#"  # sparkline.c's charset_fill
_ROWS = 4


def _render(values: list[int], labels: list[str], offset: int, length: int) -> str:
    low, high = min(values), max(values)  # the whole sequence's, as sparkline.c
    relmax = (high - low) or 1
    steps = len(_FILL) * _ROWS
    out = []
    row = 0
    while True:
        chars = [" "] * length
        more = False
        for j in range(length):
            step = min(max(int((values[offset + j] - low) * steps / relmax), 0), steps - 1)
            if row < _ROWS:
                more = True
                index = step - (_ROWS - row - 1) * len(_FILL)
                if 0 <= index < len(_FILL):
                    chars[j] = _FILL[index]
                elif index >= len(_FILL):
                    chars[j] = "|"
            elif row - _ROWS < 1:  # one blank line above the labels
                more = True
                break
            else:
                label, at = labels[offset + j], row - _ROWS - 1
                if len(label) > at:
                    more = True
                    chars[j] = label[at]
        if not more:
            return "".join(out)
        out.append("".join(chars) + "\n")
        row += 1


# -- LATENCY DOCTOR --------------------------------------------------------------

_NOTHING = (
    "Dave, no latency spike was observed during the lifetime of this Redis instance, not in the slightest bit. "
    "I honestly think you ought to sit down calmly, take a stress pill, and think things over.\n"
)
_DISABLED = (
    "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis instance. You may use "
    '"CONFIG SET latency-monitor-threshold <milliseconds>." in order to enable it. If we weren\'t in a deep space '
    "mission I'd suggest to take a look at https://redis.io/docs/latest/operate/oss_and_stack/management/optimization/latency-monitor.\n"
)


def doctor(monitor: LatencyMonitor, threshold_ms: int, slowlog_slower_than: int, slowlog_max_len: int, now: int) -> str:
    """latency.c's createLatencyReport for the events Millrace records (command, fast-command, expire-cycle)."""
    if not monitor.events and threshold_ms == 0:
        return _DISABLED
    report = []
    advice = {"slowlog-enable": False, "slowlog-tune": False, "slowlog-inspect": False, "scheduler": False, "large": False}
    for number, (event, series) in enumerate(monitor.events.items(), 1):
        if number == 1:
            report.append("Dave, I have observed latency spikes in this Redis instance. You don't mind talking about it, do you Dave?\n\n")
        values = [ms for _, ms in series.samples]
        avg = sum(values) // len(values)
        period = max(now - min(when for when, _ in series.samples), 1)
        mad = sum(abs(avg - v) for v in values) // len(values)
        report.append(
            f"{number}. {event}: {len(values)} latency spikes (average {avg}ms, mean deviation {mad}ms, "
            f"period {period / len(values):.2f} sec). Worst all time event {series.max}ms."
        )
        if event == "command":
            if slowlog_slower_than < 0 or slowlog_max_len == 0:
                advice["slowlog-enable"] = True
            elif slowlog_slower_than // 1000 > threshold_ms:
                advice["slowlog-tune"] = True
            advice["slowlog-inspect"] = advice["large"] = True
        elif event == "fast-command":
            advice["scheduler"] = True
        elif event == "expire-cycle":
            advice["large"] = True
        report.append("\n")
    if not monitor.events:
        return _NOTHING
    if not any(advice.values()):
        report.append(
            "\nWhile there are latency events logged, I'm not able to suggest any easy fix. Please use the Redis community "
            "to get some help, providing this report in your help request.\n"
        )
        return "".join(report)
    report.append("\nI have a few advices for you:\n\n")
    if advice["slowlog-enable"]:
        report.append(
            "- There are latency issues with potentially slow commands you are using. Try to enable the Slow Log Redis feature "
            f"using the command 'CONFIG SET slowlog-log-slower-than {threshold_ms * 1000}'. If the Slow log is disabled Redis "
            "is not able to log slow commands execution for you.\n"
        )
    if advice["slowlog-tune"]:
        report.append(
            "- Your current Slow Log configuration only logs events that are slower than your configured latency monitor "
            f"threshold. Please use 'CONFIG SET slowlog-log-slower-than {threshold_ms * 1000}'.\n"
        )
    if advice["slowlog-inspect"]:
        report.append(
            "- Check your Slow Log to understand what are the commands you are running which are too slow to execute. "
            "Please check https://redis.io/commands/slowlog for more information.\n"
        )
    if advice["scheduler"]:
        report.append(
            "- The system is slow to execute Redis code paths not containing system calls. This usually means the system "
            "does not provide Redis CPU time to run for long periods. You should try to:\n"
            "  1) Lower the system load.\n"
            "  2) Use a computer / VM just for Redis if you are running other software in the same system.\n"
            '  3) Check if you have a "noisy neighbour" problem.\n'
            "  4) Check with 'redis-cli --intrinsic-latency 100' what is the intrinsic latency in your system.\n"
            "  5) Check if the problem is allocator-related by recompiling Redis with MALLOC=libc, if you are using Jemalloc. "
            "However this may create fragmentation problems.\n"
        )
    if advice["large"]:
        report.append(
            "- Deleting, expiring or evicting (because of maxmemory policy) large objects is a blocking operation. If you "
            "have very large objects that are often deleted, expired, or evicted, try to fragment those objects into "
            "multiple smaller objects.\n"
        )
    return "".join(report)
