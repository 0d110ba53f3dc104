"""pipeline/save_modes.py in-process (no Spark session): DataFrameWriter.save replaced by a
fake that raises what Spark raises, wrapped by install(); only Spark's refusal of a save
mode for this source is reworded, every other outcome passes through untouched."""

from __future__ import annotations

import pytest
from pyspark.sql.readwriter import DataFrameWriter

from pipeline.options import OptionError
from pipeline.save_modes import install, message


def _spark_refusal(source: str, mode: str) -> Exception:
    return Exception(
        f'[UNSUPPORTED_DATA_SOURCE_SAVE_MODE] The data source "{source}" cannot be written in the "{mode}" mode. '
        'Please use either the "Append" or "Overwrite" mode instead.'
    )


@pytest.fixture
def fake_save(monkeypatch):
    calls = []

    def save(self, *args, **kwargs):
        calls.append((self, args, kwargs))
        if isinstance(save.outcome, BaseException):
            raise save.outcome
        return save.outcome

    save.outcome = None
    monkeypatch.setattr(DataFrameWriter, "save", save)
    return save, calls


def test_message():
    assert message("ErrorIfExists") == (
        "millrace: save mode 'ErrorIfExists' is not supported: a stream is append-only, so there is nothing to check for "
        "existence or to overwrite. Use .mode('append') (to start the stream afresh, DEL the key first)"
    )


def test_install_wraps_once_and_passes_results_through(fake_save):
    original, calls = fake_save
    install()
    wrapped = DataFrameWriter.save
    assert wrapped is not original and wrapped.__wrapped__ is original and wrapped.__name__ == "save"
    assert wrapped.millrace_save_modes is True
    install()
    assert DataFrameWriter.save is wrapped  # not wrapped twice
    writer = object.__new__(DataFrameWriter)
    original.outcome = "done"
    assert writer.save("path", format="x") == "done"
    assert calls == [(writer, ("path",), {"format": "x"})]


@pytest.mark.parametrize("mode", ["ErrorIfExists", "Ignore", "Overwrite"])
def test_the_refusal_for_millrace_is_reworded(fake_save, mode):
    original, _ = fake_save
    install()
    refusal = _spark_refusal("millrace", mode)
    original.outcome = refusal
    with pytest.raises(OptionError) as excinfo:
        object.__new__(DataFrameWriter).save()
    assert str(excinfo.value) == message(mode) and excinfo.value.__cause__ is refusal


@pytest.mark.parametrize(
    "exc",
    [
        _spark_refusal("kafka", "ErrorIfExists"),
        _spark_refusal("millrace2", "Ignore"),
        Exception('[UNSUPPORTED_DATA_SOURCE_SAVE_MODE] The data source "millrace" cannot be read'),
        ValueError("something else"),
        KeyError("millrace"),
    ],
)
def test_every_other_error_passes_through(fake_save, exc):
    original, _ = fake_save
    install()
    original.outcome = exc
    with pytest.raises(type(exc)) as excinfo:
        object.__new__(DataFrameWriter).save()
    assert excinfo.value is exc and not isinstance(excinfo.value, OptionError)
