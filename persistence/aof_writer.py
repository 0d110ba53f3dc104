"""Appending to the open AOF increment with the durability `appendfsync` promises.

Effects are buffered as they are propagated and written once per event-loop
turn, before that turn's replies go out (Redis's flushAppendOnlyFile in
beforeSleep): under `always` the write is also fsynced there, so one fsync
covers every write of the turn (group commit) and no reply precedes it. Under
`everysec` a background thread fsyncs about once a second; while one is still
running, writes are postponed up to two seconds and then done anyway, so a
slow disk delays the server as it delays Redis instead of growing a buffer.
A failed write keeps the buffer for the next try, which may be in a new
increment (a rewrite opens one), as Redis's aof_buf.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time

from .aof import encode_batch

log = logging.getLogger("millrace")
WRITE_ERROR_LOG_EVERY = 30  # seconds between two logs of the same failing write (AOF_WRITE_LOG_ERROR_RATE)


class AofWriter:
    """The open increment file, its unwritten buffer and its fsync state."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.size = os.fstat(self.fd).st_size  # bytes in the file
        self.buffer: list[bytes] = []  # encoded effects not yet written
        self.synced = self.size  # bytes known to be on disk
        self.last_fsync = time.monotonic()
        self.write_error: OSError | None = None  # the last write failed (MISCONF until one succeeds)
        self.fsync_error: OSError | None = None
        self.postponed_since = 0.0
        self.delayed_fsync = 0  # INFO aof_delayed_fsync
        self._fsyncing: threading.Thread | None = None
        self.timestamps = False  # aof-timestamp-enabled: a `#TS:<unix seconds>` line when the second changes
        self._timestamp = 0
        self._error_logged = float("-inf")
        self.hold_fsync = False  # no-appendfsync-on-rewrite while a child writes: no fsync until it ends (the owner sets it)

    def feed(self, batch: list[list[bytes]]) -> None:
        if self.timestamps:
            now = int(time.time())
            if now > self._timestamp:  # Redis's genAofTimestampAnnotationIfNeeded
                self._timestamp = now
                self.buffer.append(b"#TS:%d\r\n" % now)
        self.buffer.append(encode_batch(batch))

    @property
    def buffered(self) -> int:
        return sum(map(len, self.buffer))

    def fsync_in_progress(self) -> bool:
        return self._fsyncing is not None and self._fsyncing.is_alive()

    def flush(self, policy: str, force: bool = False) -> bool:
        """Write the buffer (and fsync under `always`); False if a write failed (the buffer is kept).

        Raises OSError only under `always`, where the caller cannot go on: the
        file is cut back to its last whole write first. `write_error` holds the
        errno MISCONF reports (ENOSPC after a partial write, as Redis).
        """
        if not self.buffer:
            if policy == "always" and self.synced < self.size and not self.hold_fsync:
                self._fsync_always()  # (what a held fsync left unsynced, once the child is gone)
            return True
        if policy == "everysec" and not force and self.fsync_in_progress():
            now = time.monotonic()
            if not self.postponed_since:
                self.postponed_since = now
                return True
            if now - self.postponed_since < 2:
                return True
            self.delayed_fsync += 1  # the fsync takes too long: write anyway, as Redis does
        self.postponed_since = 0.0
        data = b"".join(self.buffer)
        written = 0
        try:
            view = memoryview(data)
            while written < len(data):
                written += os.write(self.fd, view[written:])
        except OSError as exc:
            self._failed(exc, data, written)
            if policy == "always":
                raise self.write_error from exc
            return False
        self.buffer = []
        self.size += len(data)
        if self.write_error is not None:
            log.info("AOF write error looks solved, Millrace can write again.")
        self.write_error = None
        if policy == "always" and not self.hold_fsync:
            self._fsync_always()
        return True

    def _failed(self, exc: OSError, data: bytes, written: int) -> None:
        """As Redis's flushAppendOnlyFile: a write that failed outright reports its errno; one that
        wrote part of the data reports ENOSPC, and the part is cut off again (never half a command)
        or, if the file cannot be cut, kept and the rest left to write."""
        now = time.monotonic()
        quiet = now - self._error_logged < WRITE_ERROR_LOG_EVERY
        if not quiet:
            self._error_logged = now
        if not written:
            if not quiet:
                log.warning("Error writing to the AOF file: %s", exc.strerror or exc)
            self.write_error = exc
            return
        if not quiet:
            log.warning("Short write while writing to the AOF file: (nwritten=%d, expected=%d)", written, len(data))
        self.write_error = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        try:
            os.ftruncate(self.fd, self.size)
        except OSError as cut:
            if not quiet:
                log.warning(
                    "Could not remove short write from the append-only file.  Millrace may refuse to load the AOF the next time it starts.  ftruncate: %s",
                    cut.strerror or cut,
                )
            self.size += written
            self.buffer = [data[written:]]

    def adopt(self, old: AofWriter, db: int) -> None:
        """Take what a failed write left in old's buffer (Redis's aof_buf outlives the increment it
        was meant for, so a new increment takes it); its commands were fed for database `db`."""
        if old.buffer:
            select = [encode_batch([[b"SELECT", str(db).encode()]])] if db >= 0 else []
            self.buffer = select + old.buffer + self.buffer
            self.write_error = old.write_error
            self._error_logged = old._error_logged

    def _fsync_always(self) -> None:
        os.fsync(self.fd)
        self.synced = self.size
        self.last_fsync = time.monotonic()

    def cron(self, policy: str) -> None:
        """Retry a failed write; under `everysec`, start a background fsync once a second."""
        if self.buffer and self.write_error is not None:
            self.flush(policy, force=True)
        if policy == "everysec" and self.synced < self.size and not self.hold_fsync and not self.fsync_in_progress():
            if time.monotonic() - self.last_fsync >= 1:
                self._fsyncing = threading.Thread(target=self._background_fsync, args=(self.size,), daemon=True)
                self._fsyncing.start()

    def _background_fsync(self, size: int) -> None:
        try:
            os.fsync(self.fd)
        except OSError as exc:
            self.fsync_error = exc
            return
        self.fsync_error = None
        self.synced = max(self.synced, size)
        self.last_fsync = time.monotonic()

    def sync(self) -> None:
        """Write and fsync everything now (shutdown, a rewrite's switch, DEBUG LOADAOF)."""
        if self._fsyncing is not None:
            self._fsyncing.join()
        self.hold_fsync = False
        self.flush("always", force=True)

    def close(self) -> None:
        if self._fsyncing is not None:
            self._fsyncing.join()
        os.close(self.fd)
