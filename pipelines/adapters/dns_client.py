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

    async def addresses(self, name: str, rdtype: str) -> list[str]:
        """The A (rdtype "A") or AAAA ("AAAA") addresses of `name`, as text; [] when none."""
        answer = await self._answer(name, rdtype)
        if answer is None or answer.rrset is None:
            return []
        return [r.address for r in answer.rrset if r.rdtype in (1, 28)]

    async def mx(self, name: str) -> list[str]:
        """The mail exchangers of `name`, most preferred first, without the trailing dot; [] when none."""
        answer = await self._answer(name, "MX")
        if answer is None or answer.rrset is None:
            return []
        found = sorted((r.preference, r.exchange.to_text().rstrip(".")) for r in answer.rrset if r.rdtype == 15)
        return [host for _preference, host in found]
