"""Inbound addresses and route patterns.

A workspace receives at `<token>[+<tag>]@<operator inbound domain>`: `token` is random
(80 bits, base32, lower-case: never the workspace id, so an address cannot be guessed from
anything a workspace shows), and `+tag` is kept for the sender (a ticket number). On a
custom inbound domain of the workspace every local part is the workspace's.

A route's pattern is matched against the recipient, lower-cased:
- `*` alone: every recipient of the workspace;
- with no `*`: that address, with or without a `+tag` (`support@acme.example` also takes
  `support+42@acme.example`; a pattern with a tag takes only that tag);
- with `*`s: a glob over the whole address, `*` matching any run of characters, `+tag`
  included (`<token>+ticket-*@…`, `*@support.acme.example`)."""

from __future__ import annotations

import base64
import dataclasses
import re
import secrets

TOKEN_BYTES = 10  # 80 bits: 16 base32 characters
TOKEN_SHAPE = re.compile(r"[a-z2-7]{16}")
MAX_PATTERN_LENGTH = 254
# What a pattern may hold: an address's usual characters and `*`; no white space, quotes,
# brackets or control characters (nothing that needs quoting in an address).
# (Also the pattern the API's schema publishes: front/routes/inbound.py.)
PATTERN_REGEX = r"^(\*|[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}@[A-Za-z0-9*.-]{1,253})$"
PATTERN_SHAPE = re.compile(PATTERN_REGEX)


def new_token() -> str:
    return base64.b32encode(secrets.token_bytes(TOKEN_BYTES)).decode().lower()


@dataclasses.dataclass(frozen=True)
class Recipient:
    address: str  # lower-cased
    local: str    # before the `+`
    tag: str      # after the first `+` ("" when none)
    domain: str

    @property
    def base(self) -> str:
        """The address without its tag."""
        return f"{self.local}@{self.domain}"


def recipient(address: str) -> Recipient | None:
    """`address` read as local[+tag]@domain, lower-cased; None when it is not one."""
    local_part, at, domain = address.strip().strip("<>").lower().rpartition("@")
    if not at or not local_part or not domain:
        return None
    local, _, tag = local_part.partition("+")
    if not local:
        return None
    return Recipient(f"{local_part}@{domain}", local, tag, domain)


def token_of(address: Recipient, inbound_domain: str) -> str | None:
    """The workspace token an address on the operator's inbound domain names."""
    if address.domain != inbound_domain.lower() or not TOKEN_SHAPE.fullmatch(address.local):
        return None
    return address.local


def address_for(token: str, inbound_domain: str, tag: str = "") -> str:
    return f"{token}{'+' + tag if tag else ''}@{inbound_domain.lower()}"


def pattern_problem(pattern: str) -> str | None:
    """Why `pattern` is not one (None when it is)."""
    if not PATTERN_SHAPE.fullmatch(pattern):
        return ("must be `*`, an address (local@domain), or an address with `*` wildcards; letters, digits "
                "and . ! # $ % & ' * + / = ? ^ _ ` { | } ~ - only")
    return None


def _glob(pattern: str) -> re.Pattern:
    return re.compile("".join(".*" if part == "*" else re.escape(part) for part in re.split(r"(\*)", pattern)),
                      re.DOTALL)


def matches(pattern: str, address: Recipient) -> bool:
    pattern = pattern.lower()
    if pattern == "*":
        return True
    if "*" not in pattern:
        return pattern in (address.address, address.base)
    return _glob(pattern).fullmatch(address.address) is not None


def first_match(routes: list[dict], address: Recipient) -> dict | None:
    """The route that takes `address`: routes in their order (`priority`, then oldest
    first), the first whose pattern matches."""
    ordered = sorted(routes, key=lambda r: (r.get("priority", 0), r["created_at"], r["_id"]))
    return next((r for r in ordered if matches(r["pattern"], address)), None)
