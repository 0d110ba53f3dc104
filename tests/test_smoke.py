"""The server starts, answers in both protocols and pipelines in order."""


def test_ping_and_set_get(r):
    assert r.ping() is True
    assert r.set("k", "v") is True
    assert r.get("k") == b"v"


def test_pipeline_order(r):
    pipe = r.pipeline(transaction=False)
    for i in range(500):
        pipe.set(f"k{i}", i)
        pipe.get(f"k{i}")
    replies = pipe.execute()
    assert replies[1::2] == [str(i).encode() for i in range(500)]
