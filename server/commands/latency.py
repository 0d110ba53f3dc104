"""LATENCY LATEST | HISTORY | RESET | GRAPH | DOCTOR | HISTOGRAM | HELP, as Redis 8.2.

The data lives in server/latency.py: spike events on `server.latency`, and each
command's duration counts on the command itself (`Command.latency_hist`).
"""

from __future__ import annotations

import time

from protocol.errors import ReplyError
from protocol.reply import Map, Verbatim

from ..command import COMMANDS, Command, command, container
from ..latency import cdf, doctor, graph
from .args import help_reply
from .introspection import TIPS

_SPECIAL = ("nondeterministic_output", "request_policy:all_nodes", "response_policy:special")
TIPS.update({f"latency|{sub}": _SPECIAL for sub in ("latest", "history", "graph", "doctor", "histogram")})
TIPS["latency|reset"] = ("request_policy:all_nodes", "response_policy:agg_sum")

container("latency", group="server", summary="A container for latency diagnostics commands.", since="2.8.13")

_FLAGS = "admin noscript loading stale"


@command("latency|latest", 2, _FLAGS, group="server", summary="Returns the latest latency samples for all events.", since="2.8.13")
def latency_latest(ctx, argv):
    """[[event, unix time of the latest sample, its ms, all-time max ms], ...]"""
    return ctx.server.latency.latest()


@command("latency|history", 3, _FLAGS, group="server", summary="Returns timestamp-latency samples for an event.", since="2.8.13")
def latency_history(ctx, argv):
    """LATENCY HISTORY event: [[unix time, ms], ...] oldest first; an unknown event is an empty array, as Redis."""
    return ctx.server.latency.history(argv[2].decode("utf-8", "surrogateescape"))


@command("latency|reset", -2, _FLAGS, group="server", summary="Resets the latency data for one or more events.", since="2.8.13")
def latency_reset(ctx, argv):
    """LATENCY RESET [event [event ...]]: the number of event series reset."""
    return ctx.server.latency.reset([arg.decode("utf-8", "surrogateescape") for arg in argv[2:]])


@command("latency|graph", 3, _FLAGS, group="server", summary="Returns a latency graph for an event.", since="2.8.13")
def latency_graph(ctx, argv):
    """LATENCY GRAPH event: an ASCII graph of the event's samples."""
    event = argv[2].decode("utf-8", "surrogateescape")
    series = ctx.server.latency.events.get(event)
    if series is None:
        raise ReplyError(f"ERR No samples available for event '{event}'")
    return Verbatim(graph(event, series, int(time.time())).encode())


@command("latency|doctor", 2, _FLAGS, group="server", summary="Returns a human-readable latency analysis report.", since="2.8.13")
def latency_doctor(ctx, argv):
    config = ctx.server.config
    text = doctor(ctx.server.latency, config["latency-monitor-threshold"], config["slowlog-log-slower-than"],
                  config["slowlog-max-len"], int(time.time()))
    return Verbatim(text.encode())


def _histogram(cmd: Command) -> Map:
    return Map({b"calls": sum(cmd.latency_hist.values()), b"histogram_usec": Map(dict(cdf(cmd.latency_hist)))})


@command("latency|histogram", -2, _FLAGS, group="server",
         summary="Returns the cumulative distribution of latencies of a subset or all commands.", since="7.0.0", complexity="O(N) where N is the number of commands with latency information being retrieved.")
def latency_histogram(ctx, argv):
    """LATENCY HISTOGRAM [command [command ...]]: {command: {calls, histogram_usec: {µs: cumulative calls}}}: the named commands (a container
    brings its subcommands; unknown names are skipped), or every command with durations."""
    if len(argv) == 2:
        chosen = [c for cmd in COMMANDS.values() for c in (cmd, *cmd.subcommands.values())]
    else:
        chosen = []
        for arg in argv[2:]:
            name = arg.decode("utf-8", "surrogateescape").lower()
            parent, _, sub = name.partition("|")
            cmd = COMMANDS.get(parent.encode())
            if cmd is not None and sub:
                cmd = cmd.subcommands.get(sub.encode())
                chosen.extend([cmd] if cmd is not None else [])
            elif cmd is not None:
                chosen.extend((cmd, *cmd.subcommands.values()))
    return Map({cmd.name.encode(): _histogram(cmd) for cmd in chosen if cmd.latency_hist})


LATENCY_HELP = [
    "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DOCTOR",
    "    Return a human readable latency analysis report.",
    "GRAPH <event>",
    "    Return an ASCII latency graph for the <event> class.",
    "HISTORY <event>",
    "    Return time-latency samples for the <event> class.",
    "LATEST",
    "    Return the latest latency samples for all events.",
    "RESET [<event> ...]",
    "    Reset latency data of one or more <event> classes.",
    "    (default: reset all data for all event classes)",
    "HISTOGRAM [COMMAND ...]",
    "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
    "    If no commands are specified then all histograms are replied.",
    "HELP",
    "    Print this help.",
]


@command("latency|help", 2, "loading stale", group="server", summary="Returns helpful text about the different subcommands.", since="2.8.13")
def latency_help(ctx, argv):
    return help_reply(LATENCY_HELP)
