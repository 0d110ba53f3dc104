"""Reply values: what handlers return, independent of RESP version.

Plain Python values map to the obvious RESP types so that the hot path needs
no wrapping: `bytes` is a bulk string, `int` an integer, `None` a null, `list`
or `tuple` an array, `float` a double. The classes below mark the replies
whose wire form differs by protocol version or by kind.
"""


class Simple(bytes):
    """A status reply: `+OK`."""


class Error(bytes):
    """An error reply: `-ERR ...` (the bytes exclude the leading '-')."""


class Verbatim(bytes):
    """RESP3 verbatim text (`=`, format `txt`); a bulk string in RESP2."""


class Map(dict):
    """RESP3 map (`%`); a flat key/value array in RESP2."""


class Set(list):
    """RESP3 set (`~`); an array in RESP2."""


class Push(list):
    """RESP3 out-of-band push (`>`); an array in RESP2."""


class Entries(list):
    """Redis's stream range reply: an array of [id, [field, value, ...]] pairs.

    Items are `[id, fields]` pairs: `id` a bulk string, `fields` a list of bulk
    strings (or a null body). The encoder writes each field list with
    hiredis.pack_command, in C: a range reply is mostly such arrays, and the
    form is the same in RESP2 and RESP3.
    """


class _NullArray:
    """The RESP2 null array (`*-1`), a plain null in RESP3 (timeouts, aborted EXEC)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NULL_ARRAY"


class Raw(bytes):
    """Bytes already encoded as RESP, written as they are."""


NULL_ARRAY = _NullArray()
OK = Simple(b"OK")
PONG = Simple(b"PONG")
QUEUED = Simple(b"QUEUED")

Reply = bytes | int | float | None | list | tuple | dict | _NullArray
