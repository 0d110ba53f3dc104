"""The process title `ps` shows (set-proc-title, proc-title-template), as Redis's redisSetProcTitle.

With `set-proc-title yes` (the default) the server retitles itself once it
listens, `{title} {listen-addr} {server-mode}` by default: `millrace
127.0.0.1:6379`, so that several servers on one host tell apart in `ps` and
`top`; CONFIG SET proc-title-template retitles it at once, and the forked
children take their own titles (`millrace-rdb-bgsave`, `millrace-aof-rewrite`,
`millrace-rdb-to-replicas`) in the same template. The template's grammar is
Redis's sdstemplate: `{name}` a variable, `{{` a literal brace, and nothing
else special; a template that is blank once expanded is refused.
"""

from __future__ import annotations

import sys

from setproctitle import setproctitle

# what the variables other than {title} stand for, once the server listens (start())
_variables: dict[str, str] = {}


def expand(template: str, variables: dict[str, str]) -> str | None:
    """The template with its variables replaced, trimmed of spaces; None if it is malformed or names
    a variable not in `variables`."""
    out, rest = [], template
    while (start := rest.find("{")) >= 0:
        out.append(rest[:start])
        rest = rest[start + 1 :]
        if rest.startswith("{"):
            out.append("{")
            rest = rest[1:]
            continue
        end = rest.find("}")
        if end < 0 or rest[:end] not in variables:
            return None
        out.append(variables[rest[:end]])
        rest = rest[end + 1 :]
    out.append(rest)
    return "".join(out).strip(" ")


def program_title() -> str:
    """{title}: the program as invoked (Redis's argv[0]); `millrace` when run as `python -m server`."""
    invoked = sys.argv[0] if sys.argv else ""
    return "millrace" if not invoked or invoked.endswith("__main__.py") or invoked == "-m" else invoked


def start(config, port: int) -> None:
    """Remember what the variables stand for and retitle the server (at start-up, once it listens)."""
    bind = config["bind"].split()
    _variables.update({
        "listen-addr": f"{bind[0] if bind else '*'}:{port}",
        "server-mode": "",
        "port": str(port),
        "tls-port": "0",
        "unixsocket": "",
        "config-file": config.config_file or "-",
    })  # fmt: skip
    if config["set-proc-title"]:
        retitle(config)


def retitle(config, title: str | None = None) -> None:
    """Set the process title from the template (a forked child passes its own {title}). As Redis's
    redisSetProcTitle, set-proc-title only decides the title at start-up (start()): CONFIG SET
    proc-title-template and the forked children retitle even with `set-proc-title no`."""
    if not _variables:
        return
    text = expand(config["proc-title-template"], {**_variables, "title": title or program_title()})
    if text:
        setproctitle(text)


def on_config(config, name: str) -> None:
    if name == "proc-title-template":
        retitle(config)

