"""Which URLs we send to: the one parser (httpx's, the one that sends) reading a target
URL both when a client gives it (`target_problem`, 400 at the API) and at every attempt
(pipelines/adapters/http_client.py), and which addresses are public. Pure: no DNS here;
the adapter resolves and checks each address with `address_problem`."""

from __future__ import annotations

import ipaddress
import re
import unicodedata

import httpx

MAX_URL_LENGTH = 2048
# How much of a receiver's answer we keep for the attempt log, bytes.
NOT_PUBLIC = "not a public address"
METADATA = "a cloud metadata address"

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

METADATA_ADDRESSES = {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254"),
                      ipaddress.ip_address("100.100.100.200")}
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
# Every global IPv6 unicast address is allocated from 2000::/3 (RFC 4291 2.4, IANA).
_IPV6_GLOBAL_UNICAST = ipaddress.ip_network("2000::/3")
# Not globally reachable per IANA's special-purpose registries, though the `ipaddress`
# module of older Pythons (3.11 here) still calls them global.
_NOT_GLOBAL_THOUGH_IPADDRESS_SAYS_SO = [
    ipaddress.ip_network("192.88.99.0/24"),  # 6to4 relay anycast, deprecated (RFC 7526)
    ipaddress.ip_network("fec0::/10"),       # site-local, deprecated (RFC 3879)
    ipaddress.ip_network("3fff::/20"),       # documentation (RFC 9637)
]
# A host name as DNS spells it (after IDNA): labels of letters, digits, '-' and '_'.
_DNS_NAME = re.compile(r"(?=.{1,253}\.?$)[a-z0-9_-]{1,63}(\.[a-z0-9_-]{1,63})*\.?", re.ASCII)
# A last label a resolver would read as (part of) an IPv4 address: decimal, octal or hex.
_NUMERIC_LABEL = re.compile(r"[0-9]+|0x[0-9a-f]*", re.ASCII)

class TargetRefused(Exception):
    """The target resolves to an address we do not send to."""


class InvalidTarget(ValueError):
    """The URL is not one we send to (its message completes "the URL …")."""


def _embedded_ipv4(ip: IPAddress) -> ipaddress.IPv4Address | None:
    if ip.version != 6:
        return None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def is_public(ip: IPAddress) -> bool:
    """Globally reachable unicast: what `ipaddress` calls global, minus multicast, IPv6
    outside global unicast space, and the ranges it does not know are not global."""
    if not ip.is_global or ip.is_multicast:
        return False
    if ip.version == 6 and ip not in _IPV6_GLOBAL_UNICAST:
        return False
    return not any(ip in network for network in _NOT_GLOBAL_THOUGH_IPADDRESS_SAYS_SO)


def address_problem(ip: IPAddress, allow_private: bool = False) -> str | None:
    """Why we would not connect to `ip`, or None when we would. Names no address."""
    inner = _embedded_ipv4(ip)
    if inner is not None:
        return address_problem(inner, allow_private)
    if ip in METADATA_ADDRESSES:
        return METADATA
    if allow_private or is_public(ip):
        return None
    return NOT_PUBLIC


def _check_host(raw_host: str) -> None:
    if "%" in raw_host:  # a percent-escape, or an IPv6 zone id: neither names a host
        raise InvalidTarget("must name a valid host")
    if ":" in raw_host:  # an IPv6 literal (httpx took the brackets off)
        try:
            ipaddress.IPv6Address(raw_host)
        except ValueError:
            raise InvalidTarget("must name a valid host") from None
        return
    if not _DNS_NAME.fullmatch(raw_host):
        raise InvalidTarget("must name a valid host")
    if _NUMERIC_LABEL.fullmatch(raw_host.rstrip(".").rsplit(".", 1)[-1]):
        try:
            ipaddress.IPv4Address(raw_host)
        except ValueError:
            raise InvalidTarget("must write an IPv4 address as four decimal numbers (192.0.2.1)") from None


def parse_target(url: str) -> httpx.URL:
    """`url` as the sender reads it, or InvalidTarget saying why it is not a target."""
    if len(url) > MAX_URL_LENGTH:
        raise InvalidTarget(f"must be at most {MAX_URL_LENGTH} characters")
    if any(c.isspace() or unicodedata.category(c) == "Cc" for c in url):
        raise InvalidTarget("must not contain white space or control characters")
    if "\\" in url:
        raise InvalidTarget("must not contain backslashes")
    try:
        target = httpx.URL(url)
    except (httpx.InvalidURL, ValueError, UnicodeError):
        raise InvalidTarget("is not a valid URL") from None
    if target.scheme not in ("http", "https"):
        raise InvalidTarget("must be an http or https URL")
    if not target.raw_host:
        raise InvalidTarget("must name a host")
    if target.userinfo or "@" in re.split(r"[/?#]", url.split("//", 1)[-1], maxsplit=1)[0]:
        raise InvalidTarget("must not carry credentials")
    if target.port is not None and not 1 <= target.port <= 65535:
        raise InvalidTarget("is not a valid URL (port out of range)")
    _check_host(target.raw_host.decode("ascii").lower())
    return target


def literal_problem(target: httpx.URL, allow_private: bool) -> str | None:
    """A refusal we can tell without DNS: an IP literal or `localhost` host."""
    host = target.raw_host.decode("ascii").lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return None if allow_private else NOT_PUBLIC
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return None
    return address_problem(ip, allow_private)


def target_problem(url: str, allow_private: bool) -> str | None:
    """Why a client may not give `url` as a target (shape and literal host, no DNS), or None.
    The text completes "the URL …"."""
    try:
        target = parse_target(url)
    except InvalidTarget as error:
        return str(error)
    problem = literal_problem(target, allow_private)
    if problem is None:
        return None
    return "points at a cloud metadata address" if problem == METADATA else "points at an address that is not public"
