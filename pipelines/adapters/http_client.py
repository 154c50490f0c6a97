"""Outbound HTTP to addresses users give us (webhook targets, later automation webhook
steps), guarded against server-side request forgery.

A target URL is read by one parser, httpx's — the one that sends — both when a client
gives it (`target_problem`, 400 at the API) and at every attempt (`post`), so what was
accepted is what is dialled, and a URL the sender cannot read is refused, never retried.
Besides httpx's own rules we refuse white space, control characters and backslashes,
credentials, ports outside 1-65535, hosts that are not plain DNS names or IP literals
(percent-escapes, IPv6 zone ids), and IPv4 written in any but the dotted-decimal form
(`0177.0.0.1`, `0x7f.1`, `127.1`, `2130706433`: resolvers read those as addresses while
they look like names to us). Unicode hosts are taken as httpx takes them (IDNA 2008, so
`ⓛⓞⓒⓐⓛⓗⓞⓢⓣ` and full-width `ｌｏｃａｌｈｏｓｔ` are not valid host names and are refused).

The host is resolved here, every resolved address is checked, and the connection goes to
the checked address itself — the URL's host is swapped for the IP while the original name
travels in the Host header and as TLS SNI (and certificate check) — so a DNS answer that
changes between the check and the connect (rebinding) cannot redirect us. Redirects are
not followed (a 3xx is an answer, not an instruction), proxies from the environment are
ignored, and the whole exchange has one deadline. A `Session` keeps connections alive
across requests (per origin as the URL names it: see its docstring).

Refused unless the operator allows private targets: every address that is not public
(`is_public`: globally reachable unicast — "is it global", not a list of bad ranges),
including those embedded in IPv4-mapped, 6to4 and NAT64 IPv6 forms. Cloud metadata
endpoints are refused always. A refusal never names the address a host resolved to
(that would let a tenant map our internal DNS): it says "not a public address"."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import ipaddress
import socket
import ssl
import time

import httpx

from pipelines.core.targets import InvalidTarget, TargetRefused, address_problem, literal_problem, parse_target

TIMEOUT_SECONDS = 10.0
# An idle kept-alive connection of a Session is closed after this long.
KEEPALIVE_SECONDS = 30.0
RESPONSE_EXCERPT_BYTES = 1024

_default_tls: ssl.SSLContext | None = None


@dataclasses.dataclass(frozen=True)
class HttpResult:
    status_code: int  # 0 when no HTTP answer came back
    duration_ms: int
    error: str | None = None
    response_excerpt: str = ""
    # True when trying again cannot help (an unreadable URL, a refused target)
    permanent: bool = False

    @property
    def ok(self) -> bool:
        return 200 <= self.status_code < 300


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
        addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
    if not addresses:
        raise ConnectionError(f"DNS lookup for {host} returned no address")
    for ip in addresses:
        problem = address_problem(ip, allow_private)
        if problem:
            raise TargetRefused(problem)  # never the address: no DNS oracle for tenants
    return list(dict.fromkeys(str(ip) for ip in addresses))


def _tls_context() -> ssl.SSLContext:
    global _default_tls
    if _default_tls is None:  # building one loads the CA bundle: do it once per process
        _default_tls = httpx.create_ssl_context()
    return _default_tls


def _new_client(tls: ssl.SSLContext | None, max_connections: int | None = None) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections,
                          keepalive_expiry=KEEPALIVE_SECONDS)
    return httpx.AsyncClient(timeout=TIMEOUT_SECONDS, follow_redirects=False, trust_env=False,
                             verify=tls or _tls_context(), limits=limits)


class Session:
    """Kept-alive connections for many requests made on one event loop (a worker's webhook
    deliveries), instead of a connection and TLS handshake per request.

    One httpx client per origin *as the URL names it* (scheme, host name, port, TLS
    context): its connections go to the checked IP addresses, and a connection made for
    one host name (its TLS session, SNI and certificate check) is never used for another
    name that resolves to the same address. The guard is unchanged: every request still
    resolves and checks its host, and is sent to a checked address. At most `MAX_ORIGINS`
    clients are kept; the least recently used is closed."""

    MAX_ORIGINS = 256

    def __init__(self, max_connections_per_origin: int | None = None):
        self._per_origin = max_connections_per_origin
        self._clients: collections.OrderedDict[tuple, httpx.AsyncClient] = collections.OrderedDict()
        self._closing: set[asyncio.Task] = set()

    def client_for(self, scheme: str, host: str, port: int, tls: ssl.SSLContext | None) -> httpx.AsyncClient:
        key = (scheme, host, port, id(tls) if tls is not None else None)
        client = self._clients.get(key)
        if client is None:
            client = self._clients[key] = _new_client(tls, self._per_origin)
            while len(self._clients) > self.MAX_ORIGINS:
                _, old = self._clients.popitem(last=False)
                task = asyncio.get_running_loop().create_task(old.aclose())
                self._closing.add(task)
                task.add_done_callback(self._closing.discard)
        self._clients.move_to_end(key)
        return client

    async def aclose(self) -> None:
        clients, self._clients = list(self._clients.values()), collections.OrderedDict()
        for client in clients:
            await client.aclose()


async def _send_checked(client: httpx.AsyncClient, method: str, target: httpx.URL, addresses: list[str],
                        body: bytes | None, headers: dict[str, str], host: str) -> tuple[int, str]:
    name = f"[{host}]" if ":" in host else host
    host_header = name if target.port is None else f"{name}:{target.port}"
    extensions = {"sni_hostname": host} if target.scheme == "https" else {}
    for index, ip in enumerate(addresses):  # the checked addresses, and nothing else
        outgoing = client.build_request(method, target.copy_with(host=ip), content=body,
                                        headers={**headers, "Host": host_header},
                                        extensions=extensions)
        try:
            response = await client.send(outgoing, stream=True)
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


async def _exchange(method: str, target: httpx.URL, body: bytes | None, headers: dict[str, str], allow_private: bool,
                    tls: ssl.SSLContext | None, session: Session | None) -> tuple[int, str]:
    port = target.port or (443 if target.scheme == "https" else 80)
    host = target.raw_host.decode("ascii")  # IDNA-encoded: what DNS, Host and SNI carry
    addresses = await resolve_checked(host, port, allow_private)
    if session is not None:
        client = session.client_for(target.scheme, host, port, tls)
        return await _send_checked(client, method, target, addresses, body, headers, host)
    async with _new_client(tls) as client:
        return await _send_checked(client, method, target, addresses, body, headers, host)


async def post(url: str, body: bytes, headers: dict[str, str], *, allow_private: bool,
               timeout_seconds: float = TIMEOUT_SECONDS, tls: ssl.SSLContext | None = None,
               session: Session | None = None) -> HttpResult:
    """POST `body` to `url` under the guard. Never raises: the result says what happened
    (status 0 and an error when no HTTP answer came back; `permanent` when trying again
    cannot help: a URL the sender cannot read, or a target the guard refuses)."""
    return await request("POST", url, body, headers, allow_private=allow_private,
                         timeout_seconds=timeout_seconds, tls=tls, session=session)


async def request(method: str, url: str, body: bytes | None, headers: dict[str, str], *, allow_private: bool,
                  timeout_seconds: float = TIMEOUT_SECONDS, tls: ssl.SSLContext | None = None,
                  session: Session | None = None) -> HttpResult:
    """`post` with any method (GET sends no body): automation webhook steps. `session`:
    kept-alive connections to reuse (a new connection for this request alone without)."""
    started = time.monotonic()

    def elapsed() -> int:
        return int((time.monotonic() - started) * 1000)

    try:
        target = parse_target(url)
        problem = literal_problem(target, allow_private)
        if problem:
            raise TargetRefused(problem)
        status, excerpt = await asyncio.wait_for(_exchange(method, target, body, headers, allow_private, tls, session),
                                                 timeout=timeout_seconds)
    except InvalidTarget as error:
        return HttpResult(0, elapsed(), f"refused: the URL {error}", permanent=True)
    except TargetRefused as error:
        return HttpResult(0, elapsed(), f"refused: {error}", permanent=True)
    except (TimeoutError, httpx.TimeoutException):
        return HttpResult(0, elapsed(), f"timed out after {timeout_seconds:g} s")
    except (httpx.HTTPError, ConnectionError, OSError, ssl.SSLError) as error:
        return HttpResult(0, elapsed(), f"{type(error).__name__}: {error}".strip())
    except Exception as error:  # noqa: BLE001 - an attempt always ends with a result to record
        return HttpResult(0, elapsed(), f"failed: {type(error).__name__}")
    return HttpResult(status, elapsed(), None if 200 <= status < 300 else f"HTTP {status}", excerpt)
