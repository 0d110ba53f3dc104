"""Errors shared by every layer.

`ReplyError` is raised anywhere (storage included) to answer a command with an
error reply; its text is the whole Redis error line, code first ("ERR ...",
"WRONGTYPE ..."), so the same exception carries Redis's exact wording from
the place that knows it to the client.
"""


class ReplyError(Exception):
    """A command failed; str(self) is the error reply, e.g. 'ERR syntax error'."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ProtocolError(Exception):
    """The client sent bytes that are not RESP; Redis replies and closes the link."""


WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"
SYNTAX = "ERR syntax error"
NOT_INTEGER = "ERR value is not an integer or out of range"
NOT_FLOAT = "ERR value is not a valid float"
NO_SUCH_KEY = "ERR no such key"
OVERFLOW = "ERR increment or decrement would overflow"


def wrong_arity(name: str) -> ReplyError:
    return ReplyError(f"ERR wrong number of arguments for '{name}' command")


def arg_text(arg: bytes) -> str:
    """An argument quoted in an error text, as Redis's printf-style '%s' quotes it: byte for byte up
    to its first NUL (Server.error encodes the text back with surrogateescape, so bytes that are not
    UTF-8 come out as they came in)."""
    return arg.partition(b"\0")[0].decode("utf-8", "surrogateescape")


def error_line(message: str) -> bytes:
    """An error text as Redis writes it (addReplyErrorFormat): arguments echoed byte for byte (see
    `arg_text`), and no CR or LF inside, which would end the line early (they become spaces)."""
    data = message.encode("utf-8", "surrogateescape")
    if b"\r" in data or b"\n" in data:
        data = data.strip(b"\r\n").replace(b"\r", b" ").replace(b"\n", b" ")
    return data


def subcommand_error(argv: list[bytes]) -> ReplyError:
    """Redis's reply to a container command's unknown subcommand or wrong argument count."""
    return ReplyError(
        f"ERR unknown subcommand or wrong number of arguments for '{arg_text(argv[1][:128])}'. Try {arg_text(argv[0]).upper()} HELP."
    )
