"""A workspace's own inbound domains (POST, verify and DELETE /inbound/domains…): adding
one gives the records to publish (an MX to the operator's inbound host, a TXT proving
it is this workspace's); verifying looks them up through the DNS adapter it is handed
(the same checks as sending domains, pipelines/domains/dns_records.py) and, once both
hold, the workspace receives at the domain — unless another workspace proved it first
(409). Mail to any local part of a verified domain is the workspace's; its routes pick
the receiver. docs/inbound.md."""

from __future__ import annotations

import secrets
from typing import NamedTuple

from pymongo.asynchronous.database import AsyncDatabase

from mongo import inbound_domains
from pipelines.core.clock import now_iso
from pipelines.core.errors import Conflict
from pipelines.core.ids import new_uuid
from pipelines.core.settings import Settings
from pipelines.domains import dns_records
from pipelines.domains.dns_records import Resolver


class Checked(NamedTuple):
    domain: dict | None  # None: removed while it was looked up
    failed_records: list[str]


async def add(db: AsyncDatabase, settings: Settings, workspace_id: str, domain: str) -> dict:
    """The new, unverified domain; 409 duplicate when the workspace has it already."""
    token = secrets.token_hex(16)
    doc = {"_id": new_uuid(), "workspace_id": workspace_id, "domain": domain, "verified": False,
           "verified_at": None, "records": dns_records.inbound_records(domain, token=token,
                                                                       mx_host=settings.inbound_domain.lower()),
           "created_at": now_iso(), "last_checked_at": None}
    if not await inbound_domains.insert(db, doc):
        raise Conflict(f"{domain} is already an inbound domain of this workspace.", code="duplicate", path="domain")
    return doc


async def verify(db: AsyncDatabase, resolver: Resolver, domain: dict) -> Checked:
    """Look the records up and store the run; verified ones claim the domain."""
    check = await dns_records.verify(domain["records"], resolver, checked_at=now_iso())
    if check.verified:
        owner = await inbound_domains.claim(db, domain["domain"], domain["workspace_id"], domain["_id"])
        if owner != domain["workspace_id"]:
            raise Conflict(f"{domain['domain']} receives mail for another workspace already.", path="domain")
    saved = await inbound_domains.save_check(db, domain["workspace_id"], domain["_id"], check.records, check.verified)
    return Checked(saved, check.failed)


async def delete(db: AsyncDatabase, workspace_id: str, domain_id: str) -> bool:
    return await inbound_domains.delete(db, workspace_id, domain_id)
