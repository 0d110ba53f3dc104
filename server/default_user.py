"""The default user: Millrace's one ACL user, as Redis's ACL rules, an ACL file and `user` lines describe it.

Redis keeps `requirepass` as a shortcut for the default user's password; its ACL file and its
config file's `user` directives (every CONFIG REWRITE writes one) set the same user. Millrace has
that one user with every permission, so it takes the rules that leave it so (on/off, passwords
and their hashes, `~* &* +@all`) and refuses, at start-up, any other user and any rule that
would narrow a permission: a security setting is never accepted and then ignored.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from dataclasses import dataclass, field

log = logging.getLogger("millrace")

UNKNOWN_RULE = "Syntax error"
BAD_HASH = "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters"
NO_SUCH_PASSWORD = "The password you are trying to remove from the user does not exist"
ONE_USER = "Millrace has one user, 'default', with every permission"


class AclError(Exception):
    """A rule or file Redis would take that Millrace cannot honour, or one Redis refuses too;
    `rule` names the rule at fault (None when it is the rules as a whole)."""

    def __init__(self, message: str, rule: str | None = None) -> None:
        super().__init__(message)
        self.rule = rule


def password_hash(password: bytes) -> str:
    """Redis's ACLHashPassword: SHA-256, lowercase hex."""
    return hashlib.sha256(password).hexdigest()


@dataclass(slots=True)
class DefaultUser:
    """Redis's DefaultUser, reduced to what can vary while every permission stays granted."""

    enabled: bool = True
    nopass: bool = True
    hashes: list[str] = field(default_factory=list)
    sanitize_payload: bool = True  # a flag ACL LIST shows (Redis's `reset` sets it); Millrace has no RESTORE to sanitize

    @property
    def auth_required(self) -> bool:
        """Redis's authRequired for a client that has not logged in: a password, or a disabled user."""
        return not self.nopass or not self.enabled

    def check(self, password: bytes) -> bool:
        """Redis's ACLCheckUserCredentials for this user."""
        if not self.enabled:
            return False
        if self.nopass:
            return True
        wanted = password_hash(password)
        return any(hmac.compare_digest(wanted, known) for known in self.hashes)

    def set_requirepass(self, password: str) -> None:
        """Redis's ACLUpdateDefaultUserPassword: `resetpass >pw`, or `nopass` for an empty one."""
        self.hashes = []
        self.nopass = not password
        if password:
            self.hashes.append(password_hash(password.encode("utf-8", "surrogateescape")))

    def describe(self) -> str:
        """ACL LIST's line (Redis's ACLDescribeUser): flags, password hashes, keys, channels, commands."""
        flags = ["on" if self.enabled else "off"]
        if self.nopass:
            flags.append("nopass")
        flags.append("sanitize-payload" if self.sanitize_payload else "skip-sanitize-payload")
        return " ".join(["user default", *flags, *(f"#{h}" for h in self.hashes), "~* &* +@all"])

    def reset(self) -> None:
        """Redis's `reset` as far as this user goes: off, no password, sanitize-payload."""
        self.enabled, self.nopass, self.hashes, self.sanitize_payload = False, False, [], True

    def apply(self, rules: list[str]) -> None:
        """Rules in order, from `reset` (as Redis loads a user); AclError for one it refuses or cannot honour."""
        keys = channels = commands = False
        self.reset()
        for rule in rules:
            word = rule.lower()
            if word == "on":
                self.enabled = True
            elif word == "off":
                self.enabled = False
            elif word == "nopass":
                self.nopass, self.hashes = True, []
            elif word == "resetpass":
                self.nopass, self.hashes = False, []
            elif word in ("sanitize-payload", "skip-sanitize-payload"):
                self.sanitize_payload = word == "sanitize-payload"
            elif rule[:1] in (">", "#"):
                digest = _digest(rule)
                if digest not in self.hashes:
                    self.hashes.append(digest)
                self.nopass = False
            elif rule[:1] in ("<", "!"):
                digest = _digest(rule)
                if digest not in self.hashes:
                    raise AclError(NO_SUCH_PASSWORD, rule)
                self.hashes.remove(digest)
            elif word in ("~*", "%rw~*", "allkeys"):
                keys = True
            elif word == "resetkeys":
                keys = False
            elif word in ("&*", "allchannels"):
                channels = True
            elif word == "resetchannels":
                channels = False
            elif word in ("+@all", "allcommands"):
                commands = True
            elif word in ("-@all", "nocommands"):
                commands = False
            elif word == "reset":
                keys = channels = commands = False
                self.reset()
            elif word != "clearselectors":  # (no selectors: nothing to clear)
                raise AclError(f"{ONE_USER}: a rule that narrows it is not supported", rule)
        missing = [name for name, granted in (("~* (all keys)", keys), ("&* (all channels)", channels), ("+@all (all commands)", commands)) if not granted]
        if missing:
            raise AclError(f"{ONE_USER}: its rules must grant {', '.join(missing)}")


def _digest(rule: str) -> str:
    """The SHA-256 a password rule names: hashed from `>pw`/`<pw`, given by `#hash`/`!hash` (checked)."""
    if rule[0] in "><":
        return password_hash(rule[1:].encode("utf-8", "surrogateescape"))
    digest = rule[1:]
    if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise AclError(BAD_HASH, rule)
    return digest


def from_directive(words: list[str], seen: bool) -> DefaultUser:
    """A config file's `user name rules...` line (Redis's ACLAppendUserForLoading); `seen`: one came before.
    AclError with the reason Redis's FATAL CONFIG FILE ERROR gives."""
    name, rules = words[0], words[1:]
    if name != "default":
        raise AclError(f"Error in user declaration '{name}': {ONE_USER}; other users are not supported")
    if seen:
        raise AclError("Error in user declaration 'default': Duplicate user found. A user can only be defined once in config files")
    user = DefaultUser()
    try:
        user.apply(rules)
    except AclError as exc:
        raise AclError(f"Error in user declaration '{exc.rule or name}': {exc}") from None
    return user


BOTH = (
    "Configuring Redis with users defined in redis.conf and at the same setting an ACL file path is invalid. "
    "This setup is very likely to lead to configuration errors and security holes, please define either an ACL file "
    "or declare users directly in your redis.conf, but not both."
)


def from_file(path: str) -> DefaultUser:
    """An ACL file (Redis's ACLLoadFromFile): `user name rules...` per line, blank lines skipped, no comments.

    A file without a default user leaves it as Redis creates it: on, nopass, every permission."""
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as handle:
            lines = handle.read().split("\n")
    except OSError as exc:
        raise AclError(f"Error loading ACLs, opening file '{path}': {exc.strerror}") from None
    errors = []
    user = DefaultUser()
    seen = False
    for number, raw in enumerate(lines, 1):
        line = raw.strip(" \t\r\n")
        if not line:
            continue
        words = line.split()
        if words[0] != "user" or len(words) < 2:
            errors.append(f"{path}:{number} should start with user keyword followed by the username. ")
            continue
        if words[1] != "default":
            errors.append(f"{path}:{number}: {ONE_USER}; user '{words[1]}' is not supported. ")
            continue
        if seen:
            errors.append(f"WARNING: Duplicate user 'default' found on line {number}. ")
            continue
        seen = True
        try:
            candidate = DefaultUser()
            candidate.apply(words[2:])
            user = candidate
        except AclError as exc:
            errors.append(f"{path}:{number}: {exc}. ")
    if errors:
        raise AclError("".join(errors) + "WARNING: ACL errors detected, no change to the previously active ACL rules was performed")
    return user
