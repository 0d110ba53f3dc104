"""MEMORY USAGE, STATS, DOCTOR, MALLOC-STATS, PURGE and HELP: what the data costs in this process.

For MEMORY USAGE, streams report their own size (packed nodes, lists,
counters: see storage.stream.Stream.memory_usage); strings their bytes object. Both add
the key name and the dictionary slot, as Redis adds its dictEntry and key.
"""

from __future__ import annotations

import gc
import sys

from protocol.errors import SYNTAX, ReplyError
from protocol.reply import OK, Map, Verbatim

from ..command import COMMANDS, command, container
from ..info import SECTION_BUILDERS
from ..maxmemory import key_size
from .args import help_reply, to_int
from .introspection import TIPS

if b"memory" not in COMMANDS:
    container("memory", group="server", summary="A container for memory diagnostics commands.", since="4.0.0")

@command(
    "memory|usage", -3, "readonly", keys=(2, 2, 1), group="server", since="4.0.0",
    summary="Estimates the memory usage of a key.", complexity="O(N) where N is the number of samples.",
)
def memory_usage(ctx, argv):
    """MEMORY USAGE key [SAMPLES count]

    Bytes, or nil when the key does not exist.
    """
    j = 3
    while j < len(argv):
        if argv[j].lower() == b"samples" and j + 1 < len(argv):
            if to_int(argv[j + 1]) < 0:
                raise ReplyError(SYNTAX)
            j += 2
        else:
            raise ReplyError(SYNTAX)
    key = argv[2]
    value = ctx.db.data.get(key)  # Redis's dbFind: a key past its TTL is measured, and left to expire
    return None if value is None else key_size(key, value)


# -- HELP, STATS, DOCTOR, MALLOC-STATS, PURGE ---------------------------------------------------

MEMORY_HELP = [
    "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DOCTOR",
    "    Return memory problems reports.",
    "MALLOC-STATS",
    "    Return internal statistics report from the memory allocator.",
    "PURGE",
    "    Attempt to purge dirty pages for reclamation by the allocator.",
    "STATS",
    "    Return information about the memory usage of the server.",
    "USAGE <key> [SAMPLES <count>]",
    "    Return memory in bytes used by <key> and its value. Nested values are",
    "    sampled up to <count> times (default: 5, 0 means sample all).",
    "HELP",
    "    Print this help.",
]

_REPORTS = ("nondeterministic_output", "request_policy:all_shards", "response_policy:special")
TIPS.update({"memory|stats": _REPORTS, "memory|doctor": _REPORTS, "memory|malloc-stats": _REPORTS})
TIPS["memory|purge"] = ("request_policy:all_shards", "response_policy:all_succeeded")


@command("memory|help", 2, "loading stale", group="server", since="4.0.0",
         summary="Returns helpful text about the different subcommands.")
def memory_help(ctx, argv):
    return help_reply(MEMORY_HELP)


def _memory_info(server) -> dict:
    """INFO memory's figures (used_memory is the process RSS: see server/info.py)."""
    return dict(SECTION_BUILDERS["memory"](server))


@command("memory|stats", 2, "", group="server", since="4.0.0", summary="Returns details about memory usage.")
def memory_stats(ctx, argv):
    """MEMORY STATS

    Redis's map, field for field and type for type (ratios and percentages are
    doubles), filled with the figures INFO memory reports, so the two agree:
    - peak.allocated, total.allocated, startup.allocated: used_memory_peak,
      used_memory (the process RSS) and the RSS when the server started;
    - clients.normal, clients.slaves, replication.backlog, aof.buffer,
      replica.fullsync.buffer: INFO's mem_* figures (unsent reply bytes for
      normal clients);
    - overhead.total and dataset.bytes: used_memory_overhead (start-up plus
      client buffers) and used_memory_dataset (RSS grown since start-up);
    - db.N (each database with keys): overhead.hashtable.main and
      overhead.hashtable.expires are the sizes of that database's key and TTL
      dicts; overhead.db.hashtable.lut is their sum over all databases;
    - keys.count is the number of keys, as DBSIZE counts them in each database;
    - allocator.* and the fragmentation figures are INFO's: CPython's allocator
      is not jemalloc, so allocated = active = resident = RSS, ratios 1, bytes 0.
    0 where Millrace has no such thing: cluster.links, lua.caches,
    functions.caches, script.VMs, allocator.muzzy, rehashing (Python's dicts
    resize at once) and db.dict.rehashing.count.
    """
    server = ctx.server
    info = _memory_info(server)
    total, peak, startup = info["used_memory"], info["used_memory_peak"], info["used_memory_startup"]
    dataset = info["used_memory_dataset"]
    keys = 0
    dbs, lut = {}, 0
    for db in server.keyspace.dbs:
        if not len(db):
            continue
        keys += len(db)
        main, expires = sys.getsizeof(db.data), sys.getsizeof(db.expires)
        lut += main + expires
        dbs[b"db.%d" % db.id] = Map({b"overhead.hashtable.main": main, b"overhead.hashtable.expires": expires})
    net = total - startup if total > startup else 1  # Redis's net_usage
    stats = Map({
        b"peak.allocated": peak,
        b"total.allocated": total,
        b"startup.allocated": startup,
        b"replication.backlog": info["mem_replication_backlog"],
        b"replica.fullsync.buffer": info["mem_replica_full_sync_buffer"],
        b"clients.slaves": info["mem_clients_slaves"],
        b"clients.normal": info["mem_clients_normal"],
        b"cluster.links": info["mem_cluster_links"],
        b"aof.buffer": info["mem_aof_buffer"],
        b"lua.caches": 0,
        b"functions.caches": info["used_memory_functions"],
        b"script.VMs": info["used_memory_vm_total"],
        **dbs,
        b"overhead.db.hashtable.lut": lut,
        b"overhead.db.hashtable.rehashing": info["mem_overhead_db_hashtable_rehashing"],
        b"overhead.total": info["used_memory_overhead"],
        b"db.dict.rehashing.count": 0,
        b"keys.count": keys,
        b"keys.bytes-per-key": dataset // keys if keys else 0,
        b"dataset.bytes": dataset,
        b"dataset.percentage": dataset * 100 / net,
        b"peak.percentage": total * 100 / peak if peak else 0.0,
        b"allocator.allocated": info["allocator_allocated"],
        b"allocator.active": info["allocator_active"],
        b"allocator.resident": info["allocator_resident"],
        b"allocator.muzzy": info["allocator_muzzy"],
        b"allocator-fragmentation.ratio": float(info["allocator_frag_ratio"]),
        b"allocator-fragmentation.bytes": info["allocator_frag_bytes"],
        b"allocator-rss.ratio": float(info["allocator_rss_ratio"]),
        b"allocator-rss.bytes": info["allocator_rss_bytes"],
        b"rss-overhead.ratio": float(info["rss_overhead_ratio"]),
        b"rss-overhead.bytes": info["rss_overhead_bytes"],
        b"fragmentation": float(info["mem_fragmentation_ratio"]),
        b"fragmentation.bytes": info["mem_fragmentation_bytes"],
    })  # fmt: skip
    return stats


DOCTOR_HEALTHY = (
    "Hi Sam, I can't find any memory issue in your instance. "
    "I can only account for what occurs on this base.\n"
)
DOCTOR_EMPTY = (
    "Hi Sam, this instance is empty or is using very little memory, "
    "my issues detector can't be used in these conditions. "
    "Please, leave for your mission on Earth and fill it with some data. "
    "The new Sam and I will be back to our programming as soon as I "
    "finished rebooting.\n"
)
DOCTOR_ISSUES = "Sam, I detected a few issues in this Redis instance memory implants:\n\n"
DOCTOR_PEAK = (
    " * Peak memory: In the past this instance used more than 150% the memory that is currently using. "
    "The allocator is normally not able to release memory after a peak, so you can expect to see a big "
    "fragmentation ratio, however this is actually harmless and is only due to the memory peak, and if the "
    "Redis instance Resident Set Size (RSS) is currently bigger than expected, the memory will be used as "
    "soon as you fill the Redis instance with more data. If the memory peak was only occasional and you want "
    "to try to reclaim memory, please try the MEMORY PURGE command, otherwise the only other option is to "
    "shutdown and restart the instance.\n\n"
)
DOCTOR_REPLICA_BUFFERS = (
    " * Big replica buffers: The replica output buffers in this instance are greater than 10MB for each "
    "replica (on average). This likely means that there is some replica instance that is struggling "
    "receiving data, either because it is too slow or because of networking issues. As a result, data piles "
    "on the master output buffers. Please try to identify what replica is not receiving data correctly and "
    "why. You can use the INFO output in order to check the replicas delays and the CLIENT LIST command to "
    "check the output buffers of each replica.\n\n"
)
DOCTOR_CLIENT_BUFFERS = (
    " * Big client buffers: The clients output buffers in this instance are greater than 200K per client "
    "(on average). This may result from different causes, like Pub/Sub clients subscribed to channels bot "
    "not receiving data fast enough, so that data piles on the Redis instance output buffer, or clients "
    "sending commands with large replies or very large sequences of commands in the same pipeline. Please "
    "use the CLIENT LIST command in order to investigate the issue if it causes problems in your instance, "
    "or to understand better why certain clients are using a big amount of memory.\n\n"
)
DOCTOR_END = "I'm here to keep you safe, Sam. I want to help you.\n"


def doctor_report(server) -> str:
    """Redis's getMemoryDoctorReport over MEMORY STATS's figures.

    Redis calls an instance "empty" under 5 MB allocated; Millrace's figure is the
    RSS of a Python process, tens of MB before any data, so the 5 MB apply to what
    it grew since start-up (dataset.bytes). Of Redis's checks only those whose
    figures Millrace measures can fire: the peak (over 150% of the current RSS)
    and the clients' and replicas' output buffers. Fragmentation, allocator RSS
    and the script cache are 1, 0 and empty here (see memory_stats), never an issue.
    """
    info = _memory_info(server)
    if info["used_memory_dataset"] < 5 * 1024 * 1024:
        return DOCTOR_EMPTY
    reports = []
    if info["used_memory_peak"] / info["used_memory"] > 1.5:
        reports.append(DOCTOR_PEAK)
    replicas = sum(1 for c in server.clients.values() if c.replica is not None)
    if replicas and info["mem_clients_slaves"] / replicas > 10 * 1024 * 1024:
        reports.append(DOCTOR_REPLICA_BUFFERS)
    normal = max(1, len(server.clients) - replicas)
    if info["mem_clients_normal"] // normal > 200 * 1024:
        reports.append(DOCTOR_CLIENT_BUFFERS)
    if not reports:
        return DOCTOR_HEALTHY
    return "".join([DOCTOR_ISSUES, *reports, DOCTOR_END])


@command("memory|doctor", 2, "", group="server", since="4.0.0", summary="Outputs a memory problems report.")
def memory_doctor(ctx, argv):
    """MEMORY DOCTOR: a verbatim string in RESP3, a bulk string in RESP2."""
    return Verbatim(doctor_report(ctx.server).encode())


_SLOW = "Depends on how much memory is allocated, could be slow"


@command("memory|malloc-stats", 2, "", group="server", since="4.0.0", complexity=_SLOW,
         summary="Returns the allocator statistics.")
def memory_malloc_stats(ctx, argv):
    """MEMORY MALLOC-STATS: Redis's bulk reply when it is not built with jemalloc (INFO's mem_allocator is libc)."""
    return b"Stats not supported for the current allocator"


@command("memory|purge", 2, "", group="server", since="4.0.0", complexity=_SLOW,
         summary="Asks the allocator to release memory.")
def memory_purge(ctx, argv):
    """MEMORY PURGE: a full garbage collection, CPython's nearest to jemalloc's purge of dirty pages."""
    gc.collect()
    return OK
