"""Loading an AOF or a snapshot does not hold the file in the heap beside the data it loads.

120 overwrites of one key with 1 MB values make a 120 MB increment for 1 MB of
data. Read whole into a bytes object, the file took 120 MB of heap while it
loaded; memory-mapped, it stays in the page cache, which the kernel can
reclaim. The server is restarted with its data segment (RLIMIT_DATA: heap and
private writable mappings, not a read-only file mapping) limited to 80 MB, four
times its usual size: it must load. The same file, cut inside its last command,
still loads to the last whole command with `aof-load-truncated yes`.
"""

from __future__ import annotations

import os
import shutil
import sys

import pytest

from tests.servers import ServerProcess, free_port, start_millrace
from tests.test_persistence import kill9

VALUE = 1 << 20
WRITES = 120
DATA_LIMIT = 80 << 20

pytestmark = pytest.mark.skipif(shutil.which("prlimit") is None and os.environ.get("CI") != "true", reason="prlimit (util-linux) is not installed")


def _limited(workdir: str, *args: str, limit: int = DATA_LIMIT) -> ServerProcess:
    """Millrace whose data segment is limited to `limit` bytes."""
    port = free_port()
    argv = ["prlimit", f"--data={limit}", sys.executable, "-m", "server", "--port", str(port), "--dir", workdir, *args]
    return ServerProcess(argv, port, workdir, "millrace")


def _increment(workdir: str) -> str:
    directory = os.path.join(workdir, "appendonlydir")
    (name,) = [n for n in os.listdir(directory) if n.endswith(".incr.aof")]
    return os.path.join(directory, name)


def test_a_large_aof_loads_without_its_size_in_memory(tmp_path):
    args = ("--appendonly", "yes", "--appendfsync", "always", "--auto-aof-rewrite-percentage", "0")
    server = start_millrace(*args, workdir=str(tmp_path))
    client = server.client()
    for n in range(WRITES):
        client.set("k", bytes([n % 251]) * VALUE)
    client.set("last", "seen")
    kill9(server)
    path = _increment(str(tmp_path))
    assert os.path.getsize(path) > WRITES * VALUE

    server = _limited(str(tmp_path), *args)  # read whole, the file alone is over the limit
    try:
        client = server.client()
        assert client.get("k") == bytes([(WRITES - 1) % 251]) * VALUE
        assert client.get("last") == b"seen"
    finally:
        server.stop()

    with open(path, "r+b") as handle:  # cut inside the last command: SET last seen
        handle.truncate(os.path.getsize(path) - 3)
    server = _limited(str(tmp_path), *args, "--aof-load-truncated", "yes")
    try:
        client = server.client()
        assert client.get("last") is None
        assert client.get("k") == bytes([(WRITES - 1) % 251]) * VALUE
    finally:
        server.stop()


def test_a_snapshot_loads_with_its_data_and_a_chunk_in_memory(tmp_path):
    """120 MB of values in a snapshot: read whole and fed to msgpack whole, loading took the data
    plus two copies of the file (~400 MB); decoded from the mapped file a chunk at a time it takes
    the data and a chunk, under a 250 MB data limit."""
    server = start_millrace("--appendonly", "no", workdir=str(tmp_path))
    client = server.client()
    for n in range(WRITES):
        client.set(f"k{n}", bytes([n % 251]) * VALUE)
    assert client.save()
    server.stop()
    server = _limited(str(tmp_path), "--appendonly", "no", limit=250 << 20)
    try:
        client = server.client()
        assert client.dbsize() == WRITES
        assert all(client.get(f"k{n}") == bytes([n % 251]) * VALUE for n in (0, 57, WRITES - 1))
    finally:
        server.stop()
