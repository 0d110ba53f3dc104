"""ACL, the read-only part: Millrace has one user, `default` (requirepass is its password)."""

from __future__ import annotations

import os

from protocol.errors import ReplyError, arg_text

from ..command import command, container
from .args import help_reply, to_int
from .introspection import CATEGORY_ORDER, acl_categories, all_names

container("acl", group="server", summary="A container for Access List Control commands.", since="6.0.0")


@command("acl|whoami", 2, "noscript loading stale", group="server", summary="Returns the authenticated username of the current connection.", since="6.0.0")
def acl_whoami(ctx, argv):
    return b"default"


@command("acl|users", 2, "admin noscript loading stale", group="server", summary="Lists all ACL users.", since="6.0.0", complexity="O(N). Where N is the number of configured users.")
def acl_users(ctx, argv):
    return [b"default"]


@command("acl|list", 2, "admin noscript loading stale", group="server", summary="Dumps the effective rules in ACL file format.", since="6.0.0", complexity="O(N). Where N is the number of configured users.")
def acl_list(ctx, argv):
    """ACL LIST: the default user's rules in Redis's ACLDescribeUser order: flags (nopass is one), then
    its passwords as Redis shows them, SHA-256 hashes, then keys, channels and commands."""
    return [ctx.server.default_user.describe().encode()]


@command("acl|cat", -2, "noscript loading stale", group="server", summary="Lists the ACL categories, or the commands inside a category.", since="6.0.0", complexity="O(1) since the categories and commands are a fixed set.")
def acl_cat(ctx, argv):
    """ACL CAT [category]"""
    if len(argv) == 2:
        return [name.encode() for name in CATEGORY_ORDER]
    if len(argv) > 3:
        raise ReplyError("ERR unknown subcommand or wrong number of arguments for 'CAT'. Try ACL HELP.")
    category = argv[2].decode(errors="replace").lower()
    if category not in CATEGORY_ORDER:
        raise ReplyError(f"ERR Unknown category '{arg_text(argv[2])}'")
    return [cmd.name.encode() for cmd in all_names() if category in acl_categories(cmd)]  # containers too, as Redis lists them


@command("acl|genpass", -2, "noscript loading stale", group="server", summary="Generates a pseudorandom, secure password that can be used to identify ACL users.", since="6.0.0")
def acl_genpass(ctx, argv):
    """ACL GENPASS [bits]"""
    bits = 256
    if len(argv) == 3:
        bits = to_int(argv[2])
        if not 0 < bits <= 4096:
            raise ReplyError("ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096")
    elif len(argv) > 3:
        raise ReplyError("ERR unknown subcommand or wrong number of arguments for 'GENPASS'. Try ACL HELP.")
    chars = (bits + 3) // 4
    return os.urandom((chars + 1) // 2).hex()[:chars].encode()


ACL_HELP = [
    "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CAT [<category>]",
    "    List all commands that belong to <category>, or all command categories",
    "    when no category is specified.",
    "GENPASS [<bits>]",
    "    Generate a secure 256-bit user password. The optional `bits` argument can",
    "    be used to specify a different size.",
    "LIST",
    "    Show users details in config file format.",
    "USERS",
    "    List all the registered usernames.",
    "WHOAMI",
    "    Return the current connection username.",
    "HELP",
    "    Print this help.",
]


@command("acl|help", 2, "loading stale", group="server", summary="Returns helpful text about the different subcommands.", since="6.0.0")
def acl_help(ctx, argv):
    return help_reply(ACL_HELP)



