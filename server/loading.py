"""Where a load from disk stands: INFO's loading_* fields (Redis's startLoading and loadingAbsProgress)."""

from __future__ import annotations

import time


class LoadingProgress:
    """Bytes of the files being loaded: `start` with their total, `at` an offset in the current one,
    `done_file` once it is read whole."""

    __slots__ = ("start_time", "total", "done", "current")

    def __init__(self) -> None:
        self.start(0)

    def start(self, total: int) -> None:
        self.start_time = int(time.time())
        self.total, self.done, self.current = total, 0, 0

    def at(self, offset: int) -> None:
        self.current = offset

    def done_file(self, size: int) -> None:
        self.done += size
        self.current = 0

    def fields(self) -> list[tuple[str, object]]:
        """The fields Redis adds to INFO persistence while loading:1, with its estimate of the time left."""
        loaded = min(self.done + self.current, self.total)
        elapsed = int(time.time()) - self.start_time
        eta = 1 if elapsed == 0 else elapsed * (self.total - loaded) // (loaded + 1)  # Redis's fake 1 s at first
        return [
            ("loading_start_time", self.start_time),
            ("loading_total_bytes", self.total),
            ("loading_rdb_used_mem", 0),  # the generating server's memory: no Millrace file records it
            ("loading_loaded_bytes", loaded),
            ("loading_loaded_perc", "%.2f" % (loaded / self.total * 100 if self.total else 0.0)),
            ("loading_eta_seconds", eta),
        ]
