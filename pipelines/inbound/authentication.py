"""Who sent a received message: SPF on the envelope, DKIM on every signature, DMARC on the
From header's domain, as one AuthenticationResults (pipelines/core/documents.py) whose
`summary` is the resinfo of an Authentication-Results header (RFC 8601).

DNS comes through the `resolver` handed in (MailResolver in spf.py; production's is
pipelines/adapters/dns_client.py, tests' a real DNS server on loopback). Nothing here
raises for a message or a DNS answer: an unreachable DNS is `temperror`, a broken
record `permerror`.

    spf    pass | fail | softfail | neutral | none | temperror | permerror
    dkim   one entry a signature: pass | fail | neutral (unreadable) | temperror | permerror (no key)
    dmarc  pass (SPF or DKIM passed for an aligned domain) | fail | none (no record) | temperror | permerror"""

from __future__ import annotations

import ipaddress

from pipelines.core.documents import AuthenticationResults, DkimResult, DmarcResult, SpfResult
from pipelines.inbound import dmarc
from pipelines.inbound.dkim_signatures import verify_all
from pipelines.inbound.spf import Check, MailResolver, SpfError, check_host


async def check_spf(*, client_ip: str, helo: str, mail_from: str, resolver: MailResolver) -> SpfResult:
    """RFC 7208's check_host() for the MAIL FROM's domain (a null sender's: the HELO name's)."""
    helo = helo.strip().lower().rstrip(".")
    sender = mail_from.strip().strip("<>") or f"postmaster@{helo}"
    domain = sender.rpartition("@")[2].lower().rstrip(".")
    try:
        ip = ipaddress.ip_address(client_ip.strip().strip("[]"))
    except ValueError:
        return {"result": "permerror", "domain": domain}
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    check = Check(ip=ip, sender=sender, helo=helo, resolver=resolver)
    try:
        result = await check_host(check, domain)
    except SpfError as error:
        result = error.result
    except RecursionError:  # include loops past the term limit cannot recurse this far; kept for safety
        result = "permerror"
    return {"result": result, "domain": domain}


def summary(spf: SpfResult, mail_from: str, dkim: list[DkimResult], verdict: DmarcResult) -> str:
    sender = mail_from.strip().strip("<>")
    parts = [f"spf={spf['result']} " + (f"smtp.mailfrom={sender}" if sender else f"smtp.helo={spf['domain']}")]
    parts += [f"dkim={d['result']} header.d={d['domain']} header.s={d['selector']}" for d in dkim] or ["dkim=none"]
    policy = f" (p={verdict['policy']})" if verdict["policy"] else ""
    parts.append(f"dmarc={verdict['result']}{policy} header.from={verdict['domain']}" if verdict["domain"]
                 else f"dmarc={verdict['result']}")
    return "; ".join(parts)


async def authenticate(raw: bytes, *, client_ip: str, helo: str, mail_from: str,
                       resolver: MailResolver) -> AuthenticationResults:
    spf = await check_spf(client_ip=client_ip, helo=helo, mail_from=mail_from, resolver=resolver)
    dkim = await verify_all(raw, resolver)
    verdict = await dmarc.evaluate(raw, spf, dkim, resolver)
    return {"spf": spf, "dkim": dkim, "dmarc": verdict, "summary": summary(spf, mail_from, dkim, verdict)}
