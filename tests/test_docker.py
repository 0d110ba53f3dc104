"""docker/: a small build context, a non-root user, a volume for `dir`, a health check.

The image is built and run where a Docker daemon answers; elsewhere that test is
skipped with the reason, and the parts that need no Docker (what the build context
holds, the Dockerfile's settings, the health check's command against a real server)
are checked anyway.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shutil
import subprocess
import sys
import time
import uuid

import pytest
import redis

from tests.servers import ROOT, free_port, start_millrace

DOCKERFILE = (ROOT / "docker" / "Dockerfile").read_text()


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE)
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in text.splitlines()
            if line.strip() and not line.startswith("#")]


def in_context(path: str) -> bool:
    """Whether .dockerignore lets `path` (relative to the repository root) into the build context."""
    included = True
    for rule in (ROOT / ".dockerignore").read_text().splitlines():
        rule = rule.strip()
        if not rule or rule.startswith("#"):
            continue
        negated = rule.startswith("!")
        pattern = rule.lstrip("!").rstrip("/")
        parts = path.split("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        hit = any(fnmatch.fnmatch(p, pattern) for p in prefixes) or (
            pattern.startswith("**/") and any(fnmatch.fnmatch(part, pattern[3:]) for part in parts))
        if hit:
            included = negated
    return included


def test_build_context_holds_what_the_image_copies_and_nothing_big():
    copied = [word for op, args in instructions() if op == "COPY" for word in args.split()[:-1]]
    assert copied, "no COPY in the Dockerfile"
    for path in copied:
        assert in_context(path), f"{path} is copied but .dockerignore leaves it out"
        assert in_context(f"{path}/x.py") or not (ROOT / path).is_dir()
    for path in (".venv", ".venv/lib/python3.11/site-packages/pyspark/__init__.py", "data", ".git/HEAD", "tests/test_docker.py",
                 "bench/__main__.py", "server/__pycache__/main.cpython-311.pyc"):
        assert not in_context(path), f"{path} would be sent to the Docker daemon"


def test_dockerfile_runs_unprivileged_with_a_volume_and_a_health_check():
    ops = instructions()
    names = [op for op, _ in ops]
    user = [args for op, args in ops if op == "USER"]
    assert user and user[-1].split(":")[0] not in ("root", "0")
    assert names.index("USER") < names.index("CMD")
    volume = [args for op, args in ops if op == "VOLUME"]
    command = json.loads(next(args for op, args in ops if op == "CMD"))
    assert volume == ["/data"] and command[command.index("--dir") + 1] == "/data"
    assert "HEALTHCHECK" in names


def health_command() -> list[str]:
    args = next(args for op, args in instructions() if op == "HEALTHCHECK")
    return json.loads(args[args.index("CMD") + 3:].strip())


def test_health_check_command_against_a_real_server(tmp_path):
    """The HEALTHCHECK's own command, pointed at a local server: 0 while it answers, 1 once it is gone."""
    command = health_command()
    assert command[0] == "python"
    proc = start_millrace(workdir=str(tmp_path))
    script = command[-1].replace("6379", str(proc.port))
    try:
        assert subprocess.run([sys.executable, "-c", script], timeout=10).returncode == 0
        with proc.client() as client:
            client.config_set("requirepass", "secret")
        assert subprocess.run([sys.executable, "-c", script], timeout=10).returncode == 0  # NOAUTH: up
    finally:
        proc.stop()
    assert subprocess.run([sys.executable, "-c", script], timeout=10, capture_output=True).returncode != 0


def _docker_unavailable() -> str | None:
    if shutil.which("docker") is None:
        return "docker is not installed"
    done = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        return "no Docker daemon answers here: " + (done.stderr.strip().splitlines() or ["docker info failed"])[-1]
    return None


def test_image_builds_runs_healthy_as_non_root_and_keeps_data():
    reason = _docker_unavailable()
    if reason:
        pytest.skip(reason)
    tag = f"millrace-test:{uuid.uuid4().hex[:8]}"
    volume = f"millrace-test-{uuid.uuid4().hex[:8]}"
    port = free_port()
    subprocess.run(["docker", "build", "-q", "-f", "docker/Dockerfile", "-t", tag, "."], cwd=ROOT, check=True, timeout=900)
    name = f"millrace-test-{uuid.uuid4().hex[:8]}"
    run = ["docker", "run", "-d", "--name", name, "-p", f"127.0.0.1:{port}:6379", "-v", f"{volume}:/data", tag]
    try:
        subprocess.run(run, check=True, capture_output=True, timeout=60)
        deadline = time.monotonic() + 90
        while True:
            status = subprocess.run(["docker", "inspect", "--format", "{{.State.Health.Status}}", name],
                                    capture_output=True, text=True).stdout.strip()
            if status == "healthy":
                break
            assert time.monotonic() < deadline, status
            time.sleep(1)
        uid = subprocess.run(["docker", "exec", name, "id", "-u"], capture_output=True, text=True, check=True).stdout.strip()
        assert uid != "0"
        client = redis.Redis(port=port, socket_timeout=10)
        entry = client.xadd("s", {"k": "v"})
        subprocess.run(["docker", "rm", "-f", name], check=True, capture_output=True)
        subprocess.run(run, check=True, capture_output=True, timeout=60)  # a new container on the same volume
        deadline = time.monotonic() + 60
        while True:
            try:
                assert [e[0] for e in redis.Redis(port=port, socket_timeout=10).xrange("s")] == [entry]
                break
            except redis.ConnectionError:
                assert time.monotonic() < deadline
                time.sleep(0.5)
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)
        subprocess.run(["docker", "volume", "rm", "-f", volume], capture_output=True)
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)
