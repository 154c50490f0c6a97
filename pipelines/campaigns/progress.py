"""A campaign's progress over time, from its messages: for each kind of event (SERIES),
how many messages had reached it by each moment. A message counts once per kind, at the
first time its history shows it (a deferral, a send, a delivery, a bounce, the status
moves of a first open and a first click) or, for a complaint, when its report was
recorded (`last_complaint_at`: complaints are counted once per message)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from pipelines.core.clock import ms_of

SERIES = ("sent", "delivered", "deferred", "bounced", "complained", "opened", "clicked")
# What a message's history says of each kind (the history entry's status).
_FROM_HISTORY = {"sent": "sent", "delivered": "delivered", "deferred": "deferred", "bounced": "bounced",
                 "opened": "opened", "clicked": "clicked"}
# A clicked message was opened; one delivered, sent (a status skips the ones it implies).
_IMPLIED = {"clicked": ("opened",), "opened": ("delivered",), "delivered": ("sent",)}
# What the chart needs of a message.
FIELDS = ("history", "last_complaint_at")


@dataclasses.dataclass(frozen=True)
class Progress:
    start_ms: int
    end_ms: int
    # per kind: (ms, how many messages had reached it by then), ascending, one point a change
    series: dict[str, list[tuple[int, int]]]
    messages: int  # how many messages were read

    def final(self, kind: str) -> int:
        points = self.series[kind]
        return points[-1][1] if points else 0


def first_times(message: dict) -> dict[str, int]:
    """When the message first reached each kind (ms), for the kinds it reached."""
    firsts: dict[str, int] = {}

    def reach(kind: str, at: int) -> None:
        if kind not in firsts or at < firsts[kind]:
            firsts[kind] = at
        for implied in _IMPLIED.get(kind, ()):
            reach(implied, at)
    for entry in message.get("history") or []:
        kind = _FROM_HISTORY.get(entry.get("status", ""))
        if kind:
            reach(kind, ms_of(entry["at"]))
    if message.get("last_complaint_at"):
        reach("complained", ms_of(message["last_complaint_at"]))
    return firsts


def progress(messages: Iterable[dict], start_ms: int, until_ms: int) -> Progress:
    """The progress of `messages` from `start_ms` to `until_ms` (or the last event, if later)."""
    times: dict[str, list[int]] = {kind: [] for kind in SERIES}
    count = 0
    for message in messages:
        count += 1
        for kind, at in first_times(message).items():
            times[kind].append(at)
    series = {kind: [(at, n) for n, at in enumerate(sorted(found), start=1)] for kind, found in times.items()}
    latest = max((points[-1][0] for points in series.values() if points), default=start_ms)
    return Progress(start_ms, max(until_ms, latest, start_ms + 1), series, count)
