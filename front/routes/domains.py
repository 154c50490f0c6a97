"""Sending domains: add (a DKIM key pair and the DNS records to publish, and the DMARC
record we recommend), list, read, verify against DNS (DMARC only warns), remove. Record shape and verification rules: pipelines/domains/dns_records.py."""

from __future__ import annotations

import asyncio
import secrets
from typing import Annotated

from pydantic import AfterValidator, Field, StringConstraints
from quart import Blueprint

from mongo import domains as domain_store
from pipelines.messages import dkim
from pipelines.adapters.dns_client import DnsPythonResolver
from pipelines.domains import dns_records
from pipelines import views
from pipelines.core.clock import now_iso
from pipelines.core.errors import Conflict, ValidationFailed
from pipelines.core.ids import new_uuid

from ..lookup import found, no_such, owned
from ..pagination import PageQuery
from ..resource_routes import delete_route, list_route, read_route
from ..responses import one
from ..runtime import caller, db, settings
from ..types import Strict
from ..validation import body

bp = Blueprint("domains", __name__, url_prefix="/api/v1")


def _hostname(value: str) -> str:
    name = value.strip().lower().rstrip(".")
    if not dns_records.valid_hostname(name):
        raise ValueError("not a valid domain name (e.g. mail.example.com)")
    return name


class AddDomain(Strict):
    domain: Annotated[str, StringConstraints(min_length=1, max_length=253), AfterValidator(_hostname)] = Field(
        json_schema_extra={"pattern": r"^\s*([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63}\.?\s*$"},
        description="The domain to send from, e.g. `mail.example.com` (lower-cased; no trailing dot).")


def _refuse_service_domains(domain: str) -> None:
    s = settings()
    for own in (s.shared_domain, s.bounce_domain):
        if domain == own or domain.endswith("." + own):
            raise ValidationFailed(f"domain: {domain} belongs to the service.", path="domain")


@bp.post("/domains")
@body(AddDomain)
async def add_domain(data: AddDomain):
    _refuse_service_domains(data.domain)
    sealed, public_b64 = await asyncio.to_thread(dkim.new_sealed_key, settings().secret_key)
    domain_id, token = new_uuid(), secrets.token_hex(16)
    doc = {
        "_id": domain_id, "workspace_id": caller().workspace_id, "domain": data.domain,
        "verified": False, "verified_at": None, "verification_token": token,
        "dkim_selector": dns_records.SELECTOR, "dkim_private_key": sealed, "dkim_public_key": public_b64,
        "records": dns_records.records_to_publish(data.domain, token=token, key_id=domain_id,
                                                  public_b64=public_b64, shared_domain=settings().shared_domain,
                                                  bounce_domain=settings().bounce_domain),
        "return_path_host": dns_records.return_path_host(data.domain), "return_path_verified": False,
        "dmarc": dns_records.dmarc_record(data.domain), "created_at": now_iso(), "last_checked_at": None,
    }
    if not await domain_store.insert(db(), doc):
        raise Conflict(f"{data.domain} is already added to this workspace.", code="duplicate", path="domain")
    return one(views.domain(doc), 201)


list_route(bp, "/domains", "list_domains", PageQuery, domain_store.list_page, view=views.domain)


read_route(bp, "/domains/<uuid:domain_id>", "get_domain", domain_store, "domain", views.domain)


@bp.post("/domains/<uuid:domain_id>/verify")
async def verify_domain(domain_id: str):
    doc = await owned(domain_store, domain_id, "domain")
    resolver = DnsPythonResolver(settings().dns_resolver)
    records = dns_records.with_return_path(doc["records"], doc["domain"], settings().bounce_domain)
    checked_at = now_iso()
    check = await dns_records.verify(records, resolver, checked_at=checked_at)
    dmarc = await dns_records.check_dmarc(doc["domain"], resolver, checked_at=checked_at)
    # None when the domain was removed while we were looking it up
    saved = await found(domain_store.save_check(db(), caller().workspace_id, domain_id, records=check.records,
                                                verified=check.verified,
                                                return_path_host=dns_records.return_path_host(doc["domain"]),
                                                return_path_verified=check.return_path_verified, dmarc=dmarc),
                        no_such("domain"))
    return one({**views.domain(saved), "failed_records": check.failed,
                "warnings": dns_records.dmarc_warnings(dmarc)})


delete_route(bp, "/domains/<uuid:domain_id>", "delete_domain", domain_store.delete, "domain")
