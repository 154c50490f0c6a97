"""DMARC (RFC 7489): does the From header's domain publish a policy, and does SPF or DKIM
pass for a domain aligned with it? The record is looked up at `_dmarc.<From domain>`, then
at the organisational domain's (the public suffix list bundled with `publicsuffixlist`:
no network)."""

from __future__ import annotations

import email.parser
import email.policy
import functools
import re

from publicsuffixlist import PublicSuffixList

from pipelines.core.documents import DkimResult, DmarcResult, SpfResult
from pipelines.domains.dns_records import LookupFailed
from pipelines.inbound.header_values import addresses
from pipelines.inbound.spf import MailResolver


@functools.cache
def _public_suffixes() -> PublicSuffixList:
    """Read on first use: building it from the bundled list took ~40 ms, which every
    `postroom` command paid at start (ops/inbound imports this module)."""
    return PublicSuffixList()


_VERSION = re.compile(r"^v\s*=\s*DMARC1\s*(;|$)", re.IGNORECASE)
_POLICIES = ("none", "quarantine", "reject")


def organisational_domain(domain: str) -> str:
    domain = domain.lower().rstrip(".")
    return _public_suffixes().privatesuffix(domain) or domain


def aligned(domain: str, from_domain: str, mode: str) -> bool:
    domain, from_domain = domain.lower().rstrip("."), from_domain.lower().rstrip(".")
    if mode == "s":
        return domain == from_domain
    return bool(domain) and organisational_domain(domain) == organisational_domain(from_domain)


def from_domain(raw: bytes) -> str | None:
    """The domain of the From header's address; None when there is not exactly one domain."""
    headers = email.parser.BytesHeaderParser(policy=email.policy.compat32).parsebytes(raw)
    values = [str(v) for k, v in headers.raw_items() if str(k).lower() == "from"]
    domains = {a["address"].rpartition("@")[2].lower().rstrip(".") for a in addresses(values)}
    return domains.pop() if len(domains) == 1 and "" not in domains else None


def tags(record: str) -> dict[str, str]:
    found = {}
    for part in record.split(";"):
        name, equals, value = part.partition("=")
        if equals:
            found[name.strip().lower()] = value.strip()
    return found


async def _record(resolver: MailResolver, domain: str) -> dict[str, str] | None:
    records = [t for t in await resolver.txt(f"_dmarc.{domain}") if _VERSION.match(t.strip())]
    return tags(records[0]) if len(records) == 1 else None


async def policy_record(resolver: MailResolver, domain: str) -> tuple[dict[str, str] | None, bool]:
    """The record that governs `domain` and whether it is the organisational domain's."""
    found = await _record(resolver, domain)
    organisation = organisational_domain(domain)
    if found is None and organisation != domain:
        return await _record(resolver, organisation), True
    return found, False


def _policy(record: dict[str, str], inherited: bool) -> str:
    requested = (record.get("sp") if inherited else None) or record.get("p", "")
    return requested.lower() if requested.lower() in _POLICIES else "none"


async def evaluate(raw: bytes, spf: SpfResult, dkim: list[DkimResult], resolver: MailResolver) -> DmarcResult:
    domain = from_domain(raw)
    if domain is None:
        return {"result": "none", "policy": None, "domain": "", "aligned_spf": False, "aligned_dkim": False}
    try:
        record, inherited = await policy_record(resolver, domain)
    except LookupFailed:
        return {"result": "temperror", "policy": None, "domain": domain, "aligned_spf": False, "aligned_dkim": False}
    adkim, aspf = ((record or {}).get(t, "r").lower()[:1] for t in ("adkim", "aspf"))
    aligned_spf = spf["result"] == "pass" and aligned(spf["domain"], domain, aspf)
    aligned_dkim = any(d["result"] == "pass" and aligned(d["domain"], domain, adkim) for d in dkim)
    if record is None:
        return {"result": "none", "policy": None, "domain": domain, "aligned_spf": aligned_spf,
                "aligned_dkim": aligned_dkim}
    return {"result": "pass" if aligned_spf or aligned_dkim else "fail", "policy": _policy(record, inherited),
            "domain": domain, "aligned_spf": aligned_spf, "aligned_dkim": aligned_dkim}
