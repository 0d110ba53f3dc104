"""The process title `ps` shows (set-proc-title, proc-title-template) against Redis 8.2.3: the same
templates give the same titles, {title} aside (Redis's is its binary's path, Millrace's `millrace`)."""

from __future__ import annotations

import time

import redis

from tests.servers import fill_strings, require_redis, start_millrace, start_redis


def title_of(pid: int) -> str:
    """What ps shows: the command line up to its first NUL (a retitled process pads the rest)."""
    with open(f"/proc/{pid}/cmdline", "rb") as handle:
        raw = handle.read()
    return raw.split(b"\0")[0].decode()


def normalized(server, program: str) -> str:
    return title_of(server.proc.pid).replace(program, "T").replace(str(server.port), "P")


def story(server, program: str) -> list:
    client = server.client()
    out = [normalized(server, program)]
    for template in ("{title} port={port} cf={config-file} us={unixsocket} {{x}} ", "x}", "{server-mode}{tls-port}"):
        client.config_set("proc-title-template", template)
        out.append(normalized(server, program))
    for bad in ("{nope}", "", "   ", "{title", "{title}", "{server-mode}"):
        try:
            client.config_set("proc-title-template", bad)
            out.append((bad, "accepted"))
        except redis.ResponseError as exc:
            out.append((bad, str(exc)))
    try:
        client.config_set("set-proc-title", "no")
    except redis.ResponseError as exc:
        out.append(str(exc))
    out.append(normalized(server, program))
    return out


def test_titles_as_redis():
    require_redis()
    found = {}
    for kind, start in (("redis", start_redis), ("millrace", start_millrace)):
        server = start()
        try:
            program = title_of(server.proc.pid).split(" ")[0] if kind == "redis" else "millrace"
            found[kind] = story(server, program)
        finally:
            server.stop()
    assert found["millrace"] == found["redis"]
    assert found["millrace"][:2] == ["T 127.0.0.1:P", "T port=P cf=- us= {x}}"]


def test_set_proc_title_no_keeps_the_command_line():
    server = start_millrace("--set-proc-title", "no")
    try:
        assert "--set-proc-title" in open(f"/proc/{server.proc.pid}/cmdline", "rb").read().decode()
    finally:
        server.stop()


def test_a_snapshot_child_has_its_own_title():
    """BGSAVE's child is `millrace-rdb-bgsave <listen-addr>` in ps, as Redis's is redis-rdb-bgsave."""
    server = start_millrace()
    try:
        client = server.client()
        fill_strings(client, 200_000)
        client.bgsave()
        wanted = f"millrace-rdb-bgsave 127.0.0.1:{server.port}"
        inherited = title_of(server.proc.pid)  # what the child shows between its fork and its retitling
        seen = set()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and wanted not in seen:
            with open(f"/proc/{server.proc.pid}/task/{server.proc.pid}/children") as handle:
                for pid in handle.read().split():
                    try:
                        seen.add(title_of(int(pid)))
                    except OSError:
                        pass  # it finished meanwhile
            if client.info("persistence")["rdb_bgsave_in_progress"] == 0:
                break
            time.sleep(0.002)
        assert wanted in seen and seen <= {wanted, inherited}
    finally:
        server.stop()


def test_set_proc_title_no_still_retitles_on_config_set():
    """set-proc-title only decides the title at start-up: with `no`, CONFIG SET proc-title-template
    retitles the server all the same (Redis's updateProcTitleTemplate calls redisSetProcTitle)."""
    require_redis()
    found = {}
    for kind, start in (("redis", start_redis), ("millrace", start_millrace)):
        server = start("--set-proc-title", "no")
        try:
            program = title_of(server.proc.pid) if kind == "redis" else "millrace"
            untouched = "--set-proc-title" in open(f"/proc/{server.proc.pid}/cmdline", "rb").read().decode()
            server.client().config_set("proc-title-template", "{title} t {port}")
            found[kind] = (untouched, normalized(server, program))
        finally:
            server.stop()
    assert found["millrace"] == found["redis"] == (True, "T t P")
