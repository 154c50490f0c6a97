"""Who a message is from (sending rules 1–4 of the spec).

- No domain set-up needed: mail leaves from the workspace's own address on the shared
  domain, `from_name` as display name and `from_email` as Reply-To.
- A `from_email` on a domain the workspace added and verified: mail leaves from that
  address itself (and is signed for that domain).
- A `from_email` on a domain the workspace added but has not verified: 403 domain_invalid.
- No `from_email` and no workspace default: 400 missing_from_email.
"""

from __future__ import annotations

import dataclasses
import re

from pipelines.core.documents import Workspace
from pipelines.core.errors import Forbidden, MissingFromEmail

_LOCAL_SAFE = re.compile(r"[^a-z0-9]+")


@dataclasses.dataclass(frozen=True)
class Sender:
    from_address: str      # header From address
    from_name: str | None
    reply_to: str | list[str] | None  # one address or several (a transactional email's)
    signing_domain: str    # DKIM d= (and the domain the From address is on)
    custom_domain: bool


def workspace_local_part(name: str, workspace_id: str) -> str:
    """A readable, unique local part on the shared domain: `acme-corp-3f9a2c1d`."""
    slug = _LOCAL_SAFE.sub("-", name.lower()).strip("-")[:40] or "workspace"
    return f"{slug}-{workspace_id.replace('-', '')[:8]}"


def domain_of(address: str) -> str:
    return address.rsplit("@", 1)[-1].lower()


def resolve_sender(*, from_email: str | None, from_name: str | None, reply_to: str | list[str] | None,
                   default_from_email: str | None, shared_local_part: str, shared_domain: str,
                   domains: dict[str, bool]) -> Sender:
    """`domains` maps each domain the workspace added to whether it is verified."""
    address = from_email or default_from_email
    if not address:
        raise MissingFromEmail(
            "No from_email given and no default sender is configured for this workspace.",
            path="from_email")
    domain = domain_of(address)
    if domain in domains:
        if not domains[domain]:
            raise Forbidden(f"The sending domain {domain} is not verified yet.",
                            code="domain_invalid", path="from_email")
        return Sender(address, from_name, reply_to, domain, True)
    return Sender(f"{shared_local_part}@{shared_domain}", from_name, reply_to or address,
                  shared_domain, False)


def workspace_sender(workspace: Workspace, *, from_email: str | None, from_name: str | None,
                     reply_to: str | list[str] | None,
                     shared_domain: str, domains: dict[str, bool]) -> Sender:
    """Who mail of `workspace` with these fields is from: its default address and its
    local part on the shared domain fill what the fields leave out."""
    return resolve_sender(
        from_email=from_email, from_name=from_name, reply_to=reply_to,
        default_from_email=workspace.get("default_from_email"),
        shared_local_part=workspace.get("sending_local_part")
        or workspace_local_part(workspace["name"], workspace["_id"]),
        shared_domain=shared_domain, domains=domains)
