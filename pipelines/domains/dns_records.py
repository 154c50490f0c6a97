"""What a workspace publishes in DNS for a sending domain, and how we check it.

Records (each entry: {type, name, value, purpose, verified, status, txt_value?}):

- verification: `TXT _postroom.<domain>` = `postroom-verification=<token>` proves the
  workspace controls the domain;
- dkim: `CNAME <selector>._domainkey.<domain>` → `<selector>.<key id>.dkim.<shared domain>`,
  where the service publishes the public key (the operator loads `postroom dkim`'s export
  into the shared domain's zone), so keys can rotate without the customer touching DNS.
  The CNAME verifies only once the key really resolves through it: a receiver checks the
  signature there, and a CNAME into nothing would leave mail failing DKIM. `txt_value`
  carries the key itself for those who cannot (or would rather not) delegate: a `TXT`
  record with that value at the same name verifies too.
- return_path (optional): `CNAME pr-bounces.<domain>` → `<bounce domain>`. Once it checks
  out, mail from the domain leaves with `MAIL FROM:<bounce+<message id>@pr-bounces.<domain>>`,
  so SPF (which the receiver checks on the MAIL FROM domain, following the CNAME to the
  bounce domain's SPF record) aligns with the From domain as DKIM does, and bounces still
  reach `postroom inbound` (the CNAME leads to the bounce domain's MX). Without it mail
  uses the shared bounce domain, as before; the domain is verified without it.

Recommended, not required (the domain verifies without it, the check only warns): DMARC,
`TXT _dmarc.<domain>` = `v=DMARC1; p=none` (`dmarc_record`, a field of its own beside
the records above). Gmail and Yahoo require a DMARC record of bulk senders; `p=none`
meets that without changing what happens to unaligned mail, and DKIM (`d=` the domain)
aligns. Any `v=DMARC1` record counts, at `_dmarc.<domain>` or, as receivers look it up
(the DMARCbis tree walk), at a parent domain's `_dmarc` (an organisation's policy covers
its subdomains).

Verification reads DNS through the small `Resolver` protocol (dnspython behind it in
production, a real loopback DNS server in tests) and reports every record's status."""

from __future__ import annotations

import dataclasses
import re
from typing import Protocol

from pipelines.messages.dkim import txt_value

SELECTOR = "pr1"
RETURN_PATH_LABEL = "pr-bounces"
OPTIONAL_PURPOSES = ("return_path",)  # reported, but not needed for the domain to be verified
VERIFICATION_PREFIX = "postroom-verification="
LOOKUP_TIMEOUT_SECONDS = 5.0
_HOSTNAME = re.compile(r"^(?=.{1,253}$)(?!-)([a-z0-9-]{1,63}(?<!-)\.)+[a-z]{2,63}$")


def valid_hostname(name: str) -> bool:
    return bool(_HOSTNAME.match(name))


def is_public_host_name(name: str) -> bool:
    """A name a receiver can take for a host on the Internet: a DNS name with a dot, not an
    address (literal or bare), not localhost or a `.localdomain` name. Receivers score a
    greeting as `localhost` or `[127.0.0.1]` as spam (SpamAssassin's HELO_LOCALHOST,
    HELO_NO_DOMAIN; Spamhaus and Gmail refuse some)."""
    name = name.lower().rstrip(".")
    local = name == "localhost" or name.startswith("localhost.") or name.endswith((".localdomain", ".localhost"))
    return valid_hostname(name) and not local  # valid_hostname already refuses addresses: the TLD is letters


def dkim_target(key_id: str, shared_domain: str) -> str:
    return f"{SELECTOR}.{key_id.replace('-', '')[:16]}.dkim.{shared_domain}"


def return_path_host(domain: str) -> str:
    return f"{RETURN_PATH_LABEL}.{domain}"


def return_path_record(domain: str, bounce_domain: str) -> dict:
    return {"type": "CNAME", "name": return_path_host(domain), "value": bounce_domain,
            "purpose": "return_path", "verified": False, "status": "pending"}


def records_to_publish(domain: str, *, token: str, key_id: str, public_b64: str,
                       shared_domain: str, bounce_domain: str) -> list[dict]:
    return [
        {"type": "TXT", "name": f"_postroom.{domain}", "value": VERIFICATION_PREFIX + token,
         "purpose": "verification", "verified": False, "status": "pending"},
        {"type": "CNAME", "name": f"{SELECTOR}._domainkey.{domain}",
         "value": dkim_target(key_id, shared_domain), "purpose": "dkim",
         "txt_value": txt_value(public_b64), "verified": False, "status": "pending"},
        return_path_record(domain, bounce_domain),
    ]


INBOUND_VERIFICATION_LABEL = "_postroom-inbound"


def inbound_records(domain: str, *, token: str, mx_host: str) -> list[dict]:
    """What a workspace publishes to receive mail at its own domain (docs/inbound.md): an MX
    to the operator's inbound host, and a TXT proving the domain is this workspace's (an MX
    alone proves nothing: any workspace could name a domain whose MX points at us)."""
    return [
        {"type": "TXT", "name": f"{INBOUND_VERIFICATION_LABEL}.{domain}", "value": VERIFICATION_PREFIX + token,
         "purpose": "verification", "verified": False, "status": "pending"},
        {"type": "MX", "name": domain, "value": mx_host, "priority": MX_PRIORITY, "purpose": "inbound_mx",
         "verified": False, "status": "pending"},
    ]


DMARC_LABEL = "_dmarc"
DMARC_RECOMMENDED = "v=DMARC1; p=none"
_DMARC_VERSION = re.compile(r"^v\s*=\s*DMARC1\s*(;|$)")


def dmarc_record(domain: str) -> dict:
    """The DMARC record we recommend, before any check ({type, name, value, status,
    found, found_at, checked_at})."""
    return {"type": "TXT", "name": f"{DMARC_LABEL}.{domain}", "value": DMARC_RECOMMENDED, "status": "pending",
            "found": None, "found_at": None, "checked_at": None}


def _dmarc_names(domain: str) -> list[str]:
    """Where a receiver looks for the domain's policy: its own `_dmarc`, then each parent's
    up to (not including) the top-level domain."""
    labels = domain.split(".")
    return [f"{DMARC_LABEL}.{'.'.join(labels[i:])}" for i in range(len(labels) - 1)]


async def check_dmarc(domain: str, resolver: Resolver, *, checked_at: str) -> dict:
    """The DMARC record with `status` verified (a `v=DMARC1` record found: `found`,
    `found_at`), missing or lookup_failed."""
    out = {**dmarc_record(domain), "checked_at": checked_at}
    try:
        for name in _dmarc_names(domain):
            policies = [t.strip() for t in await resolver.txt(name) if _DMARC_VERSION.match(t.strip())]
            if policies:
                return {**out, "status": "verified", "found": policies[0], "found_at": name}
    except LookupFailed:
        return {**out, "status": "lookup_failed"}
    return {**out, "status": "missing"}


def dmarc_warnings(dmarc: dict) -> list[dict]:
    """What a verify answer warns about: DMARC is not needed to send, but receivers want it."""
    if dmarc["status"] == "verified":
        return []
    if dmarc["status"] == "lookup_failed":
        message = f"DNS did not answer for {dmarc['name']}: DMARC could not be checked."
    else:
        message = (f"No DMARC record at {dmarc['name']} (nor at a parent domain): Gmail and Yahoo require "
                   f"one for bulk senders. Publish TXT {dmarc['name']} \"{dmarc['value']}\".")
    return [{"purpose": "dmarc", "status": dmarc["status"], "message": message}]


class Resolver(Protocol):
    async def txt(self, name: str) -> list[str]:
        """TXT strings at `name` (each record's strings joined); [] when there are none."""

    async def cname(self, name: str) -> str | None:
        """The CNAME target of `name` without the trailing dot, or None."""

    async def mx(self, name: str) -> list[str]:
        """The mail exchangers of `name`, most preferred first, without the trailing dot."""


class LookupFailed(Exception):
    """DNS could not answer (timeout, SERVFAIL): not the same as "no such record"."""


@dataclasses.dataclass
class Verification:
    records: list[dict]

    @property
    def verified(self) -> bool:
        return all(r["verified"] for r in self.records if r["purpose"] not in OPTIONAL_PURPOSES)

    @property
    def return_path_verified(self) -> bool:
        return any(r["verified"] for r in self.records if r["purpose"] == "return_path")

    @property
    def failed(self) -> list[str]:
        return [r["purpose"] for r in self.records if not r["verified"]]


def _normalise_txt(value: str) -> str:
    return re.sub(r"\s+", "", value)


async def _check(record: dict, resolver: Resolver) -> tuple[bool, str]:
    name = record["name"]
    if record["purpose"] == "verification":
        found = await resolver.txt(name)
        if record["value"] in [t.strip() for t in found]:
            return True, "verified"
        return False, "missing" if not found else "mismatch"
    if record["purpose"] == "inbound_mx":
        hosts = [h.lower().rstrip(".") for h in await resolver.mx(name)]
        if record["value"].lower() in hosts:
            return True, "verified"
        return False, "missing" if not hosts else "mismatch"
    if record["purpose"] == "return_path":
        target = await resolver.cname(name)
        if target is None:
            return False, "missing"
        return (True, "verified") if target.lower().rstrip(".") == record["value"].lower() else (False, "mismatch")
    wanted = _normalise_txt(record["txt_value"])
    target = await resolver.cname(name)
    if target is not None:
        if target.lower().rstrip(".") != record["value"].lower():
            return False, "mismatch"
        if any(_normalise_txt(t) == wanted for t in await resolver.txt(target)):
            return True, "verified"
        return False, "key_not_published"  # the customer's part is right; the service's is not
    found = await resolver.txt(name)
    if any(_normalise_txt(t) == wanted for t in found):
        return True, "verified"
    return False, "missing" if not found else "mismatch"


TXT_STRING_MAX_CHARS = 255  # one character-string of a TXT record (RFC 1035 §3.3)


def zone_line(record: dict) -> str:
    """A record as a zone-file line. A TXT value longer than one character-string (a
    2048-bit key is ~400 characters) is split into several, which resolvers join."""
    value = record["value"]
    if record["type"] == "MX":
        return f"{record['name']}. IN MX {record['priority']} {value}."
    strings = " ".join(f'"{value[i:i + TXT_STRING_MAX_CHARS]}"' for i in range(0, len(value), TXT_STRING_MAX_CHARS))
    return f"{record['name']}. IN TXT {strings}"


MX_PRIORITY = 10


def spf_value(sending_ips: list[str], sending_host: str) -> str:
    """SPF for the bounce domain (the MAIL FROM domain, and the one every return-path
    CNAME leads to): the sending IPs when given, else the addresses of the name the
    workers greet with (`a:` — that name should resolve to the sending IP anyway, for
    the receiver's reverse-DNS check). Nothing else may send for it (`-all`)."""
    if sending_ips:
        mechanisms = [f"ip6:{ip}" if ":" in ip else f"ip4:{ip}" for ip in sending_ips]
    else:
        mechanisms = [f"a:{sending_host}"]
    return "v=spf1 " + " ".join(mechanisms) + " -all"


def bounce_domain_records(bounce_domain: str, *, inbound_host: str, sending_host: str,
                          sending_ips: list[str]) -> list[dict]:
    """What the operator publishes at the bounce domain: an MX to the host running
    `postroom inbound` (bounces and complaints come back there) and the SPF record of the
    sending IPs ({type, name, value, priority?})."""
    return [{"type": "MX", "name": bounce_domain, "value": inbound_host, "priority": MX_PRIORITY},
            {"type": "TXT", "name": bounce_domain, "value": spf_value(sending_ips, sending_host)}]


def key_publication(domain_records: list[dict]) -> dict | None:
    """The TXT record the service publishes for a domain's DKIM key: at the CNAME's target,
    so the customer's delegation resolves to the key ({type, name, value})."""
    for record in domain_records:
        if record["purpose"] == "dkim":
            return {"type": "TXT", "name": record["value"], "value": record["txt_value"]}
    return None


async def verify(records: list[dict], resolver: Resolver, *, checked_at: str) -> Verification:
    """Each record gets verified (bool), status (verified | missing | mismatch |
    key_not_published | lookup_failed) and checked_at."""
    out = []
    for record in records:
        try:
            ok, status = await _check(record, resolver)
        except LookupFailed:
            ok, status = False, "lookup_failed"
        out.append({**record, "verified": ok, "status": status, "checked_at": checked_at})
    return Verification(out)
