"""The data model: databases, keys, expiry, streams and consumer groups.

Pure: no asyncio, sockets, files or wall clock; time is passed in as `now`
(milliseconds), so everything here is testable and deterministic on replay.
"""
