"""maxmemory-eviction-tenacity against Redis 8.2.3: CONFIG SET maxmemory below the memory in use starts
evicting at once, between loop turns, with no write needed (Redis's eviction time proc), and INFO's
eviction_exceeded_time fields count the time spent over maxmemory."""

from __future__ import annotations

from tests.servers import on_each, wait_for


def story(server) -> list:
    client = server.client()
    pipe = client.pipeline(transaction=False)
    for i in range(20_000):
        pipe.set(f"key:{i}", "v" * 100)
    pipe.execute()
    before = client.info("stats")
    client.config_set("maxmemory-policy", "allkeys-random")
    client.config_set("maxmemory-eviction-tenacity", "0")  # turns of 16 keys: the work is spread over many turns
    client.config_set("maxmemory", "1")  # below anything: every key goes, and memory stays over
    emptied = wait_for(lambda: client.dbsize() == 0, timeout=30, what="every key evicted with no write sent")
    over = wait_for(lambda: client.info("stats")["current_eviction_exceeded_time"] > 0, what="time over maxmemory counted")
    stats = client.info("stats")
    return [
        ("nothing over before", (before["total_eviction_exceeded_time"], before["current_eviction_exceeded_time"])),
        ("emptied", emptied),
        ("evicted", stats["evicted_keys"]),
        ("counting", over),
        ("total at least current", stats["total_eviction_exceeded_time"] >= stats["current_eviction_exceeded_time"]),
    ]


def test_a_lower_maxmemory_evicts_with_no_write_as_redis():
    found = on_each(story)
    assert found["millrace"] == found["redis"]
    assert dict(found["millrace"])["evicted"] == 20_000
