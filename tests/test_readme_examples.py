"""The README's console examples are what the server prints today: each `$ redis-cli ...`
line of a ```console block runs against a fresh Millrace and its output is compared."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from tests.servers import ROOT

pytestmark = pytest.mark.skipif(shutil.which("redis-cli") is None, reason="redis-cli is needed (apt-get install redis-tools)")


def console_blocks() -> list[list[tuple[str, list[str]]]]:
    """Each ```console block of the README as (command, expected output lines) pairs."""
    blocks = []
    for body in re.findall(r"```console\n(.*?)```", (ROOT / "README.md").read_text(), re.S):
        steps: list[tuple[str, list[str]]] = []
        for line in body.splitlines():
            if line.startswith("$ "):
                steps.append((line[2:], []))
            else:
                steps[-1][1].append(line)
        blocks.append(steps)
    return blocks


def test_readme_has_console_examples():
    assert console_blocks(), "the README lost its console examples"


@pytest.mark.parametrize("index", range(len(console_blocks())))
def test_readme_console_block(server, index):
    server.client().flushall()
    server.client().config_resetstat()
    for command, expected in console_blocks()[index]:
        assert command.startswith("redis-cli ")
        shell = command.replace("redis-cli ", f"redis-cli -p {server.port} ", 1)
        done = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, timeout=30)
        assert done.stdout.rstrip("\n").split("\n") == expected, command
