"""Protected mode and the other "local clients only" switches.

With `protected-mode yes` and no password for the default user, Redis serves only clients
connected through the loopback interface: any other gets the DENIED text below as soon as it
connects, and is closed (clientAcceptHandler). `enable-debug-command local` and
`enable-protected-configs local` ask the same question of a client.
"""

from __future__ import annotations

DENIED = (
    b"-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the "
    b"default user. In this mode connections are only accepted from the loopback interface. If you want to connect "
    b"from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode "
    b"sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the "
    b"same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. "
    b"Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by "
    b"editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the "
    b"server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' "
    b"option. 4) Setup a an authentication password for the default user. NOTE: You only need to do one of the "
    b"above things in order for the server to start accepting connections from the outside.\r\n"
)


def is_local(host: str | None) -> bool:
    """Whether a peer address is the loopback interface, as Redis tells it: 127.*, ::1, or no address
    at all (a Unix socket)."""
    return not host or host.startswith("127.") or host == "::1"


def denied(config, default_user, host: str | None) -> bool:
    """Whether a new connection from host is refused by protected mode: Redis's test is the default
    user's nopass flag, however it was set (requirepass, an ACL file, a `user` line)."""
    return bool(config["protected-mode"]) and default_user.nopass and not is_local(host)
