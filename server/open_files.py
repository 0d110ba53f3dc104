"""The open-files limit at start-up, as Redis's adjustOpenFilesLimit.

Every client is a file descriptor, and the server needs a few more of its own
(listeners, log, snapshot and AOF files, the event loop's): maxclients + 32. The
soft limit is raised that far if the hard limit lets it (Redis asks for the
hard limit too, stepping down 16 at a time until the system agrees); where it
cannot be, maxclients is lowered to what fits, with Redis's three warnings, so
that a client past it is told `-ERR max number of clients reached` instead of
being dropped by a failing accept. With 32 descriptors or fewer the server
cannot start.
"""

from __future__ import annotations

import logging
import os
import resource
import sys

log = logging.getLogger("millrace")

MIN_RESERVED_FDS = 32  # CONFIG_MIN_RESERVED_FDS: descriptors kept for the server's own files
STEP = 16  # Redis's decrement between two refused limits


def _raise_limit(maxfiles: int) -> tuple[int, int, int]:
    """(the limit now, the limit before, the last refusal's errno): RLIMIT_NOFILE raised toward maxfiles,
    16 less each time the system refuses."""
    old, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if old == resource.RLIM_INFINITY or old >= maxfiles:
        return maxfiles, old, 0
    best, error = maxfiles, 0
    # Redis steps down 16 at a time from maxfiles: start where the system may agree, at the first step at
    # or below the ceiling (the hard limit, or for a privileged process fs.nr_open), so a maxclients of
    # 4294967295 costs a few calls and not hundreds of millions
    ceiling = _nr_open() if os.geteuid() == 0 else hard
    if ceiling != resource.RLIM_INFINITY and best > ceiling:
        best -= -(-(best - ceiling) // STEP) * STEP
    while best > old:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (best, best))
            break
        except (OSError, ValueError) as exc:
            error = getattr(exc, "errno", None) or 1  # EPERM: Python says ValueError for some refusals
            best -= STEP
    return max(best, old), old, error


def _nr_open() -> int:
    """The most descriptors any process may be allowed (Linux's fs.nr_open)."""
    try:
        with open("/proc/sys/fs/nr_open") as value:
            return int(value.read())
    except (OSError, ValueError):
        return resource.RLIM_INFINITY


def clients_that_fit(maxclients: int) -> int:
    """CONFIG SET maxclients (Redis's updateMaxclients): the limit raised for that many clients if it
    can be; how many fit (maxclients itself when they all do)."""
    maxfiles = _descriptors_for(maxclients)
    best, _old, _error = _raise_limit(maxfiles)
    return maxclients if best >= maxfiles else best - MIN_RESERVED_FDS


def _descriptors_for(maxclients: int) -> int:
    """maxclients + 32 as Redis sums them, in an unsigned int: past 4294967263 clients it wraps round
    (Redis 8.2.3 then accepts maxclients 4294967295 with the descriptors it has)."""
    return (maxclients + MIN_RESERVED_FDS) & 0xFFFFFFFF


def adjust_open_files_limit(config) -> None:
    """Raise RLIMIT_NOFILE toward maxclients + 32, else lower maxclients; exits when nothing fits."""
    maxclients = config["maxclients"]
    maxfiles = _descriptors_for(maxclients)
    best, old, error = _raise_limit(maxfiles)
    if old == resource.RLIM_INFINITY or old >= maxfiles:
        return
    if best >= maxfiles:
        log.info("Increased maximum number of open files to %d (it was originally set to %d).", maxfiles, old)
        return
    if best <= MIN_RESERVED_FDS:
        log.warning("Your current 'ulimit -n' of %d is not enough for the server to start. "
                    "Please increase your open file limit to at least %d. Exiting.", old, maxfiles)
        sys.exit(1)
    reduced = best - MIN_RESERVED_FDS
    log.warning("You requested maxclients of %d requiring at least %d max file descriptors.", maxclients, maxfiles)
    log.warning("Server can't set maximum open files to %d because of OS error: %s.", maxfiles, os.strerror(error))
    log.warning("Current maximum open files is %d. maxclients has been reduced to %d to compensate for low ulimit. "
                "If you need higher maxclients increase 'ulimit -n'.", best, reduced)
    config.startup_set("maxclients", str(reduced))
