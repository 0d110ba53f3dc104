"""XCLAIM and XAUTOCLAIM generators shared by the random group workloads."""

from __future__ import annotations

import random
from collections.abc import Callable

FAR = 10**12  # a min-idle no entry reaches


def xclaim(rnd: random.Random, key: str, group: str, consumer: str, some_id: Callable[[str], str], idle: float, time: float = 0.0) -> list[str]:
    """XCLAIM with a random mix of options: IDLE with chance `idle`, else TIME with chance `time`."""
    options = []
    if rnd.random() < idle:
        options += ["IDLE", str(rnd.randint(0, 3000))]
    elif time and rnd.random() < time:
        options += ["TIME", str(rnd.choice([0, 1000]))]
    if rnd.random() < 0.3:
        options += ["RETRYCOUNT", str(rnd.randint(0, 5))]
    for flag in ("FORCE", "JUSTID"):
        if rnd.random() < 0.3:
            options.append(flag)
    if rnd.random() < 0.1:
        options += ["LASTID", some_id(key)]
    ids = [some_id(key) for _ in range(rnd.randint(1, 3))]
    return ["XCLAIM", key, group, consumer, str(rnd.choice([0, 0, FAR])), *ids, *options]


def xautoclaim(rnd: random.Random, key: str, group: str, consumer: str, some_id: Callable[[str], str]) -> list[str]:
    """XAUTOCLAIM from a random start, with or without COUNT and JUSTID."""
    options = ["COUNT", str(rnd.randint(1, 3))] if rnd.random() < 0.6 else []
    if rnd.random() < 0.3:
        options.append("JUSTID")
    start = rnd.choice(["0", "-", "(" + some_id(key), some_id(key)])
    return ["XAUTOCLAIM", key, group, consumer, str(rnd.choice([0, FAR])), start, *options]
