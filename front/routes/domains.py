"""Sending domains: add (a DKIM key pair and the DNS records to publish, and the DMARC
record we recommend), list, read, verify against DNS (DMARC only warns), remove. Record shape
and verification rules: pipelines/domains/dns_records.py."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field, StringConstraints
from quart import Blueprint

from mongo import domains as domain_store
from pipelines import views
from pipelines.adapters.dns_client import DnsPythonResolver
from pipelines.core.errors import ValidationFailed
from pipelines.domains import dns_records
from pipelines.workflows import manage_domains

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


# A DNS name as a body field: lower-cased, no trailing dot (also POST /inbound/domains).
DomainName = Annotated[str, StringConstraints(min_length=1, max_length=253), AfterValidator(_hostname), Field(
    json_schema_extra={"pattern": r"^\s*([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63}\.?\s*$"})]


class AddDomain(Strict):
    domain: DomainName = Field(description="The domain to send from, e.g. `mail.example.com` (lower-cased; no "
                                           "trailing dot).")


def refuse_service_domains(domain: str) -> None:
    """A domain of the service's own (shared sending, bounce, inbound) or under one: 400."""
    s = settings()
    for own in (s.shared_domain, s.bounce_domain, s.inbound_domain):
        if domain == own or domain.endswith("." + own):
            raise ValidationFailed(f"domain: {domain} belongs to the service.", path="domain")


@bp.post("/domains")
@body(AddDomain)
async def add_domain(data: AddDomain):
    refuse_service_domains(data.domain)
    doc = await manage_domains.add(db(), settings(), caller().workspace_id, data.domain)
    return one(views.domain(doc), 201)


list_route(bp, "/domains", "list_domains", PageQuery, domain_store.list_page, view=views.domain)


read_route(bp, "/domains/<uuid:domain_id>", "get_domain", domain_store, "domain", views.domain)


@bp.post("/domains/<uuid:domain_id>/verify")
async def verify_domain(domain_id: str):
    doc = await owned(domain_store, domain_id, "domain")
    checked = await manage_domains.verify(db(), settings(), DnsPythonResolver(settings().dns_resolver), doc)
    saved = await found(checked.domain, no_such("domain"))
    return one({**views.domain(saved), "failed_records": checked.failed_records,
                "warnings": dns_records.dmarc_warnings(checked.dmarc)})


delete_route(bp, "/domains/<uuid:domain_id>", "delete_domain", manage_domains.delete, "domain")
