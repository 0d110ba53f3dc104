"""The Millrace server: asyncio listener, clients, command table, handlers."""

__version__ = "0.1.0"
REDIS_VERSION = "8.10.1"  # the Redis release whose stream semantics Millrace implements (issue 21)
