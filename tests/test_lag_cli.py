"""millrace-lag (tools/lag.py) against Millrace (XGROUPLAG) and against Redis 8.2.3 (its XINFO fallback)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from tools.lag import COLUMNS, render_rich

ROOT = Path(__file__).resolve().parent.parent


def fill(client) -> None:
    """10 entries; g read 3 of them (1 acked); a tombstone after g's position; h caught up; an empty stream's group."""
    for ms in range(1, 11):
        client.xadd("orders", {"f": str(ms)}, id=f"{ms}-0")
    client.xgroup_create("orders", "g", id="0")
    client.xgroup_create("orders", "h", id="$")
    client.xreadgroup("g", "alice", {"orders": ">"}, count=3)
    client.xack("orders", "g", "1-0")
    client.xdel("orders", "7-0")
    client.xgroup_create("empty", "e", id="$", mkstream=True)
    client.set("not-a-stream", "x")


def run(port: int, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "tools.lag", "--url", f"redis://127.0.0.1:{port}/0", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_json_against_millrace_is_exact(r2, server) -> None:
    fill(r2)
    rows = json.loads(run(server.port, "--json"))
    assert [(row["stream"], row["group"]) for row in rows] == [("empty", "e"), ("orders", "g"), ("orders", "h")]
    g = rows[1]
    assert (g["consumers"], g["entries-read"], g["lag"], g["pending"], g["status"]) == (1, 3, 6, 2, "OK")
    assert g["oldest-undelivered-ms"] > 1_700_000_000_000  # entry 4-0 is as old as 1970
    assert (rows[2]["lag"], rows[2]["pending"], rows[2]["oldest-undelivered-ms"]) == (0, 0, 0)
    assert json.loads(run(server.port, "--json", "orders"))[0]["group"] == "g"


def test_json_against_redis_falls_back_to_xinfo(oracle_server) -> None:
    client = oracle_server.client()
    client.flushall()
    fill(client)
    rows = json.loads(run(oracle_server.port, "--json"))
    g = rows[1]
    # Redis cannot know g's lag (a tombstone after it): nil, and no status
    assert (g["group"], g["consumers"], g["entries-read"], g["lag"], g["pending"], g["status"]) == ("g", 1, 3, None, 2, None)
    assert g["oldest-undelivered-ms"] > 1_700_000_000_000
    assert (rows[2]["group"], rows[2]["lag"]) == ("h", 0)


def test_text_table(r2, server) -> None:
    fill(r2)
    lines = run(server.port).splitlines()
    assert lines[0].split() == [c.upper() for c in COLUMNS]
    cells = [line.split() for line in lines[1:]]
    assert cells[1][:6] == ["orders", "g", "1", "3", "6", "2"] and cells[1][-1] == "OK"
    assert cells[0][:6] == ["empty", "e", "0", "0", "0", "0"]
    assert lines[2].index("OK") == lines[0].index("STATUS")  # the columns line up


def test_watch_refreshes_and_rich_renders(r2, server) -> None:
    fill(r2)
    out = run(server.port, "--watch", "0.05", "--count", "3", "--json", "orders")
    tables = [json.loads(line) for line in out.splitlines() if line]
    assert len(tables) == 3 and all(t[0]["lag"] == 6 for t in tables)
    console = Console(record=True, width=140)
    console.print(render_rich(json.loads(run(server.port, "--json")), "redis://x", True))
    text = console.export_text()
    assert "XGROUPLAG (exact)" in text and "orders" in text and "OK" in text


@pytest.mark.parametrize(("args", "message"), [(["--count", "2"], "--count needs --watch"), (["--watch", "0"], "positive")])
def test_bad_options(server, args, message) -> None:
    done = subprocess.run([sys.executable, "-m", "tools.lag", "--url", f"redis://127.0.0.1:{server.port}", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and message in done.stderr


def test_spark_source_group_lag_helper(r2, server, oracle_server) -> None:
    """pipeline.client.group_lag: XGROUPLAG's exact lag on Millrace, None on Redis (no XGROUPLAG) and for a missing group."""
    from pipeline.client import group_lag

    redis_client = oracle_server.client()
    redis_client.flushall()
    for client in (r2, redis_client):
        fill(client)
    assert group_lag(r2, "orders", "g") == 6
    assert group_lag(r2, "orders", "nope") is None
    assert group_lag(redis_client, "orders", "g") is None


def test_watch_on_a_terminal_draws_the_rich_table(r2, server) -> None:
    """On a TTY --watch redraws a rich live table (run under script(1), which gives it a pseudo-terminal)."""
    import shlex
    import shutil

    if shutil.which("script") is None:
        pytest.skip("script(1) is not installed")
    fill(r2)
    command = shlex.join([sys.executable, "-m", "tools.lag", "--url", f"redis://127.0.0.1:{server.port}/0", "--watch", "0.05", "--count", "2", "orders"])
    done = subprocess.run(["script", "-qec", command, "/dev/null"], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "COLUMNS": "150", "TERM": "xterm"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "XGROUPLAG (exact)" in done.stdout and "orders" in done.stdout and "OK" in done.stdout


def test_console_script_is_declared() -> None:
    import importlib
    import tomllib

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, name = scripts["millrace-lag"].partition(":")
    assert getattr(importlib.import_module(module), name) is not None
