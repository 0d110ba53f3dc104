"""Command-line tools that talk to a Millrace (or Redis) server as clients."""
