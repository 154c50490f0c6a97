"""Sending limits as plain code, in the spirit of Dramatiq's rate limiters: a limiter
names a key and a limit, and a small backend (a `Protocol` that `mongo/send_limits.py`
implements over the store) keeps the shared counts, so a limit holds across every worker
process at once.

    LimiterBackend            the store-facing interface (windows, slots, monthly counts)
    WindowLimiter             at most `limit` units per sliding window (per key, per domain)
    ConcurrencyLimiter        at most `limit` leases held at once (per destination domain)
    SendThrottle.admit()      splits a chunk of messages into admitted and held

Limits grant *part* of what is asked (a chunk of 100 messages may get 37), and whatever
is granted but then not used (a message admitted by its key but held by its domain) is
given back. Concurrent takers may under-grant each other, never over-grant: every take
adds first, then reads the total, then returns the excess.

A held message is never dropped and never waited for in a loop: the caller re-enqueues
it with `Admission.retry_after_seconds` (at most one window, 60 s)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Protocol

from pipelines.audience.recipients import envelope
from pipelines.core.documents import Workspace

WINDOW_SECONDS = 60
# A concurrency lease outlives a send attempt only if its worker died; then it lapses.
LEASE_SECONDS = 120
# How soon to look again when a domain's concurrency slots are all taken.
SLOTS_RETRY_SECONDS = 1
MAX_HOLD_SECONDS = 60


@dataclasses.dataclass(frozen=True)
class Grant:
    granted: int
    retry_after_seconds: float = 0.0  # when the first refused unit could be granted


@dataclasses.dataclass(frozen=True)
class Lease:
    key: str
    token: str
    count: int


class LimiterBackend(Protocol):
    async def take_window(self, key: str, want: int, limit: int, window_seconds: int) -> Grant: ...

    async def give_window(self, key: str, count: int, window_seconds: int) -> None: ...

    async def take_slots(self, key: str, want: int, limit: int, lease_seconds: int) -> Lease: ...

    async def give_slots(self, lease: Lease, count: int | None = None) -> None:
        """Give back `count` units of the lease (all of it when None)."""


class WindowLimiter:
    def __init__(self, backend: LimiterBackend, key: str, limit: int, window_seconds: int = WINDOW_SECONDS):
        self.backend, self.key, self.limit, self.window_seconds = backend, key, limit, window_seconds

    async def take(self, want: int) -> Grant:
        if self.limit <= 0 or want <= 0:
            return Grant(max(want, 0))
        return await self.backend.take_window(self.key, want, self.limit, self.window_seconds)

    async def give(self, count: int) -> None:
        if self.limit > 0 and count > 0:
            await self.backend.give_window(self.key, count, self.window_seconds)


class ConcurrencyLimiter:
    def __init__(self, backend: LimiterBackend, key: str, limit: int, lease_seconds: int = LEASE_SECONDS):
        self.backend, self.key, self.limit, self.lease_seconds = backend, key, limit, lease_seconds

    async def take(self, want: int) -> Lease | None:
        if self.limit <= 0 or want <= 0:
            return None
        return await self.backend.take_slots(self.key, want, self.limit, self.lease_seconds)


@dataclasses.dataclass(frozen=True)
class DomainLimit:
    rate_per_minute: int = 0   # 0 = unlimited
    concurrency: int = 0       # 0 = unlimited


@dataclasses.dataclass
class SendLimits:
    """What applies to one chunk: per-key email rates (by key id) and per-domain caps."""
    key_rate_per_minute: dict[str, int] = dataclasses.field(default_factory=dict)
    default_domain: DomainLimit = DomainLimit()
    domains: dict[str, DomainLimit] = dataclasses.field(default_factory=dict)

    def for_domain(self, domain: str) -> DomainLimit:
        return self.domains.get(domain, self.default_domain)


@dataclasses.dataclass
class Admission:
    admitted: list[dict] = dataclasses.field(default_factory=list)
    held: list[dict] = dataclasses.field(default_factory=list)
    retry_after_seconds: float = 0.0
    leases: list[Lease] = dataclasses.field(default_factory=list)


def recipient_domains(message: dict) -> list[str]:
    """The destination domains of a message (one per distinct recipient domain)."""
    return sorted({r.rsplit("@", 1)[-1].lower() for r in envelope(message)})


def rate_key_of(message: dict) -> str | None:
    """Transactional mail counts against its API key's email rate; campaign mail does not."""
    return message.get("key_id") if message.get("kind", "transactional") == "transactional" else None


@dataclasses.dataclass
class _Admitting:
    """One admission under way: the messages refused so far, the waits the limits that
    refused them named, and what each limit granted (given back for messages a later
    limit refused)."""
    refused: set[str] = dataclasses.field(default_factory=set)
    waits: list[float] = dataclasses.field(default_factory=list)
    windows: list[tuple[WindowLimiter, list[dict]]] = dataclasses.field(default_factory=list)
    leases: list[tuple[Lease, list[dict]]] = dataclasses.field(default_factory=list)

    def unrefused(self, messages: list[dict]) -> list[dict]:
        return [m for m in messages if m["_id"] not in self.refused]

    async def take_window(self, limiter: WindowLimiter, group: list[dict]) -> list[dict]:
        """The front of `group` the window grants; the rest refused."""
        grant = await limiter.take(len(group))
        granted = group[:grant.granted]
        self.windows.append((limiter, granted))
        self.refuse(group[grant.granted:], grant.retry_after_seconds)
        return granted

    async def take_slots(self, limiter: ConcurrencyLimiter, group: list[dict]) -> None:
        """Concurrency slots for the front of `group`; the rest refused."""
        lease = await limiter.take(len(group))
        if lease is None:
            return
        self.leases.append((lease, group[:lease.count]))
        self.refuse(group[lease.count:], SLOTS_RETRY_SECONDS)

    def refuse(self, messages: list[dict], wait: float) -> None:
        if messages:
            self.refused.update(m["_id"] for m in messages)
            self.waits.append(wait)

    def retry_after_seconds(self) -> float:
        return min(MAX_HOLD_SECONDS, max(1.0, min(self.waits) if self.waits else 1.0))


class SendThrottle:
    def __init__(self, backend: LimiterBackend):
        self.backend = backend

    async def admit(self, messages: list[dict], limits: SendLimits) -> Admission:
        """Admit as many messages as every limit allows, in order; hold the rest.
        Leases taken for admitted messages must be given back with `release` after sending."""
        admitting = _Admitting()
        await self._take_key_rates(admitting, messages, limits)
        await self._take_domain_limits(admitting, admitting.unrefused(messages), limits)
        result = Admission(admitted=admitting.unrefused(messages),
                           held=[m for m in messages if m["_id"] in admitting.refused])
        result.leases = await self._give_back(admitting)
        if result.held:
            result.retry_after_seconds = admitting.retry_after_seconds()
        return result

    async def _take_key_rates(self, admitting: _Admitting, messages: list[dict], limits: SendLimits) -> None:
        """1. Each API key's email rate, for the transactional messages sent with it."""
        by_key: dict[str, list[dict]] = {}
        for m in messages:
            key = rate_key_of(m)
            if key and limits.key_rate_per_minute.get(key, 0) > 0:
                by_key.setdefault(key, []).append(m)
        for key, group in by_key.items():
            await admitting.take_window(WindowLimiter(self.backend, f"key:{key}", limits.key_rate_per_minute[key]),
                                        group)

    async def _take_domain_limits(self, admitting: _Admitting, messages: list[dict], limits: SendLimits) -> None:
        """2. Each destination domain's rate, then its concurrency."""
        by_domain: dict[str, list[dict]] = {}
        for m in messages:
            for domain in recipient_domains(m):
                by_domain.setdefault(domain, []).append(m)
        for domain, group in by_domain.items():
            cap = limits.for_domain(domain)
            granted = await admitting.take_window(WindowLimiter(self.backend, f"domain:{domain}", cap.rate_per_minute),
                                                  admitting.unrefused(group))
            await admitting.take_slots(ConcurrencyLimiter(self.backend, f"domain:{domain}", cap.concurrency), granted)

    async def _give_back(self, admitting: _Admitting) -> list[Lease]:
        """3. What refused messages took from limits they passed; the leases the admitted
        ones keep."""
        for limiter, taken in admitting.windows:
            await limiter.give(sum(1 for m in taken if m["_id"] in admitting.refused))
        kept = []
        for lease, holders in admitting.leases:
            used = sum(1 for m in holders if m["_id"] not in admitting.refused)
            if used < lease.count:
                await self.backend.give_slots(lease, lease.count - used)
            if used:
                kept.append(dataclasses.replace(lease, count=used))
        return kept

    async def release(self, admission: Admission) -> None:
        for lease in admission.leases:
            await self.backend.give_slots(lease)


# The plan's monthly sending limit.

def month_of(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m")


def plan_counter_id(workspace_id: str, month: str) -> str:
    return f"{workspace_id}:{month}"


def monthly_limit(workspace: Workspace, default_limit: int) -> int:
    """The workspace's own `monthly_email_limit` when set, else the plan default; 0 = unlimited."""
    own = workspace.get("monthly_email_limit")
    return int(own) if isinstance(own, int) and not isinstance(own, bool) else default_limit


