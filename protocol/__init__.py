"""RESP2/RESP3 wire protocol: request parsing, reply values and their encoding."""
