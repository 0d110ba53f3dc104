"""no-appendfsync-on-rewrite: while a child writes (here a BGSAVE), the server does not fsync its AOF,
trading durability for latency as Redis's flushAppendOnlyFile does; with `no` (the default) every write
under `appendfsync always` is fsynced as before. The fsyncs are counted by strace on the server's
main thread (the one that fsyncs under `always`; the child is not traced)."""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest

from tests.servers import fill_strings, start_millrace


def fsyncs_while_a_child_runs(hold: str, child: bool = True) -> tuple[int, int]:
    """(writes acknowledged while the BGSAVE child ran, fsyncs the main thread made meanwhile); with no
    child, the same for 50 writes."""
    server = start_millrace("--appendonly", "yes", "--appendfsync", "always", "--save", "", "--no-appendfsync-on-rewrite", hold)
    try:
        client = server.client()
        fill_strings(client, 200_000)
        log = f"{server.dir}/strace.log"
        tracer = subprocess.Popen(["strace", "-qq", "-e", "trace=fsync,fdatasync", "-o", log, "-p", str(server.proc.pid)])
        try:
            time.sleep(0.5)  # attached
            if child:
                client.bgsave()
            writes = 0
            while client.info("persistence")["rdb_bgsave_in_progress"] if child else writes < 50:
                client.set("during", writes)
                writes += 1
        finally:
            tracer.terminate()
            tracer.wait(10)
        with open(log) as handle:
            return writes, sum(1 for line in handle if line.startswith(("fsync(", "fdatasync(")))
    finally:
        server.stop()


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace (.ci/run installs it)")
def test_no_fsync_while_a_child_writes():
    writes, fsyncs = fsyncs_while_a_child_runs("yes")
    assert writes >= 20 and fsyncs <= 2  # (the last write may be fsynced once the child is reaped)
    writes, fsyncs = fsyncs_while_a_child_runs("no")
    assert writes >= 20 and fsyncs >= writes


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace (.ci/run installs it)")
def test_with_no_child_every_write_is_fsynced_all_the_same():
    writes, fsyncs = fsyncs_while_a_child_runs("yes", child=False)
    assert writes == 50 and fsyncs >= writes
