"""Benchmarks: Millrace against Redis and the thin Python server (`python -m bench`)."""
