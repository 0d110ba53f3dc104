"""Hostile input and resource limits (issue 25): what a client sends cannot stall, crash or take
over the server. Each case runs against the real process, with Redis's behaviour as the expected
result."""
