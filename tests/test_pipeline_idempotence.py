"""pipeline/idempotence.py in-process, with a fake redis client (no server, no Spark
session): the version rule for IDMP, what each exactlyOnce mode does with and without
it, and each row's `IDMP pid iid` against the rule in the module's docstring (the
chunk is the row number divided by the stream's IDMP-MAXSIZE, or the config's, or 100)."""

from __future__ import annotations

import logging
import random
import re

import pytest
import redis

from pipeline import idempotence
from pipeline.client import SourceError
from pipeline.idempotence import DEFAULT_WINDOW, IDMP_SINCE, MODES, RowIdentity, _version, new_write_id, supports_idmp, use_idmp


class FakeClient:
    def __init__(self, version="8.6.0", stream=None, config=None, resp3=False):
        self.version, self.stream, self.config, self.resp3 = version, stream, config, resp3
        self.calls: list = []

    def info(self, section):
        self.calls.append(("INFO", section))
        return {} if self.version is None else {"redis_version": self.version}

    def execute_command(self, *args):
        self.calls.append(args)
        if self.stream is None:
            raise redis.ResponseError("ERR no such key")
        if self.resp3:
            return dict(self.stream)
        return [x for pair in self.stream.items() for x in pair]

    def config_get(self, name):
        self.calls.append(("CONFIG", name))
        if isinstance(self.config, Exception):
            raise self.config
        return {} if self.config is None else {name: self.config}


def test_constants_and_write_ids():
    assert (MODES, DEFAULT_WINDOW, IDMP_SINCE) == (("auto", "true", "false"), 100, (8, 6))
    ids = {new_write_id() for _ in range(50)}
    assert len(ids) == 50 and all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)


@pytest.mark.parametrize("seed", range(2))
def test_version_rule(seed):
    rng = random.Random(seed)
    for _ in range(500):
        parts = [str(rng.choice([0, 1, 5, 6, 7, 8, 9, 10, 99])) for _ in range(rng.randint(1, 4))]
        parts = [p + rng.choice(["", "", "rc1", "-m01"]) if rng.random() < 0.3 else p for p in parts]
        text = ".".join(parts)
        want = tuple(int(re.sub(r"\D", "", p) or 0) for p in text.split(".")[:3])
        assert _version(text) == want
        assert supports_idmp(FakeClient(text)) is (want >= (8, 6))
    assert _version("") == (0,)
    assert _version("8.6") == (8, 6) and _version("8.5.99") == (8, 5, 99) and _version("v9.x.1.2") == (9, 0, 1)
    assert supports_idmp(FakeClient(None)) is False
    assert supports_idmp(FakeClient("8.6")) and supports_idmp(FakeClient("10.0")) and not supports_idmp(FakeClient("8.5.9"))
    assert FakeClient("8.6").info("server") and supports_idmp(fake := FakeClient("8.6")) and fake.calls == [("INFO", "server")]


def test_use_idmp_modes(caplog):
    caplog.set_level(logging.WARNING, logger="millrace.spark")
    new, old = FakeClient("8.6.0"), FakeClient("7.4.2")
    assert use_idmp(new, "auto", "here") is True and use_idmp(new, "true", "here") is True
    assert use_idmp(new, "false", "here") is False and use_idmp(old, "false", "here") is False
    assert caplog.records == []
    with pytest.raises(SourceError) as excinfo:
        use_idmp(old, "true", "redis://h:1/0")
    assert str(excinfo.value) == (
        "millrace: the server at redis://h:1/0 does not support XADD IDMP (Redis >= 8.6 or Millrace); "
        "option exactlyOnce=true needs it (exactlyOnce=auto or false write at least once)")
    assert caplog.records == []
    assert use_idmp(old, "auto", "redis://h:2/0") is False
    [record] = caplog.records
    assert record.name == "millrace.spark" and record.levelno == logging.WARNING
    assert record.getMessage() == (
        "millrace: the server at redis://h:2/0 has no idempotent XADD (IDMP, Redis >= 8.6): writes are at-least-once, "
        "a retried task or restarted query can add its rows again (option exactlyOnce=false silences this)")
    assert idempotence.log.name == "millrace.spark"


@pytest.mark.parametrize("seed", range(3))
def test_row_identity_against_the_rule(seed):
    rng = random.Random(seed)
    for _ in range(200):
        source = rng.choice(["stream-bytes", "stream-str", "stream-none", "config", "config-bad", "config-error", "config-empty"])
        size = rng.choice([1, 2, 3, 7, 100, 1000])
        if source == "stream-bytes":
            client, want = FakeClient(stream={b"length": 3, b"idmp-maxsize": size}), size
        elif source == "stream-str":
            client, want = FakeClient(stream={"length": 3, "idmp-maxsize": str(size)}, resp3=True), size
        elif source == "stream-none":  # a server whose XINFO has no IDMP fields
            client, want = FakeClient(stream={b"length": 3}), DEFAULT_WINDOW
        elif source == "config":
            client, want = FakeClient(config=str(size)), size
        elif source == "config-bad":
            client, want = FakeClient(config="lots"), DEFAULT_WINDOW
        elif source == "config-error":
            client, want = FakeClient(config=redis.ResponseError("ERR unknown")), DEFAULT_WINDOW
        else:
            client, want = FakeClient(), DEFAULT_WINDOW
        write, batch, partition = new_write_id(), rng.randrange(5), rng.randrange(5)
        ident = RowIdentity(client, write, batch, partition)
        rows = sorted(rng.sample(range(3 * size + 5), min(20, 3 * size + 5)))
        for row in rows:
            assert ident.idmp("k", row) == ["IDMP", f"millrace-spark:{write}:{batch}:{partition}:{row // want}", str(row)]
        assert ident.window("k") == want and ident.windows == {"k": want}
        # asked once per stream, then remembered
        asked = [c for c in client.calls if c[0] in ("XINFO", "CONFIG")]
        assert asked[0] == ("XINFO", "STREAM", "k")
        assert len(asked) == (1 if source.startswith("stream") else 2)
        if not source.startswith("stream"):
            assert asked[1] == ("CONFIG", "stream-idmp-maxsize")


def test_for_task_outside_spark_and_inside(monkeypatch):
    import pyspark

    client = FakeClient()
    monkeypatch.setattr(pyspark.TaskContext, "get", classmethod(lambda cls: None))
    assert RowIdentity.for_task(client, "w1").prefix == "millrace-spark:w1:0:0:"
    drawn = RowIdentity.for_task(client, None).prefix
    assert re.fullmatch(r"millrace-spark:[0-9a-f]{32}:0:0:", drawn) and drawn != RowIdentity.for_task(client, None).prefix

    class Context:
        def __init__(self, props, partition):
            self.props, self.partition = props, partition

        def partitionId(self):  # noqa: N802 (pyspark's name)
            return self.partition

        def getLocalProperty(self, name):  # noqa: N802
            return self.props.get(name)

    for props, want in (({"sql.streaming.queryId": "q", "streaming.sql.batchId": "12"}, "millrace-spark:q:12:3:"),
                        ({"sql.streaming.queryId": "q"}, "millrace-spark:q:0:3:"),
                        ({"streaming.sql.batchId": "12"}, "millrace-spark:w2:0:3:"),
                        ({"sql.streaming.queryId": ""}, "millrace-spark:w2:0:3:")):
        monkeypatch.setattr(pyspark.TaskContext, "get", classmethod(lambda cls, p=props: Context(p, 3)))
        ident = RowIdentity.for_task(client, "w2")
        assert ident.prefix == want and ident.client is client and ident.windows == {}
