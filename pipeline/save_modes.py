"""Save modes with a Millrace message, as Kafka's sink gives its own.

Spark refuses `errorifexists` (its default) and `ignore` for a Python data
source before the source is asked, with a generic UNSUPPORTED_DATA_SOURCE_SAVE_MODE
that suggests Overwrite too. `register()` wraps DataFrameWriter.save once so that,
for this source only, that refusal says what to use; every other error and every
other source is untouched.
"""

from __future__ import annotations

import functools
import re

from pipeline.options import OptionError

_REFUSED = re.compile(r'UNSUPPORTED_DATA_SOURCE_SAVE_MODE\]\s*The data source "millrace" cannot be written in the "(\w+)" mode')


def message(mode: str) -> str:
    return (
        f"millrace: save mode '{mode}' is not supported: a stream is append-only, so there is nothing to check for "
        "existence or to overwrite. Use .mode('append') (to start the stream afresh, DEL the key first)"
    )


def install() -> None:
    """Wrap DataFrameWriter.save (once per process)."""
    from pyspark.sql.readwriter import DataFrameWriter

    original = DataFrameWriter.save
    if getattr(original, "millrace_save_modes", False):
        return

    @functools.wraps(original)
    def save(self, *args, **kwargs):
        try:
            return original(self, *args, **kwargs)
        except Exception as exc:
            refused = _REFUSED.search(str(exc))
            if refused is None:
                raise
            raise OptionError(message(refused[1])) from exc

    save.millrace_save_modes = True  # type: ignore[attr-defined]
    DataFrameWriter.save = save
