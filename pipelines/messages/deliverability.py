"""Deliverability by destination domain: what each receiving domain answered, counted per
workspace, UTC day and domain as it happens (mongo/domain_stats.py), and the rates the
console shows over the last 1, 7 and 30 days.

What is counted, per recipient:
- `sent`: the receiving server gave a final answer (accepted, or refused for good) —
  as the workspace analytics count sends;
- `delivered`: accepted; `bounced`: refused for good at SMTP time, or bounced later by
  a DSN; `complained`: a spam report (ARF);
- `deferred`: an attempt answered with a temporary failure (4xx, or no answer at all),
  once per attempt, and a DSN saying "delayed".
The rates: bounce = bounced / sent, complaint = complained / delivered, deferral =
deferred / (sent + deferred) — the share of attempts that were put off."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Protocol

COUNTERS = ("sent", "delivered", "bounced", "complained", "deferred")
WINDOWS_DAYS = (1, 7, 30)
DAY_MS = 86_400_000


class _Answer(Protocol):
    """An SMTP answer for one recipient (pipelines/messages/outcomes.Outcome)."""
    @property
    def local(self) -> bool: ...

    @property
    def accepted(self) -> bool: ...

    @property
    def permanent(self) -> bool: ...

    @property
    def transient(self) -> bool: ...


def domain_of(address: str) -> str:
    return address.rpartition("@")[2].strip().lower()


def _bump(counts: dict, workspace_id: str, at: str, address: str, **fields: int) -> None:
    counts.setdefault((workspace_id, at[:10], domain_of(address)), Counter()).update(fields)


def count_attempt(counts: dict, workspace_id: str, at: str, outcomes: Mapping[str, _Answer]) -> None:
    """One SMTP attempt's answers, per recipient, into `counts` ({(workspace, day, domain): Counter})."""
    for recipient, answer in outcomes.items():
        if answer.accepted:
            _bump(counts, workspace_id, at, recipient, sent=1, delivered=1)
        elif answer.permanent and not answer.local:
            _bump(counts, workspace_id, at, recipient, sent=1, bounced=1)
        elif answer.transient:
            _bump(counts, workspace_id, at, recipient, deferred=1)


def count_report(workspace_id: str, at: str, address: str, *, complaint: bool, delayed: bool) -> dict:
    """A report received after the send (a DSN, an ARF complaint): its counts, in the same
    shape. A DSN that says "delayed" is a deferral, any other a bounce."""
    counts: dict = {}
    kind = "complained" if complaint else "deferred" if delayed else "bounced"
    _bump(counts, workspace_id, at, address, **{kind: 1})
    return counts


def _rate(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


@dataclasses.dataclass(frozen=True)
class Window:
    days: int
    counts: dict[str, int]

    @property
    def bounce_rate(self) -> float | None:
        return _rate(self.counts["bounced"], self.counts["sent"])

    @property
    def complaint_rate(self) -> float | None:
        return _rate(self.counts["complained"], self.counts["delivered"])

    @property
    def deferral_rate(self) -> float | None:
        return _rate(self.counts["deferred"], self.counts["sent"] + self.counts["deferred"])


@dataclasses.dataclass(frozen=True)
class DomainRates:
    domain: str
    windows: dict[int, Window]  # by its length in days


def by_domain(rows: Iterable[dict], today_ms: int) -> list[DomainRates]:
    """Daily rows ({domain, day_ms, <COUNTERS>}) of the last 30 days summed per domain over
    each window (the window of N days: today, UTC, and the N-1 days before), the domains
    with the most sent over 30 days first."""
    sums: dict[str, dict[int, Counter]] = {}
    for row in rows:
        age_days = (today_ms - int(row["day_ms"])) // DAY_MS
        per_window = sums.setdefault(row["domain"], {days: Counter() for days in WINDOWS_DAYS})
        for days in WINDOWS_DAYS:
            if 0 <= age_days < days:
                per_window[days].update({name: int(row.get(name) or 0) for name in COUNTERS})
    found = [DomainRates(domain, {days: Window(days, {name: counts[name] for name in COUNTERS})
                                  for days, counts in windows.items()}) for domain, windows in sums.items()]
    return sorted(found, key=lambda d: (-d.windows[max(WINDOWS_DAYS)].counts["sent"], d.domain))
