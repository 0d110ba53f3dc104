"""Durability: msgpack snapshots and the append-only file of normalized effects."""
