"""Forked children (BGSAVE, BGREWRITEAOF, a replica's snapshot), as Redis's redisFork makes them.

The child gets a copy-on-write image of the keyspace, does its one job and
leaves with os._exit (none of the parent's cleanup runs twice). It resets the
signals the event loop handles (their wake-up pipe is the parent's) and dies
with its parent: a snapshot finished after a kill -9 of the server would
replace the file that a server started since has written.
"""

from __future__ import annotations

import ctypes
import gc
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable

from .process import OOM_BGCHILD, set_cpu_affinity, set_oom_score_adj
from .proctitle import retitle

PR_SET_PDEATHSIG = 1

# INFO stats: forks made and how long the last one took the parent (us); CONFIG RESETSTAT zeroes both
STATS = {"total_forks": 0, "latest_fork_usec": 0}


def fork(work: Callable[[], None], config=None, cpulist: str = "", title: str = "") -> int:
    """Run work() in a child process; its pid (exit status 0 if work returned, 1 if it raised).

    With `config`, the child takes the background child's OOM score, the CPUs of `cpulist`
    (bgsave-cpulist, aof-rewrite-cpulist) and its process title (`title` in the template), as
    Redis's redisFork and its callers."""
    parent = os.getpid()
    start = time.perf_counter_ns()
    pid = os.fork()
    if pid:
        STATS["latest_fork_usec"] = (time.perf_counter_ns() - start) // 1000
        STATS["total_forks"] += 1
        return pid
    code = 0
    try:
        _die_with(parent)
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        gc.disable()
        if config is not None:
            set_oom_score_adj(config, OOM_BGCHILD)
            set_cpu_affinity(cpulist)
            if title:
                retitle(config, title)
        work()
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _die_with(parent: int) -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the check below still catches a parent already gone
        pass
    if os.getppid() != parent:
        os._exit(1)


def reap(pid: int) -> int | None:
    """A child's exit code once it has ended (negative: killed by that signal), None while it runs."""
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # reaped elsewhere, or never ours: count it as failed
        return 1
    return None if done == 0 else os.waitstatus_to_exitcode(status)
