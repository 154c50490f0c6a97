"""A sending domain's commands (POST, verify and DELETE /domains…): adding one makes its
DKIM key pair (sealed at rest) and the DNS records to publish; verifying looks them up
through the DNS adapter it is handed and stores the run (DMARC only warns)."""

from __future__ import annotations

import asyncio
import secrets
from typing import NamedTuple

from pymongo.asynchronous.database import AsyncDatabase

from mongo import domains
from pipelines.core.clock import now_iso
from pipelines.core.errors import Conflict
from pipelines.core.ids import new_uuid
from pipelines.core.settings import Settings
from pipelines.domains import dns_records
from pipelines.domains.dns_records import Resolver
from pipelines.messages import dkim


class Checked(NamedTuple):
    domain: dict | None  # None: the domain was removed while it was looked up
    failed_records: list
    dmarc: dict


async def add(db: AsyncDatabase, settings: Settings, workspace_id: str, domain: str) -> dict:
    """The new, unverified domain; 409 duplicate when the workspace has it already."""
    # making an RSA key takes a while: off the event loop
    sealed, public_b64 = await asyncio.to_thread(dkim.new_sealed_key, settings.secret_key)
    domain_id, token = new_uuid(), secrets.token_hex(16)
    doc = {
        "_id": domain_id, "workspace_id": workspace_id, "domain": domain,
        "verified": False, "verified_at": None, "verification_token": token,
        "dkim_selector": dns_records.SELECTOR, "dkim_private_key": sealed, "dkim_public_key": public_b64,
        "records": dns_records.records_to_publish(domain, token=token, key_id=domain_id,
                                                  public_b64=public_b64, shared_domain=settings.shared_domain,
                                                  bounce_domain=settings.bounce_domain),
        "return_path_host": dns_records.return_path_host(domain), "return_path_verified": False,
        "dmarc": dns_records.dmarc_record(domain), "created_at": now_iso(), "last_checked_at": None,
    }
    if not await domains.insert(db, doc):
        raise Conflict(f"{domain} is already added to this workspace.", code="duplicate", path="domain")
    return doc


async def verify(db: AsyncDatabase, settings: Settings, resolver: Resolver, domain: dict) -> Checked:
    """Look up the domain's records and DMARC policy, and store what was found."""
    checked_at = now_iso()
    check = await dns_records.verify(domain["records"], resolver, checked_at=checked_at)
    dmarc = await dns_records.check_dmarc(domain["domain"], resolver, checked_at=checked_at)
    saved = await domains.save_check(db, domain["workspace_id"], domain["_id"], records=check.records,
                                     verified=check.verified,
                                     return_path_host=dns_records.return_path_host(domain["domain"]),
                                     return_path_verified=check.return_path_verified, dmarc=dmarc)
    return Checked(saved, check.failed, dmarc)


async def delete(db: AsyncDatabase, workspace_id: str, domain_id: str) -> bool:
    return await domains.delete(db, workspace_id, domain_id)
