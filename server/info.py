"""INFO: Redis's sections and field names, filled from the live server.

Memory figures are honest rather than Redis-shaped: Millrace cannot count
its allocations the way jemalloc does, so `used_memory` is the process RSS.
"""

from __future__ import annotations

import hashlib
import os
import platform
import resource
import sys
import time
from itertools import islice

from . import REDIS_VERSION, __version__, fork
from .command import COMMANDS, Command
from .retention import STATS as RETENTION_STATS
from .shutdown import remaining_ms

# Sections in Redis's order; the first group is what INFO / INFO default shows.
DEFAULT_SECTIONS = ("server", "clients", "memory", "persistence", "threads", "stats", "replication", "cpu", "modules", "errorstats", "cluster", "keyspace")
ALL_SECTIONS = ("server", "clients", "memory", "persistence", "threads", "stats", "replication", "cpu", "modules", "commandstats", "errorstats", "latencystats", "cluster", "keyspace")
TITLES = {"cpu": "CPU", "modules": "Modules", "commandstats": "Commandstats", "errorstats": "Errorstats", "latencystats": "Latencystats"}
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def bytes_to_human(n: int) -> str:
    """Redis's bytesToHuman: 1.50K, 12.00M..."""
    if n < 1024:
        return f"{n}B"
    for unit, power in (("K", 1), ("M", 2), ("G", 3), ("T", 4), ("P", 5)):
        if n < 1024 ** (power + 1) or unit == "P":
            return f"{n / 1024**power:.2f}{unit}"
    return f"{n}B"


def rss_bytes() -> int:
    """Resident set size of this process, from /proc/self/statm (Linux)."""
    try:
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[1]) * _PAGE
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def total_system_memory() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * _PAGE
    except (ValueError, OSError, AttributeError):
        return 0


def info_string(server, sections: list[str]) -> str:
    """The INFO text for the requested section names (lower case)."""
    wanted: list[str] = []
    for name in sections or ["default"]:
        if name == "default":
            wanted.extend(DEFAULT_SECTIONS)
        elif name in ("all", "everything"):
            wanted.extend(ALL_SECTIONS)
        elif name == "module_list":
            wanted.append("modules")
        else:
            wanted.append(name)
    chosen = [name for name in ALL_SECTIONS if name in wanted]
    blocks = []
    for name in chosen:
        lines = SECTION_BUILDERS[name](server)
        title = TITLES.get(name, name.capitalize())
        blocks.append("".join([f"# {title}\r\n", *(f"{key}:{value}\r\n" for key, value in lines)]))
    return "\r\n".join(blocks)


# Redis's build ID is 16 hex digits of a hash of its build (redis-py reads it as a string): here of
# Millrace's version and the Redis version it answers as
BUILD_ID = hashlib.blake2b(f"millrace {__version__} redis {REDIS_VERSION}".encode(), digest_size=8).hexdigest()


def _server(server) -> list[tuple[str, object]]:
    config = server.config
    uptime = int(time.time() - server.start_time)
    return [
        ("redis_version", REDIS_VERSION),
        ("millrace_version", __version__),
        ("redis_git_sha1", "00000000"),
        ("redis_git_dirty", 0),
        ("redis_build_id", BUILD_ID),
        ("redis_mode", "standalone"),
        ("os", f"{platform.system()} {platform.release()} {platform.machine()}"),
        ("arch_bits", 64 if sys.maxsize > 2**32 else 32),
        ("monotonic_clock", "POSIX clock_gettime"),
        ("multiplexing_api", "epoll" if sys.platform.startswith("linux") else "kqueue"),
        ("atomicvar_api", "c11-builtin"),
        ("gcc_version", "0.0.0"),
        ("python_version", platform.python_version()),
        ("process_id", os.getpid()),
        ("process_supervised", "no"),
        ("run_id", server.run_id),
        ("tcp_port", server.port),
        ("server_time_usec", time.time_ns() // 1000),
        ("uptime_in_seconds", uptime),
        ("uptime_in_days", uptime // 86400),
        ("hz", server.hz),
        ("configured_hz", config["hz"]),
        ("lru_clock", int(time.time()) & ((1 << 24) - 1)),
        ("executable", os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else sys.executable),
        ("config_file", config.config_file or ""),
        ("io_threads_active", 0),
        *([("shutdown_in_milliseconds", remaining_ms(server))] if server.shutdown_wait is not None else []),
        ("listener0", f"name=tcp,{''.join(f'bind={address},' for address in config['bind'].split())}port={server.port}"),
    ]


def _clients(server) -> list[tuple[str, object]]:
    from .commands.replication import WAIT_KEY

    clients = server.clients.values()  # our primary's link among them, as Redis's server.master
    return [
        ("connected_clients", sum(1 for c in clients if c.replica is None)),  # Redis's clients less its replicas
        ("cluster_connections", 0),
        ("maxclients", server.config["maxclients"]),
        ("client_recent_max_input_buffer", 0),
        ("client_recent_max_output_buffer", 0),
        ("blocked_clients", server.blocking.count),
        ("tracking_clients", server.tracking.tracking_clients if server.tracking is not None else 0),
        ("pubsub_clients", sum(1 for c in clients if c.channels or c.patterns or c.shard_channels)),
        ("watching_clients", sum(1 for c in clients if c.watched)),
        ("clients_in_timeout_table", sum(1 for c in clients if c.blocked is not None and c.blocked.timer is not None)),
        ("total_watched_keys", len(server.watched)),
        ("total_blocking_keys", sum(1 for _db, key in server.blocking.waiters if key != WAIT_KEY)),  # WAIT's pseudo key is none
        ("total_blocking_keys_on_nokey", sum(1 for queue in server.blocking.waiters.values() if any(map(_unblocks_on_nokey, queue)))),
    ]


def _unblocks_on_nokey(block) -> bool:
    """A waiter released (with an error) when its key goes: Redis's blocking_keys_on_nokey (XREADGROUP)."""
    return block.command is not None and block.command.name == "xreadgroup"


def _memory(server) -> list[tuple[str, object]]:
    rss = rss_bytes()
    if rss > server.memory_peak:
        server.memory_peak = rss
        server.memory_peak_time = int(time.time())
    peak = server.memory_peak
    startup = min(server.memory_startup, rss)
    dataset = rss - startup
    system = total_system_memory()
    maxmemory = server.config["maxmemory"]
    clients = sum(c.transport.get_write_buffer_size() for c in server.clients.values() if c.transport is not None)
    return [
        ("used_memory", rss),
        ("used_memory_human", bytes_to_human(rss)),
        ("used_memory_rss", rss),
        ("used_memory_rss_human", bytes_to_human(rss)),
        ("used_memory_peak", peak),
        ("used_memory_peak_human", bytes_to_human(peak)),
        ("used_memory_peak_time", server.memory_peak_time),
        ("used_memory_peak_perc", f"{100 * rss / peak:.2f}%" if peak else "0.00%"),
        ("used_memory_overhead", startup + clients),
        ("used_memory_startup", startup),
        ("used_memory_dataset", dataset),
        ("used_memory_dataset_perc", f"{100 * dataset / rss:.2f}%" if rss else "0.00%"),
        ("allocator_allocated", rss),
        ("allocator_active", rss),
        ("allocator_resident", rss),
        ("allocator_muzzy", 0),
        ("total_system_memory", system),
        ("total_system_memory_human", bytes_to_human(system)),
        ("used_memory_lua", 0),
        ("used_memory_vm_eval", 0),
        ("used_memory_lua_human", "0B"),
        ("used_memory_scripts_eval", 0),
        ("number_of_cached_scripts", 0),
        ("number_of_functions", 0),
        ("number_of_libraries", 0),
        ("used_memory_vm_functions", 0),
        ("used_memory_vm_total", 0),
        ("used_memory_vm_total_human", "0B"),
        ("used_memory_functions", 0),
        ("used_memory_scripts", 0),
        ("used_memory_scripts_human", "0B"),
        ("maxmemory", maxmemory),
        ("maxmemory_human", bytes_to_human(maxmemory)),
        ("maxmemory_policy", server.config["maxmemory-policy"]),
        ("allocator_frag_ratio", "1.00"),
        ("allocator_frag_bytes", 0),
        ("allocator_rss_ratio", "1.00"),
        ("allocator_rss_bytes", 0),
        ("rss_overhead_ratio", "1.00"),
        ("rss_overhead_bytes", 0),
        ("mem_fragmentation_ratio", "1.00"),
        ("mem_fragmentation_bytes", 0),
        ("mem_not_counted_for_evict", 0),
        ("mem_replication_backlog", 0),
        ("mem_total_replication_buffers", 0),
        ("mem_replica_full_sync_buffer", 0),
        ("mem_clients_slaves", 0),
        ("mem_clients_normal", clients),
        ("mem_cluster_links", 0),
        ("mem_aof_buffer", 0),
        ("mem_allocator", "libc"),
        ("mem_overhead_db_hashtable_rehashing", 0),
        ("active_defrag_running", 0),
        ("lazyfree_pending_objects", server.lazyfree.pending),
        ("lazyfreed_objects", server.lazyfree.freed),
    ]


def _persistence(server) -> list[tuple[str, object]]:
    persistence = server.persistence_info
    fields: list[tuple[str, object]] = [
        ("loading", 1 if server.loading else 0),
        ("async_loading", 0),
        ("current_cow_peak", 0),
        ("current_cow_size", 0),
        ("current_cow_size_age", 0),
        ("current_fork_perc", "0.00"),
        ("current_save_keys_processed", 0),
        ("current_save_keys_total", 0),
        ("rdb_changes_since_last_save", server.dirty),
        ("rdb_bgsave_in_progress", 0),
        ("rdb_last_save_time", int(server.lastsave)),
        ("rdb_last_bgsave_status", "ok"),
        ("rdb_last_bgsave_time_sec", -1),
        ("rdb_current_bgsave_time_sec", -1),
        ("rdb_saves", 0),
        ("rdb_last_cow_size", 0),
        ("rdb_last_load_keys_expired", 0),
        ("rdb_last_load_keys_loaded", 0),
        ("aof_enabled", 1 if server.config["appendonly"] else 0),
        ("aof_rewrite_in_progress", 0),
        ("aof_rewrite_scheduled", 0),
        ("aof_last_rewrite_time_sec", -1),
        ("aof_current_rewrite_time_sec", -1),
        ("aof_last_bgrewrite_status", "ok"),
        ("aof_rewrites", 0),
        ("aof_rewrites_consecutive_failures", 0),
        ("aof_last_write_status", "ok"),
        ("aof_last_cow_size", 0),
        ("module_fork_in_progress", 0),
        ("module_fork_last_cow_size", 0),
    ]
    if persistence is not None:  # the persistence layer may refine or add fields
        merged = dict(fields)
        merged.update(persistence())
        fields = list(merged.items())
    if server.loading:  # (Redis turns aof_state off while it replays the AOF)
        fields = [("aof_enabled", 0) if name == "aof_enabled" else (name, value) for name, value in fields]
        fields += server.loading_progress.fields()
    return fields


def sample_ops(server, now_ms: int) -> None:
    """Called from the cron: keep ~1.6 s of samples, like Redis's 16 x 100 ms."""
    samples = server.ops_samples
    if samples and now_ms - samples[-1][0] < 100:
        return
    samples.append((now_ms, server.total_commands_processed, server.net_input_bytes, server.net_output_bytes))
    del samples[:-17]


def _rate(server, index: int) -> float:
    """Per-second rate of sample field `index` over the sampled window."""
    samples = server.ops_samples
    if not samples or len(samples) < 2 or samples[-1][0] == samples[0][0]:
        return 0.0
    first, last = samples[0], samples[-1]
    return max(0.0, (last[index] - first[index]) * 1000 / (last[0] - first[0]))


def _threads(server) -> list[tuple[str, object]]:
    """One thread does all the I/O, as Redis with io-threads 1: its clients, reads and writes."""
    clients = len(server.clients)
    return [("io_thread_0", f"clients={clients},reads={server.reads_processed},writes={server.writes_processed}")]


def _stats(server) -> list[tuple[str, object]]:
    from .commands.connection import AUTH_STATS  # here: the command modules import this one

    stats = server.stats
    tracking = server.tracking
    return [
        ("total_connections_received", stats["total_connections_received"]),
        ("total_commands_processed", server.total_commands_processed),
        ("instantaneous_ops_per_sec", round(_rate(server, 1))),
        ("total_net_input_bytes", server.net_input_bytes),
        ("total_net_output_bytes", server.net_output_bytes),
        ("total_net_repl_input_bytes", 0),
        ("total_net_repl_output_bytes", 0),
        ("instantaneous_input_kbps", f"{_rate(server, 2) / 1024:.2f}"),
        ("instantaneous_output_kbps", f"{_rate(server, 3) / 1024:.2f}"),
        ("instantaneous_input_repl_kbps", "0.00"),
        ("instantaneous_output_repl_kbps", "0.00"),
        ("rejected_connections", stats["rejected_connections"]),
        *(server.replication.stats.items() if server.replication is not None else
          (("sync_full", 0), ("sync_partial_ok", 0), ("sync_partial_err", 0))),
        ("expired_subkeys", 0),
        ("expired_keys", stats["expired_keys"]),
        ("expired_stale_perc", f"{server.expired_stale_perc * 100:.2f}"),
        ("expired_time_cap_reached_count", server.stats["expired_time_cap_reached_count"]),
        ("expire_cycle_cpu_milliseconds", server.stats["expire_cycle_cpu_us"] // 1000),
        ("evicted_keys", server.stats["evicted_keys"]),
        ("evicted_clients", 0),
        ("evicted_scripts", 0),
        *zip(("total_eviction_exceeded_time", "current_eviction_exceeded_time"), server.evictor.exceeded_ms(), strict=True),
        ("keyspace_hits", server.keyspace_hits),
        ("keyspace_misses", server.keyspace_misses),
        ("pubsub_channels", len(server.pubsub.channels)),
        ("pubsub_patterns", len(server.pubsub.patterns)),
        ("pubsubshard_channels", len(server.pubsub.shard_channels)),
        ("latest_fork_usec", fork.STATS["latest_fork_usec"]),
        ("total_forks", fork.STATS["total_forks"]),
        ("migrate_cached_sockets", 0),
        ("slave_expires_tracked_keys", len(server.replica_keys_with_expire or ())),
        ("active_defrag_hits", 0),
        ("active_defrag_misses", 0),
        ("active_defrag_key_hits", 0),
        ("active_defrag_key_misses", 0),
        ("total_active_defrag_time", 0),
        ("current_active_defrag_time", 0),
        ("tracking_total_keys", len(tracking.table) if tracking is not None else 0),  # server/tracking.py
        ("tracking_total_items", tracking.total_items if tracking is not None else 0),
        ("tracking_total_prefixes", len(tracking.prefix_table) if tracking is not None else 0),
        ("unexpected_error_replies", 0),
        ("total_error_replies", stats["total_error_replies"]),
        ("dump_payload_sanitizations", 0),
        ("total_reads_processed", server.reads_processed),
        ("total_writes_processed", server.writes_processed),
        ("io_threaded_reads_processed", 0),
        ("io_threaded_writes_processed", 0),
        ("io_threaded_total_prefetch_batches", 0),
        ("io_threaded_total_prefetch_entries", 0),
        ("client_query_buffer_limit_disconnections", stats.get("client_query_buffer_limit_disconnections", 0)),
        ("client_output_buffer_limit_disconnections", stats.get("client_output_buffer_limit_disconnections", 0)),
        ("reply_buffer_shrinks", 0),
        ("reply_buffer_expands", 0),
        ("eventloop_cycles", 0),  # uvloop does not expose its iterations or their time
        ("eventloop_duration_sum", 0),
        ("eventloop_duration_cmd_sum", 0),
        ("instantaneous_eventloop_cycles_per_sec", 0),
        ("instantaneous_eventloop_duration_usec", 0),
        ("acl_access_denied_auth", AUTH_STATS["acl_access_denied_auth"]),  # CONFIG RESETSTAT keeps it, as Redis
        ("acl_access_denied_cmd", 0),  # one user with every right: only authentication is ever denied
        ("acl_access_denied_key", 0),
        ("acl_access_denied_channel", 0),
        *((name, stats.get(name, 0)) for name in RETENTION_STATS),
    ]


def _replication(server) -> list[tuple[str, object]]:
    custom = server.replication_info
    if custom is not None:  # the replication layer describes itself
        return list(custom())
    return [
        ("role", "master"),
        ("connected_slaves", 0),
        ("master_failover_state", "no-failover"),
        ("master_replid", server.run_id[:40]),
        ("master_replid2", "0" * 40),
        ("master_repl_offset", 0),
        ("second_repl_offset", -1),
        ("repl_backlog_active", 0),
        ("repl_backlog_size", server.config["repl-backlog-size"]),
        ("repl_backlog_first_byte_offset", 0),
        ("repl_backlog_histlen", 0),
    ]


def _cpu(server) -> list[tuple[str, object]]:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return [
        ("used_cpu_sys", f"{usage.ru_stime:.6f}"),
        ("used_cpu_user", f"{usage.ru_utime:.6f}"),
        ("used_cpu_sys_children", f"{children.ru_stime:.6f}"),
        ("used_cpu_user_children", f"{children.ru_utime:.6f}"),
        ("used_cpu_sys_main_thread", f"{usage.ru_stime:.6f}"),
        ("used_cpu_user_main_thread", f"{usage.ru_utime:.6f}"),
    ]


def _modules(server) -> list[tuple[str, object]]:
    return []


def all_commands() -> list[Command]:
    """Every command and subcommand in the table, parents first."""
    result = []
    for cmd in COMMANDS.values():
        result.append(cmd)
        result.extend(cmd.subcommands.values())
    return result


def _commandstats(server) -> list[tuple[str, object]]:
    lines = []
    for cmd in all_commands():
        if not (cmd.calls or cmd.failed_calls or cmd.rejected_calls):
            continue
        per_call = cmd.usec / cmd.calls if cmd.calls else 0.0
        lines.append(
            (
                f"cmdstat_{cmd.name}",
                f"calls={cmd.calls},usec={cmd.usec},usec_per_call={per_call:.2f},"
                f"rejected_calls={cmd.rejected_calls},failed_calls={cmd.failed_calls}",
            )
        )
    return lines


def _errorstats(server) -> list[tuple[str, object]]:
    return [(f"errorstat_{code}", f"count={count}") for code, count in sorted(server.errorstats.items())]


def _latencystats(server) -> list[tuple[str, object]]:
    """latency_percentiles_usec_<command>:p50=...,p99=... for each command with durations (server/latency.py)."""
    if not server.latency_tracking:
        return []
    from .latency import percentiles_line

    words = server.config["latency-tracking-info-percentiles"]
    percentiles = [float(word) for word in words.split()] if words else []
    return [(f"latency_percentiles_usec_{cmd.name}", percentiles_line(cmd.latency_hist, percentiles))
            for cmd in all_commands() if cmd.latency_hist]


def _cluster(server) -> list[tuple[str, object]]:
    return [("cluster_enabled", 0)]


def _keyspace(server) -> list[tuple[str, object]]:
    lines = []
    now = server.clock()
    for db in server.keyspace.dbs:
        if len(db):
            lines.append((f"db{db.id}", f"keys={len(db)},expires={len(db.expires)},avg_ttl={avg_ttl(db, now)},subexpiry=0"))
    return lines


def avg_ttl(db, now: int, sample: int = 100) -> int:
    """Mean remaining TTL in ms over a sample of the keys with one (Redis keeps a running estimate)."""
    if not db.expires:
        return 0
    ttls = [when - now for when in islice(db.expires.values(), sample) if when > now]
    return sum(ttls) // len(ttls) if ttls else 0


SECTION_BUILDERS = {
    "server": _server,
    "clients": _clients,
    "memory": _memory,
    "persistence": _persistence,
    "threads": _threads,
    "stats": _stats,
    "replication": _replication,
    "cpu": _cpu,
    "modules": _modules,
    "commandstats": _commandstats,
    "errorstats": _errorstats,
    "latencystats": _latencystats,
    "cluster": _cluster,
    "keyspace": _keyspace,
}


def reset_stats(server) -> None:
    """CONFIG RESETSTAT: zero the counters INFO stats/commandstats/errorstats show."""
    for key in server.stats:
        server.stats[key] = 0
    server.keyspace_hits = server.keyspace_misses = 0
    server.expired_stale_perc = 0.0
    server.errorstats.clear()
    for cmd in all_commands():
        cmd.calls = cmd.duration_ns = cmd.failed_calls = cmd.rejected_calls = 0
        cmd.latency_hist.clear()
    server.reads_processed = server.writes_processed = 0
    server.lazyfree.freed = 0  # Redis's lazyfreeResetStats
    server.evictor.exceeded_total = server.evictor.exceeded_since = 0
    server.net_input_bytes = server.net_output_bytes = 0
    server.ops_samples.clear()
    server.memory_peak = 0
    fork.STATS.update(total_forks=0, latest_fork_usec=0)
    if server.persistence is not None:
        server.persistence.reset_stats()
