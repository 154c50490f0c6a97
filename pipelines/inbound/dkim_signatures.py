"""DKIM (RFC 6376) as a receiver checks it: every DKIM-Signature of the message, each with
its own verdict. dkimpy does the verifying; its keys are fetched first through the caller's
resolver (dkimpy's own async path needs aiodns), then the hashing and RSA/Ed25519 checks run
in a thread, off the event loop (a 30 MB body takes a while to hash)."""

from __future__ import annotations

import asyncio
import email.parser
import email.policy

import dkim
import dkim.util

from pipelines.core.documents import DkimResult
from pipelines.domains.dns_records import LookupFailed
from pipelines.inbound.spf import MailResolver

MAX_SIGNATURES = 5  # verified per message; more is unusual and costs a DNS lookup and a body hash each


def signatures(raw: bytes) -> list[tuple[str, str]]:
    """(d=, s=) of every DKIM-Signature header, in order ("" when a tag is missing or unreadable)."""
    headers = email.parser.BytesHeaderParser(policy=email.policy.compat32).parsebytes(raw)
    found = []
    for name, value in headers.raw_items():
        if str(name).lower() != "dkim-signature":
            continue
        try:
            tags = dkim.util.parse_tag_value(str(value).encode("utf-8", "surrogateescape"))
        except (dkim.util.InvalidTagValueList, ValueError):
            tags = {}
        found.append((tags.get(b"d", b"").decode("ascii", "replace").strip().lower(),
                      tags.get(b"s", b"").decode("ascii", "replace").strip()))
    return found[:MAX_SIGNATURES]


def _verify(raw: bytes, index: int, key: str) -> str:
    """pass; fail (the signature or the body hash does not match); neutral (the signature
    cannot be checked: a tag missing or wrong, expired); permerror (the key is unusable)."""
    def dnsfunc(_name, timeout=5):
        return key.encode("utf-8")
    try:
        return "pass" if dkim.DKIM(raw).verify(idx=index, dnsfunc=dnsfunc) else "fail"
    except dkim.KeyFormatError:
        return "permerror"
    except dkim.ValidationError as error:
        return "fail" if "body hash mismatch" in str(error) else "neutral"
    except dkim.DKIMException:
        return "neutral"


async def _key(resolver: MailResolver, domain: str, selector: str) -> str | None:
    records = await resolver.txt(f"{selector}._domainkey.{domain}")
    return records[0] if records else None


async def verify_all(raw: bytes, resolver: MailResolver) -> list[DkimResult]:
    results: list[DkimResult] = []
    for index, (domain, selector) in enumerate(signatures(raw)):
        if not domain or not selector:
            results.append({"result": "permerror", "domain": domain, "selector": selector})
            continue
        try:
            key = await _key(resolver, domain, selector)
        except LookupFailed:
            results.append({"result": "temperror", "domain": domain, "selector": selector})
            continue
        # no key published: RFC 6376 section 6.1.2 makes it a permanent failure
        result = await asyncio.to_thread(_verify, raw, index, key) if key else "permerror"
        results.append({"result": result, "domain": domain, "selector": selector})
    return results
