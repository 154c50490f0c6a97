"""SPF (RFC 7208): may `client_ip` send mail for a domain? An evaluator of check_host()
over the resolver a caller hands in (pyspf, the reference implementation, is synchronous,
reads DNS through its own module-level functions and had its last release in 2020).

Covered: ip4, ip6, a, mx, include, exists, all, redirect=, the macros of section 7
(exp= is ignored: it only words a rejection), dual CIDR lengths, the limit of 10 DNS-querying
terms (section 4.6.4), 10 MX names a lookup, and 2 void lookups. `ptr` is counted but never
matches (section 5.5: "do not use"; receivers may ignore it)."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from pipelines.domains.dns_records import LookupFailed

MAX_DNS_TERMS = 10       # section 4.6.4: include, a, mx, ptr, exists and redirect together
MAX_VOID_LOOKUPS = 2     # section 4.6.4: lookups answering nothing
MAX_MX_NAMES = 10        # section 4.6.4: an mx term's exchangers
_QUALIFIERS = {"+": "pass", "-": "fail", "~": "softfail", "?": "neutral"}
_VERSION = re.compile(r"^v=spf1(\s|$)", re.IGNORECASE)
_MACRO = re.compile(r"%\{([slodiphcrtv])(\d*)(r?)([.\-+,/_=]*)\}|%%|%_|%-", re.IGNORECASE)
_CIDR = re.compile(r"^(.*?)(?:/(\d+))?(?://(\d+))?$")


class MailResolver(Protocol):
    """The lookups SPF, DKIM and DMARC make (pipelines/adapters/dns_client.py implements it).
    Each raises LookupFailed when DNS cannot answer; no record is an empty answer."""

    async def txt(self, name: str) -> list[str]: ...

    async def addresses(self, name: str, rdtype: str) -> list[str]: ...

    async def mx(self, name: str) -> list[str]: ...


class SpfError(Exception):
    """Evaluation stops with `result` (permerror or temperror)."""

    def __init__(self, result: str, why: str):
        super().__init__(why)
        self.result = result


@dataclass
class Check:
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address
    sender: str          # the MAIL FROM address (postmaster@<helo> for a null sender)
    helo: str
    resolver: MailResolver
    dns_terms: int = 0
    void_lookups: int = 0
    seen: set[str] = field(default_factory=set)

    def count_term(self) -> None:
        self.dns_terms += 1
        if self.dns_terms > MAX_DNS_TERMS:
            raise SpfError("permerror", f"more than {MAX_DNS_TERMS} DNS lookups")

    async def lookup(self, kind: str, name: str) -> list[str]:
        try:
            if kind == "TXT":
                found = await self.resolver.txt(name)
            elif kind == "MX":
                found = await self.resolver.mx(name)
            else:
                found = await self.resolver.addresses(name, kind)
        except LookupFailed as error:
            raise SpfError("temperror", f"DNS: {error}") from error
        if not found:
            self.void_lookups += 1
            if self.void_lookups > MAX_VOID_LOOKUPS:
                raise SpfError("permerror", f"more than {MAX_VOID_LOOKUPS} void lookups")
        return found


def expand(spec: str, check: Check, domain: str) -> str:
    """A domain-spec with its macros (section 7) replaced; past 253 characters, labels are
    dropped from the left until it fits (section 7.3)."""
    expanded = _expand(spec, check, domain)
    while len(expanded) > 253 and "." in expanded:
        expanded = expanded.split(".", 1)[1]
    return expanded


def _expand(spec: str, check: Check, domain: str) -> str:
    def one(match: re.Match) -> str:
        token = match.group(0)
        if token in ("%%", "%_", "%-"):
            return {"%%": "%", "%_": " ", "%-": "%20"}[token]
        letter, digits, reverse, delimiters = match.groups()
        parts = re.split("[" + re.escape(delimiters or ".") + "]", _macro_value(letter.lower(), check, domain))
        if reverse:
            parts.reverse()
        if digits:
            parts = parts[-int(digits):] if int(digits) else parts
        return ".".join(parts)
    return _MACRO.sub(one, spec)


def _macro_value(letter: str, check: Check, domain: str) -> str:
    local, _, sender_domain = check.sender.rpartition("@")
    if letter == "i" and check.ip.version == 6:
        return ".".join(check.ip.exploded.replace(":", ""))
    values = {"s": check.sender, "l": local or "postmaster", "o": sender_domain, "d": domain, "i": str(check.ip),
              "p": "unknown", "h": check.helo, "c": str(check.ip), "r": "unknown", "t": "0",
              "v": "ip6" if check.ip.version == 6 else "in-addr"}
    return values[letter]


def _split_cidr(value: str) -> tuple[str, int | None, int | None]:
    match = _CIDR.match(value)
    assert match is not None  # the pattern matches any text
    name, four, six = match.groups()
    v4, v6 = (int(four) if four else None), (int(six) if six else None)
    if (v4 is not None and v4 > 32) or (v6 is not None and v6 > 128):
        raise SpfError("permerror", f"bad CIDR length in {value!r}")
    return name, v4, v6


def in_network(ip: ipaddress.IPv4Address | ipaddress.IPv6Address, address: str, v4: int | None,
               v6: int | None) -> bool:
    try:
        prefix = (v6 if v6 is not None else 128) if ip.version == 6 else (v4 if v4 is not None else 32)
        return ip in ipaddress.ip_network(f"{address}/{prefix}", strict=False)
    except ValueError:
        return False


async def _records(check: Check, domain: str) -> list[str]:
    try:
        found = await check.resolver.txt(domain)
    except LookupFailed as error:
        raise SpfError("temperror", f"DNS: {error}") from error
    return [t.strip() for t in found if _VERSION.match(t.strip())]


async def check_host(check: Check, domain: str) -> str:
    """The result for `domain`: pass fail softfail neutral none; SpfError for the errors."""
    domain = domain.lower().rstrip(".")
    if not domain or "." not in domain or len(domain) > 253 or any(len(label) > 63 for label in domain.split(".")):
        return "none"
    records = await _records(check, domain)
    if not records:
        return "none"
    if len(records) > 1:
        raise SpfError("permerror", f"{len(records)} SPF records at {domain}")
    return await evaluate(check, domain, records[0].split()[1:])


async def evaluate(check: Check, domain: str, terms: list[str]) -> str:
    redirect = None
    for term in terms:
        name, equals, value = term.partition("=")
        if equals and re.fullmatch(r"[A-Za-z][\w.-]*", name):
            if name.lower() == "redirect":
                redirect = value
            continue
        qualifier = _QUALIFIERS.get(term[0], None)
        mechanism = term[1:] if qualifier else term
        if await matches(check, domain, mechanism):
            return qualifier or "pass"
    if redirect is None:
        return "neutral"
    check.count_term()
    result = await check_host(check, expand(redirect, check, domain))
    if result == "none":
        raise SpfError("permerror", f"redirect to {redirect} has no SPF record")
    return result


# The mechanisms (section 5): does the client's address match?

async def _all(check: Check, domain: str, argument: str) -> bool:
    return True


async def _ip(check: Check, domain: str, argument: str, version: int) -> bool:
    address, _, prefix = argument.partition("/")
    try:
        network = ipaddress.ip_network(f"{address}/{prefix or (32 if version == 4 else 128)}", strict=False)
    except ValueError as error:
        raise SpfError("permerror", f"bad ip{version} term: {argument!r}") from error
    if network.version != version:
        raise SpfError("permerror", f"bad ip{version} term: {argument!r}")
    return check.ip.version == version and check.ip in network


async def _ip4(check: Check, domain: str, argument: str) -> bool:
    return await _ip(check, domain, argument, 4)


async def _ip6(check: Check, domain: str, argument: str) -> bool:
    return await _ip(check, domain, argument, 6)


def _target(check: Check, domain: str, argument: str) -> tuple[str, int | None, int | None]:
    name, v4, v6 = _split_cidr(argument)
    return (expand(name, check, domain) if name else domain), v4, v6


async def _host_matches(check: Check, host: str, v4: int | None, v6: int | None) -> bool:
    found = await check.lookup("AAAA" if check.ip.version == 6 else "A", host)
    return any(in_network(check.ip, address, v4, v6) for address in found)


async def _a(check: Check, domain: str, argument: str) -> bool:
    check.count_term()
    host, v4, v6 = _target(check, domain, argument)
    return await _host_matches(check, host, v4, v6)


async def _mx(check: Check, domain: str, argument: str) -> bool:
    check.count_term()
    host, v4, v6 = _target(check, domain, argument)
    exchangers = await check.lookup("MX", host)
    if len(exchangers) > 10:
        raise SpfError("permerror", f"more than 10 MX names at {host}")
    for exchanger in exchangers:
        if await _host_matches(check, exchanger, v4, v6):
            return True
    return False


async def _include(check: Check, domain: str, argument: str) -> bool:
    check.count_term()
    if not argument:
        raise SpfError("permerror", "include without a domain")
    result = await check_host(check, expand(argument, check, domain))
    if result == "none":
        raise SpfError("permerror", f"include:{argument} has no SPF record")
    return result == "pass"


async def _exists(check: Check, domain: str, argument: str) -> bool:
    check.count_term()
    if not argument:
        raise SpfError("permerror", "exists without a domain")
    return bool(await check.lookup("A", expand(argument, check, domain)))


async def _ptr(check: Check, domain: str, argument: str) -> bool:
    check.count_term()
    return False


MECHANISMS: dict[str, Callable[[Check, str, str], Awaitable[bool]]] = {
    "all": _all, "ip4": _ip4, "ip6": _ip6, "a": _a, "mx": _mx, "include": _include, "exists": _exists, "ptr": _ptr}


async def matches(check: Check, domain: str, mechanism: str) -> bool:
    name, _, argument = mechanism.partition(":")
    if "/" in name and name.split("/", 1)[0].lower() in ("a", "mx"):  # a/24, mx//64
        name, slash, cidr = name.partition("/")
        argument = slash + cidr
    handler = MECHANISMS.get(name.lower())
    if handler is None:
        raise SpfError("permerror", f"unknown mechanism {mechanism!r}")
    return await handler(check, domain, argument)
