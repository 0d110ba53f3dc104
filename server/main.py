"""`millrace` / `python -m server`: command line, config file, listener.

Like redis-server: an optional config file path first, then any parameter as
`--name value` (later wins), e.g. `millrace millrace.conf --port 7000`.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import shlex
import signal
import sys

from protocol.errors import ReplyError

from . import __version__
from .client import Client
from .config import Config
from .server import Server

log = logging.getLogger("millrace")
_LEVELS = {"debug": logging.DEBUG, "verbose": logging.INFO, "notice": logging.INFO, "warning": logging.WARNING, "nothing": logging.CRITICAL + 10}


def read_config_file(path: str) -> list[tuple[str, str]]:
    """Directives of a redis.conf-style file: `name value...`, '#' comments."""
    pairs = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            words = shlex.split(line)
            pairs.append((words[0].lower(), " ".join(words[1:])))
    return pairs


def parse_args(args: list[str]) -> dict[str, str]:
    """Turn `[config-file] [--name value ...]` into parameter overrides."""
    settings: list[tuple[str, str]] = []
    if args and not args[0].startswith("--"):
        settings.extend(read_config_file(args[0]))
        args = args[1:]
    index = 0
    while index < len(args):
        arg = args[index]
        if arg in ("-h", "--help"):
            print(__doc__)
            sys.exit(0)
        if arg in ("-v", "--version"):
            print(f"Millrace server v={__version__}")
            sys.exit(0)
        if not arg.startswith("--"):
            sys.exit(f"Unexpected argument: {arg}")
        values = []
        index += 1
        while index < len(args) and not args[index].startswith("--"):
            values.append(args[index])
            index += 1
        settings.append((arg[2:].lower(), " ".join(values)))
    return dict(settings)


def build_server(overrides: dict[str, str]) -> Server:
    try:
        config = Config(overrides)
    except ReplyError as exc:
        sys.exit(f"*** FATAL CONFIG ERROR *** {exc.message}")
    return Server(config)


def setup_logging(config: Config) -> None:
    handler: logging.Handler
    handler = logging.FileHandler(config["logfile"]) if config["logfile"] else logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter(f"{os.getpid()}:M %(asctime)s.%(msecs)03d %(levelname)s %(message)s", "%d %b %Y %H:%M:%S"))
    log.handlers[:] = [handler]
    log.setLevel(_LEVELS[config["loglevel"]])
    config.listeners.append(lambda name, value: name == "loglevel" and log.setLevel(_LEVELS[value]))


async def serve(server: Server) -> None:
    loop = asyncio.get_running_loop()
    server.loop = loop
    config = server.config
    os.makedirs(config["dir"], exist_ok=True)
    hosts = [h.lstrip("-") for h in config["bind"].split()]
    listeners = []
    for host in hosts:
        try:
            listeners.append(
                await loop.create_server(lambda: Client(server), host, config["port"], backlog=config["tcp-backlog"], reuse_address=True)
            )
        except OSError as exc:
            if not listeners and host == hosts[-1]:
                raise
            log.warning("Could not bind %s: %s", host, exc)
    server.port = listeners[0].sockets[0].getsockname()[1]
    stopped = loop.create_future()
    server.shutdown = lambda: stopped.done() or stopped.set_result(None)
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, server.shutdown)
    for hook in getattr(server, "startup_hooks", []):
        hook()
    loop.call_later(1 / config["hz"], _cron, server)
    log.info("Millrace %s ready to accept connections tcp on port %d", __version__, server.port)
    await stopped
    for listener in listeners:
        listener.close()
    for hook in getattr(server, "shutdown_hooks", []):
        hook()
    log.info("Millrace is now ready to exit, bye bye...")


def _cron(server: Server) -> None:
    """Periodic work (Redis's serverCron): active expiry."""
    now = server.clock()
    for db in server.keyspace.dbs:
        if db.expires:
            removed = db.expire_cycle(now)
            if removed:
                server.stats["expired_keys"] += len(removed)
                server.after_write(db.id, [[b"DEL", key] for key in removed])
    if server.blocking.ready:
        server.serve_ready()
    server.loop.call_later(1 / server.config["hz"], _cron, server)


def main(argv: list[str] | None = None) -> None:
    from . import commands  # noqa: F401  (registers the command table)

    server = build_server(parse_args(sys.argv[1:] if argv is None else argv))
    setup_logging(server.config)
    gc.freeze()
    try:
        import uvloop

        uvloop.run(serve(server))
    except OSError as exc:
        log.error("Could not create server TCP listening socket: %s", exc)
        sys.exit(1)


if __name__ == "__main__":
    main()
