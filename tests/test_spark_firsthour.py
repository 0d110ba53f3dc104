"""The Spark source as a Kafka-source user meets it (issue 26): `earliest` on a trimmed
stream, option names, save modes, the README snippet as a script, a non-Redis server
at the URL, and `sensor_aggregates --follow`'s per-batch lines and Ctrl-C."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from pipeline.client import SourceError, connect, ping
from pipeline.options import OptionError, connection_from, read_options, write_options
from tests.servers import ROOT, start_millrace

# -- options, without Spark ------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"streams": "a", "startingOffset": "earliest"}, "unknown option 'startingoffset' for a Millrace read; did you mean 'startingOffsets'?"),
        ({"streams": "a", "failondataloss": "false", "maxRecordPerTrigger": "5"}, "did you mean 'maxRecordsPerTrigger'?"),
        ({"streams": "a", "urll": "redis://x:1"}, "did you mean 'url'?"),
        ({"subscribe": "a"}, "option 'subscribe' is a Kafka source option; Millrace reads Redis streams: use option 'streams'"),
        ({"streams": "a", "minPartitions": "4"}, "use option 'numPartitions'"),
        ({"streams": "a", "includeHeaders": "true"}, "there is no equivalent: stream entries have no headers"),
        ({"streams": "a", "kafka.bootstrap.servers": "h:9092"}, "use option 'url'"),
        ({"streams": "a", "kafka.security.protocol": "SSL"}, "option 'kafka.security.protocol' is a Kafka source option"),
        ({"streams": "a", "startingOffsetsByTimestamp": "{}"}, "use option 'startingTimestamp'"),
    ],
)
def test_read_option_names(options, expected):
    with pytest.raises(OptionError) as excinfo:
        read_options({k.lower(): v for k, v in options.items()}, streaming=False)
    assert expected in str(excinfo.value)


def test_valid_options_and_spark_own_ones_pass():
    read_options({"streams": "a", "startingoffsets": "earliest", "maxoffsetspertrigger": "5", "path": "x",
                  "checkpointlocation": "/tmp/x", "failondataloss": "false", "group": "g"}, streaming=True)
    write_options({"stream": "a", "maxlen": "5", "approximate": "true", "checkpointlocation": "/tmp/x", "writebatchsize": "7",
                   "exactlyonce": "auto", "writeid": "w1"})


def test_every_option_the_parser_reads_is_a_valid_name():
    """An option added to pipeline/options.py but not to option_names.py would be refused as unknown."""
    from pipeline.option_names import READ, WRITE

    source = (ROOT / "pipeline" / "options.py").read_text()
    read = set(re.findall(r'_(?:int|bool|positions)\(options, "([A-Za-z]+)"', source))
    read |= set(re.findall(r'options\.get\("([a-z]+)"', source)) | set(re.findall(r'"([a-z]+)" in options', source))
    valid = {name.lower() for name in (*READ, *WRITE)}
    assert read and {name.lower() for name in read} <= valid, sorted({n.lower() for n in read} - valid)


def test_write_option_names():
    with pytest.raises(OptionError, match="option 'topic' is a Kafka sink option; Millrace writes Redis streams: use option 'stream'"):
        write_options({"topic": "t"})
    with pytest.raises(OptionError, match="option 'kafka.bootstrap.servers' is a Kafka sink option; Millrace writes"):
        write_options({"stream": "t", "kafka.bootstrap.servers": "h:9092"})
    with pytest.raises(OptionError, match="did you mean 'maxlen'"):
        write_options({"stream": "t", "maxlenn": "3"})
    with pytest.raises(OptionError, match="unknown option 'group' for a Millrace write"):
        write_options({"stream": "t", "group": "g"})  # a read option on a write is unknown there


@pytest.mark.parametrize("answer", [b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n", b"SSH-2.0-OpenSSH_9.2\r\n"])
def test_a_non_redis_server_at_the_url_is_named(answer):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]

    def serve():
        for _ in range(4):
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.recv(4096)
            conn.sendall(answer)
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    conn = connection_from({"url": f"redis://127.0.0.1:{port}", "timeout": "5"})
    try:
        with pytest.raises(SourceError) as excinfo:
            ping(connect(conn), conn)
    finally:
        listener.close()
    text = str(excinfo.value)
    assert f"the server at redis://127.0.0.1:{port} does not speak the Redis protocol" in text


# -- on Spark ------------------------------------------------------------------------

pyspark = pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")


@pytest.fixture(scope="module")
def spark():
    from pipeline.jobs.common import spark_session

    session = spark_session("millrace-firsthour", "local[2]", {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"},
                            log_level="ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def server():
    proc = start_millrace()
    yield proc
    proc.stop()


@pytest.fixture
def r(server):
    client = server.client(decode_responses=True)
    client.flushall()
    yield client
    client.close()


def fill(r, key: str, n: int, start: int = 0) -> list[str]:
    pipe = r.pipeline(transaction=False)
    for i in range(start, start + n):
        pipe.xadd(key, {"sensor": f"s{i % 3}", "value": str(i)})
    return pipe.execute()


def drain(spark, url: str, checkpoint, **options) -> list[str]:
    """One availableNow run of a streaming query; the IDs it delivered, in order."""
    ids: list[str] = []
    reader = spark.readStream.format("millrace").option("url", url)
    for key, value in options.items():
        reader = reader.option(key, value)
    query = (reader.load().writeStream.foreachBatch(lambda df, _: ids.extend(row.id for row in df.select("id").collect()))
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    query.awaitTermination(120)
    if query.exception():
        raise query.exception()
    return ids


def test_earliest_on_a_trimmed_stream_starts_at_what_is_left(spark, r, server, tmp_path):
    url = f"redis://127.0.0.1:{server.port}"
    ids = fill(r, "capped", 1000)
    r.xtrim("capped", maxlen=100, approximate=False)  # the usual capped stream: 900 gone before the query existed
    assert drain(spark, url, tmp_path / "cp", streams="capped", startingOffsets="earliest", maxRecordsPerTrigger=40) == ids[900:]
    # entries lost after the query's own position are still a loss
    more = fill(r, "capped", 100, start=1000)
    r.xtrim("capped", maxlen=30, approximate=False)
    with pytest.raises(Exception, match="70 entries of stream 'capped' after ID") as excinfo:
        drain(spark, url, tmp_path / "cp", streams="capped")
    assert "failOnDataLoss" in str(excinfo.value)
    assert drain(spark, url, tmp_path / "cp", streams="capped", failOnDataLoss="false") == more[70:]


def test_earliest_with_deletions_after_the_first_entry(spark, r, server, tmp_path):
    url = f"redis://127.0.0.1:{server.port}"
    ids = fill(r, "holes", 300)
    r.xtrim("holes", maxlen=200, approximate=False)
    r.xdel("holes", ids[150], ids[250])
    expected = [i for i in ids[100:] if i not in (ids[150], ids[250])]
    assert drain(spark, url, tmp_path / "cp", streams="holes", startingOffsets="earliest", maxRecordsPerTrigger=64) == expected


def test_unknown_option_fails_the_query_with_a_suggestion(spark, r, server):
    fill(r, "s", 3)
    def reader():
        return spark.read.format("millrace").option("url", f"redis://127.0.0.1:{server.port}").option("streams", "s")

    with pytest.raises(Exception, match=re.escape("unknown option 'startingoffset' for a Millrace read; did you mean 'startingOffsets'?")):
        reader().option("startingOffset", "earliest").load().collect()
    with pytest.raises(Exception, match="option 'subscribe' is a Kafka source option"):
        reader().option("subscribe", "s").load().collect()


def test_save_modes(spark, r, server):
    url = f"redis://127.0.0.1:{server.port}"
    df = spark.createDataFrame([("a", 1), ("b", 2)], "sensor string, value long")
    df.write.format("millrace").option("url", url).option("stream", "out").mode("append").save()
    assert r.xlen("out") == 2
    with pytest.raises(Exception) as excinfo:
        df.write.format("millrace").option("url", url).option("stream", "out").mode("overwrite").save()
    assert "save mode 'overwrite' is not supported" in str(excinfo.value) and "mode('append')" in str(excinfo.value)
    assert r.xlen("out") == 2  # nothing appended again
    for mode, shown in ((None, "ErrorIfExists"), ("ignore", "Ignore"), ("errorifexists", "ErrorIfExists")):
        writer = df.write.format("millrace").option("url", url).option("stream", "out")
        with pytest.raises(Exception, match=re.escape(f"millrace: save mode '{shown}' is not supported")) as excinfo:
            (writer.mode(mode) if mode else writer).save()
        assert "mode('append')" in str(excinfo.value)
    assert r.xlen("out") == 2


def test_complete_output_mode_is_refused(spark, r, server, tmp_path):
    url = f"redis://127.0.0.1:{server.port}"
    fill(r, "raw", 10)
    counts = (spark.readStream.format("millrace").option("url", url).option("streams", "raw").option("startingOffsets", "earliest")
              .schema("sensor string").load().groupBy("sensor").count())
    with pytest.raises(Exception, match="outputMode 'complete' is not supported"):
        query = (counts.writeStream.format("millrace").option("url", url).option("stream", "counts").outputMode("complete")
                 .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start())
        query.awaitTermination(120)
        if query.exception():
            raise query.exception()
    assert not r.exists("counts")


def _no_pyspark_python3(tmp_path) -> dict[str, str]:
    """An environment where `python3` on PATH is a Python without the project's packages, as on a fresh machine."""
    bare = "/usr/bin/python3"
    probe = subprocess.run([bare, "-c", "import sys; import redis"], capture_output=True) if os.path.exists(bare) else None
    if probe is None or probe.returncode == 0 or subprocess.run(
            [bare, "-c", f"import sys; sys.exit(sys.version_info[:2] != {tuple(sys.version_info[:2])})"]).returncode:
        pytest.skip("needs a system python3 of the same minor version without redis-py (/usr/bin/python3)")
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "python3").symlink_to(bare)
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_ENV_LOADED")}
    env["PATH"] = f"{shim}:{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(ROOT)  # this checkout's pipeline/, not another one's editable install
    return env


def test_readme_spark_snippet_runs_as_pasted(r, server, tmp_path):
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Spark: the `millrace` data source"):]
    snippet = re.search(r"```python\n(.*?)```", section, re.S)[1]
    for i in range(30):
        r.xadd("sensors:raw", {"sensor": f"s{i % 3}", "temperature": str(15 + i), "event_ms": str(1_700_000_000_000 + i)})
    r.xadd("sensors:minute", {"sensor": "s1", "readings": "3"})
    script = tmp_path / "script.py"
    script.write_text(snippet.replace("127.0.0.1:6379", f"127.0.0.1:{server.port}"))
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=_no_pyspark_python3(tmp_path),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "31 24"  # every entry of both streams; temperatures 21..44


def test_sensor_aggregates_follow_counts_batches_and_stops_on_ctrl_c(r, server, tmp_path):
    def readings(start: int, n: int) -> None:
        pipe = r.pipeline(transaction=False)
        for i in range(start, start + n):
            pipe.xadd("sensors:raw", {"sensor": f"s{i % 4}", "site": "a", "temperature": "20.5", "event_ms": str(1_700_000_000_000 + i * 1000)})
        pipe.execute()

    readings(0, 120)
    env = dict(os.environ, PYTHONPATH=str(ROOT),
               PYSPARK_SUBMIT_ARGS="--conf spark.sql.streaming.noDataProgressEventInterval=200 --conf spark.ui.enabled=false pyspark-shell")
    proc = subprocess.Popen([sys.executable, "-m", "pipeline.jobs.sensor_aggregates", "--url", f"redis://127.0.0.1:{server.port}",
                             "--follow", "--checkpoint", str(tmp_path / "cp"), "--master", "local[2]"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True).start()

    def wait_for(pattern: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not any(re.search(pattern, line) for line in lines):
            assert proc.poll() is None, "".join(lines)
            assert time.monotonic() < deadline, "".join(lines)
            time.sleep(0.2)

    try:
        wait_for(r"batch 0: 120 readings in")
        time.sleep(6)  # idle: Spark reports progress for the next batch with 0 rows several times
        readings(120, 45)
        wait_for(r"batch \d+: 45 readings in")
        proc.send_signal(signal.SIGINT)
        proc.wait(120)
    finally:
        if proc.poll() is None:
            proc.kill()
    time.sleep(0.5)
    out = "".join(lines)
    assert proc.returncode == 0, out
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, out
    per_batch = [int(n) for n in re.findall(r"batch \d+: (\d+) readings in", out)]
    done = re.search(r"done: (\d+) batches, (\d+) readings", out)
    assert sum(per_batch) == int(done[2]) == 165, out
    assert len(per_batch) == int(done[1])
    assert "stopping (restart with the same --checkpoint to continue)" in out
