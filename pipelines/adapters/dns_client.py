"""DNS lookups over dnspython's asyncio resolver: the `Resolver` the domain checks
(pipelines/domains/dns_records.py) are handed."""

from __future__ import annotations

from pipelines.domains.dns_records import LOOKUP_TIMEOUT_SECONDS, LookupFailed


class DnsPythonResolver:
    """`Resolver` over dnspython's asyncio resolver; `nameserver` is `host[:port]` or None
    for the system's resolver."""

    def __init__(self, nameserver: str | None, timeout_seconds: float = LOOKUP_TIMEOUT_SECONDS):
        import dns.asyncresolver  # local import: dnspython takes ~0.25 s to import; only DNS checks need it
        if nameserver:
            host, _, port = nameserver.rpartition(":") if nameserver.count(":") == 1 else (nameserver, "", "")
            self.resolver = dns.asyncresolver.Resolver(configure=False)
            self.resolver.nameservers = [host]
            self.resolver.port = int(port) if port else 53
        else:
            self.resolver = dns.asyncresolver.Resolver()
        self.resolver.lifetime = timeout_seconds

    async def _answer(self, name: str, rdtype: str):
        import dns.exception  # local import: with dns.asyncresolver above
        import dns.resolver  # local import: with dns.asyncresolver above
        try:
            return await self.resolver.resolve(name, rdtype, raise_on_no_answer=False)
        except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer):
            return None
        except (dns.exception.Timeout, dns.resolver.NoNameservers) as error:
            raise LookupFailed(str(error)) from error

    async def txt(self, name: str) -> list[str]:
        answer = await self._answer(name, "TXT")
        if answer is None or answer.rrset is None:
            return []
        return [b"".join(r.strings).decode("utf-8", "replace") for r in answer.rrset
                if r.rdtype == 16]

    async def cname(self, name: str) -> str | None:
        answer = await self._answer(name, "CNAME")
        if answer is None or answer.rrset is None:
            return None
        for r in answer.rrset:
            return r.target.to_text().rstrip(".")
        return None
