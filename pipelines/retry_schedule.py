"""When a failed webhook delivery is tried again: a table, not a formula, so the whole
schedule can be read (and documented) at a glance. Twelve attempts spread over ~52 hours;
a receiver that is down for a day still gets everything.

Short waits ride the broker (a delayed message); longer ones wait in the store with
`next_attempt_at` and the scheduler enqueues them when due, so no long-delayed message
sits unacked in RabbitMQ (DESIGN.md). Which path a wait takes is decided on the table's
value, before `scale` (a test speed-up) is applied, so tests exercise both paths."""

from __future__ import annotations

import dataclasses

# Wait before attempt n+2 after attempt n+1 failed, seconds.
RETRY_DELAYS_SECONDS: tuple[int, ...] = (
    10, 30, 2 * 60, 10 * 60, 30 * 60, 60 * 60, 2 * 3600, 4 * 3600, 8 * 3600, 12 * 3600, 24 * 3600)
MAX_ATTEMPTS = len(RETRY_DELAYS_SECONDS) + 1
# Waits up to this long are a delayed broker message; longer ones wait in the store.
BROKER_DELAY_MAX_SECONDS = 60


@dataclasses.dataclass(frozen=True)
class NextAttempt:
    delay_seconds: float  # after scaling
    via_broker: bool


def after_failure(attempts_made: int, scale: float = 1.0) -> NextAttempt | None:
    """The next try after `attempts_made` attempts all failed, or None to give up."""
    if attempts_made < 1:
        raise ValueError("attempts_made counts the attempt that just failed; it is at least 1")
    if attempts_made >= MAX_ATTEMPTS:
        return None
    delay = RETRY_DELAYS_SECONDS[attempts_made - 1]
    return NextAttempt(delay_seconds=delay * scale, via_broker=delay <= BROKER_DELAY_MAX_SECONDS)


def total_span_seconds() -> int:
    return sum(RETRY_DELAYS_SECONDS)
