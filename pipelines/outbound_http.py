"""Outbound HTTP to addresses users give us (webhook targets, later automation webhook
steps), guarded against server-side request forgery.

The host is resolved here, every resolved address is checked, and the connection goes to
the checked address itself — the URL's host is swapped for the IP while the original name
travels in the Host header and as TLS SNI (and certificate check) — so a DNS answer that
changes between the check and the connect (rebinding) cannot redirect us. Redirects are
not followed (a 3xx is an answer, not an instruction), proxies from the environment are
ignored, and the whole exchange has one deadline.

Refused unless the operator allows private targets: loopback, private (RFC 1918, ULA),
link-local, shared/CGNAT, multicast, unspecified, reserved and documentation ranges —
everything `ipaddress` does not call global — including those addresses embedded in
IPv4-mapped, 6to4 and NAT64 IPv6 forms. Cloud metadata endpoints are refused always."""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
import socket
import ssl
import time
import urllib.parse

import httpx

TIMEOUT_SECONDS = 10.0
MAX_URL_LENGTH = 2048
# How much of a receiver's answer we keep for the attempt log, bytes.
RESPONSE_EXCERPT_BYTES = 1024

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

METADATA_ADDRESSES = {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254"),
                      ipaddress.ip_address("100.100.100.200")}
_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")

_default_tls: ssl.SSLContext | None = None


class TargetRefused(Exception):
    """The target resolves to an address we do not send to."""


@dataclasses.dataclass(frozen=True)
class HttpResult:
    status_code: int  # 0 when no HTTP answer came back
    duration_ms: int
    error: str | None = None
    response_excerpt: str = ""

    @property
    def ok(self) -> bool:
        return 200 <= self.status_code < 300


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


def address_problem(ip: IPAddress, allow_private: bool = False) -> str | None:
    """Why we would not connect to `ip`, or None when we would."""
    inner = _embedded_ipv4(ip)
    if inner is not None:
        problem = address_problem(inner, allow_private)
        return f"{problem} (embedded in {ip})" if problem else None
    if ip in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if allow_private:
        return None
    for label, test in (("a loopback address", ip.is_loopback), ("the unspecified address", ip.is_unspecified),
                        ("a link-local address", ip.is_link_local), ("a multicast address", ip.is_multicast),
                        ("a shared (CGNAT) address", ip.version == 4 and ip in _CGNAT),
                        ("a reserved address", ip.is_reserved), ("a private address", ip.is_private)):
        if test:
            return label
    if not ip.is_global:
        return "a non-global (reserved) address"
    return None


def url_problem(url: str) -> str | None:
    """Why `url` is not an acceptable target URL (shape only, no DNS), or None."""
    if len(url) > MAX_URL_LENGTH:
        return f"must be at most {MAX_URL_LENGTH} characters"
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        return "is not a valid URL"
    if parts.scheme not in ("http", "https"):
        return "must be an http or https URL"
    if not parts.hostname:
        return "must name a host"
    if parts.username is not None or parts.password is not None:
        return "must not carry credentials"
    if any(c.isspace() for c in url):
        return "must not contain white space"
    return None


def literal_target_problem(url: str, allow_private: bool) -> str | None:
    """A refusal we can tell without DNS: an IP literal or `localhost` host."""
    host = (urllib.parse.urlsplit(url).hostname or "").rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return None if allow_private else "points at a loopback host"
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return None
    problem = address_problem(ip, allow_private)
    return f"points at {problem}" if problem else None


async def resolve_checked(host: str, port: int, allow_private: bool) -> list[str]:
    """Resolve `host`; every address must pass. Returns them in the resolver's order."""
    try:
        literal = ipaddress.ip_address(host)
        addresses = [literal]
    except ValueError:
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as error:
            raise ConnectionError(f"DNS lookup for {host} failed: {error}") from error
        addresses = [ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos]
    if not addresses:
        raise ConnectionError(f"DNS lookup for {host} returned no address")
    for ip in addresses:
        problem = address_problem(ip, allow_private)
        if problem:
            raise TargetRefused(f"{host} resolves to {problem} ({ip}); refused")
    return list(dict.fromkeys(str(ip) for ip in addresses))


def _tls_context() -> ssl.SSLContext:
    global _default_tls
    if _default_tls is None:  # building one loads the CA bundle: do it once per process
        _default_tls = httpx.create_ssl_context()
    return _default_tls


async def _exchange(method: str, url: str, body: bytes | None, headers: dict[str, str], allow_private: bool,
                    tls: ssl.SSLContext | None) -> tuple[int, str]:
    target = httpx.URL(url)
    port = target.port or (443 if target.scheme == "https" else 80)
    addresses = await resolve_checked(target.host, port, allow_private)
    name = f"[{target.host}]" if ":" in target.host else target.host
    host_header = name if target.port is None else f"{name}:{target.port}"
    extensions = {"sni_hostname": target.host} if target.scheme == "https" else {}
    async with httpx.AsyncClient(timeout=TIMEOUT_SECONDS, follow_redirects=False, trust_env=False,
                                 verify=tls or _tls_context()) as client:
        for index, ip in enumerate(addresses):  # the checked addresses, and nothing else
            request = client.build_request(method, target.copy_with(host=ip), content=body,
                                           headers={**headers, "Host": host_header},
                                           extensions=extensions)
            try:
                response = await client.send(request, stream=True)
            except httpx.ConnectError:
                if index == len(addresses) - 1:
                    raise
                continue
            try:
                excerpt = b""
                async for chunk in response.aiter_raw():
                    excerpt += chunk
                    if len(excerpt) >= RESPONSE_EXCERPT_BYTES:
                        break
            finally:
                await response.aclose()
            return response.status_code, excerpt[:RESPONSE_EXCERPT_BYTES].decode("utf-8", "replace")
    raise AssertionError("unreachable: resolve_checked returns at least one address")


async def post(url: str, body: bytes, headers: dict[str, str], *, allow_private: bool,
               timeout_seconds: float = TIMEOUT_SECONDS, tls: ssl.SSLContext | None = None) -> HttpResult:
    """POST `body` to `url` under the guard. Never raises for network trouble: the result
    says what happened (status 0 and an error when no HTTP answer came back)."""
    return await request("POST", url, body, headers, allow_private=allow_private,
                         timeout_seconds=timeout_seconds, tls=tls)


async def request(method: str, url: str, body: bytes | None, headers: dict[str, str], *, allow_private: bool,
                  timeout_seconds: float = TIMEOUT_SECONDS, tls: ssl.SSLContext | None = None) -> HttpResult:
    """`post` with any method (GET sends no body): automation webhook steps."""
    started = time.monotonic()

    def elapsed() -> int:
        return int((time.monotonic() - started) * 1000)

    try:
        status, excerpt = await asyncio.wait_for(_exchange(method, url, body, headers, allow_private, tls),
                                                 timeout=timeout_seconds)
    except TargetRefused as error:
        return HttpResult(0, elapsed(), f"refused: {error}")
    except (asyncio.TimeoutError, httpx.TimeoutException):
        return HttpResult(0, elapsed(), f"timed out after {timeout_seconds:g} s")
    except (httpx.HTTPError, ConnectionError, OSError, ssl.SSLError) as error:
        return HttpResult(0, elapsed(), f"{type(error).__name__}: {error}".strip())
    return HttpResult(status, elapsed(), None if 200 <= status < 300 else f"HTTP {status}", excerpt)
