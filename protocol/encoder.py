"""Encode reply values as RESP2 or RESP3 bytes.

Replies are appended to a list of byte chunks which the connection joins and
writes once per event-loop turn, so a pipeline costs one syscall.
"""

from hiredis import pack_command

from .reply import NULL_ARRAY, Entries, Error, Map, Push, Raw, Set, Simple, Verbatim

_CRLF = b"\r\n"


def _double(value: float) -> bytes:
    if value != value:
        return b"nan"
    if value in (float("inf"), float("-inf")):
        return b"inf" if value > 0 else b"-inf"
    if value == int(value) and abs(value) < 1e17:
        return b"%d" % int(value)
    return repr(value).encode()


def _entries(value: Entries, out: list, encode) -> None:
    """A stream range: each entry's field array packed in C (the same bytes in RESP2 and RESP3)."""
    out.append(b"*%d\r\n" % len(value))
    for entry_id, fields in value:
        if type(fields) is list and fields:
            out.append(b"*2\r\n$%d\r\n%s\r\n%s" % (len(entry_id), entry_id, pack_command(tuple(fields))))
        else:  # a deleted entry's nil body (XREADGROUP history)
            out.append(b"*2\r\n$%d\r\n%s\r\n" % (len(entry_id), entry_id))
            encode(fields, out)


def encode2(value, out: list) -> None:
    """Append the RESP2 form of `value` to `out`."""
    kind = type(value)
    if kind is bytes:
        out.append(b"$%d\r\n%s\r\n" % (len(value), value))
    elif value is None:  # early too: a missing key's nil is a common reply
        out.append(b"$-1\r\n")
    elif kind is list or kind is tuple:
        out.append(b"*%d\r\n" % len(value))
        for item in value:
            if type(item) is bytes:  # bulk strings inline: ranges are arrays of them
                out.append(b"$%d\r\n%s\r\n" % (len(item), item))
            else:
                encode2(item, out)
    elif kind is Raw:  # pre-encoded stream entries: early, they are the bulk of read replies
        out.append(value)
    elif kind is Entries:
        _entries(value, out, encode2)
    elif kind is int:
        out.append(b":%d\r\n" % value)
    elif kind is Simple:
        out.append(b"+%s\r\n" % value)
    elif kind is Error:
        out.append(b"-%s\r\n" % value)
    elif kind is Map:
        out.append(b"*%d\r\n" % (2 * len(value)))
        for key, item in value.items():
            encode2(key, out)
            encode2(item, out)
    elif kind is Set or kind is Push:
        out.append(b"*%d\r\n" % len(value))
        for item in value:
            encode2(item, out)
    elif value is NULL_ARRAY:
        out.append(b"*-1\r\n")
    elif kind is float:
        text = _double(value)
        out.append(b"$%d\r\n%s\r\n" % (len(text), text))
    elif kind is Verbatim:
        out.append(b"$%d\r\n%s\r\n" % (len(value), value))
    elif kind is str:
        data = value.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    elif kind is bool:
        out.append(b":1\r\n" if value else b":0\r\n")
    else:
        raise TypeError(f"cannot encode reply of type {kind.__name__}")


def encode3(value, out: list) -> None:
    """Append the RESP3 form of `value` to `out`."""
    kind = type(value)
    if kind is bytes:
        out.append(b"$%d\r\n%s\r\n" % (len(value), value))
    elif value is None:  # early too: a missing key's nil is a common reply
        out.append(b"_\r\n")
    elif kind is list or kind is tuple:
        out.append(b"*%d\r\n" % len(value))
        for item in value:
            if type(item) is bytes:  # bulk strings inline: ranges are arrays of them
                out.append(b"$%d\r\n%s\r\n" % (len(item), item))
            else:
                encode3(item, out)
    elif kind is Raw:  # pre-encoded stream entries: early, they are the bulk of read replies
        out.append(value)
    elif kind is Entries:
        _entries(value, out, encode3)
    elif kind is int:
        out.append(b":%d\r\n" % value)
    elif kind is Simple:
        out.append(b"+%s\r\n" % value)
    elif value is NULL_ARRAY:
        out.append(b"_\r\n")
    elif kind is Error:
        out.append(b"-%s\r\n" % value)
    elif kind is Map:
        out.append(b"%%%d\r\n" % len(value))
        for key, item in value.items():
            encode3(key, out)
            encode3(item, out)
    elif kind is Set:
        out.append(b"~%d\r\n" % len(value))
        for item in value:
            encode3(item, out)
    elif kind is Push:
        out.append(b">%d\r\n" % len(value))
        for item in value:
            encode3(item, out)
    elif kind is float:
        out.append(b",%s\r\n" % _double(value))
    elif kind is Verbatim:
        out.append(b"=%d\r\ntxt:%s\r\n" % (len(value) + 4, value))
    elif kind is str:
        data = value.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    elif kind is bool:
        out.append(b"#t\r\n" if value else b"#f\r\n")
    else:
        raise TypeError(f"cannot encode reply of type {kind.__name__}")


def encode(value, resp: int = 2) -> bytes:
    """Encode one reply; convenient for tests and one-off writes."""
    out: list = []
    (encode3 if resp == 3 else encode2)(value, out)
    return b"".join(out)
