"""What follows one delivery attempt (delivered, try again later, or give up: after the
last attempt of the schedule, or at once on a permanent failure), and how much one turn of
a subscription's lane takes. Pure rules: the attempts themselves are posted by
pipelines/workflows/deliver_webhooks.py through the HTTP adapter."""

from __future__ import annotations

import dataclasses
from typing import Protocol

from pipelines.core.clock import in_seconds, ms_of, now_iso, utcnow
from pipelines.core.documents import WebhookDelivery
from pipelines.messages import retry_schedule
from pipelines.webhooks.events import NEVER_MS, OFF_LANE, lane_due

# Deliveries one volley of a lane's turn takes at most, per unit of the endpoint's
# concurrency (so a volley is posted in at most this many waves): enough to amortise the
# turn's store round trips, small enough that a slow endpoint's volley ends (and other
# lanes get their turn) within a few HTTP timeouts.
VOLLEY_WAVES = 4
# What an attempt records when the subscription's signing secret cannot be opened: nothing
# is sent unsigned, and the attempt is retried on schedule (the operator may restore the key).
SECRET_DOES_NOT_OPEN = "not sent: the signing secret does not open with POSTROOM_SECRET_KEY (was it changed?)"


def lease_seconds(http_timeout_seconds: float, waves: int = VOLLEY_WAVES) -> int:
    """How long a turn holds a volley's deliveries: every wave may last one HTTP timeout, and
    the outcome writes must land before another turn may take them again."""
    return int(waves * http_timeout_seconds) + 60


class AttemptResult(Protocol):
    """What an attempt's HTTP exchange answered (the HTTP adapter's HttpResult), read only."""

    @property
    def status_code(self) -> int: ...  # 0 when no HTTP answer came back

    @property
    def duration_ms(self) -> int: ...

    @property
    def error(self) -> str | None: ...

    @property
    def response_excerpt(self) -> str: ...

    @property
    def permanent(self) -> bool: ...  # trying again cannot help

    @property
    def ok(self) -> bool: ...


@dataclasses.dataclass(frozen=True)
class AttemptOutcome:
    attempt: dict  # the attempt's own record
    changes: dict  # fields to set on the delivery (lease released)


def outcome_of(delivery: WebhookDelivery, result: AttemptResult, scale: float) -> AttemptOutcome:
    number = delivery["attempt_count"] + 1
    now = now_iso()
    replay = int(delivery.get("replays") or 0)  # an operator's replay starts the attempts again
    attempt_id = f"{delivery['_id']}#{number}" if not replay else f"{delivery['_id']}#r{replay}.{number}"
    attempt = {"_id": attempt_id, "delivery_id": delivery["_id"], "replay": replay,
               "webhook_id": delivery["webhook_id"], "workspace_id": delivery["workspace_id"],
               "attempt": number, "at": now, "status_code": result.status_code,
               "duration_ms": result.duration_ms, "error": result.error,
               "response_excerpt": result.response_excerpt[:200]}
    changes = {"attempt_count": number, "last_status_code": result.status_code,
               "last_error": result.error, "locked_by": "", "updated_at": now}
    if result.ok:
        changes.update(status="delivered", delivered_at=now, due_ms=NEVER_MS, lane_due=OFF_LANE)
        return AttemptOutcome(attempt, changes)
    # a permanent failure (a URL the sender cannot read, a refused target) is not retried
    following = None if result.permanent else retry_schedule.after_failure(number, scale)
    if following is None:
        changes.update(status="failed", failed_at=now, failed_ms=ms_of(now), due_ms=NEVER_MS, lane_due=OFF_LANE)
        return AttemptOutcome(attempt, changes)
    # Every wait, short or long, is kept in the store: the lane's next turn is due then
    # (the scheduler wakes it), so no broker message waits for one delivery.
    at = utcnow()
    due_ms = int(at.timestamp() * 1000 + following.delay_seconds * 1000)
    changes.update(next_attempt_at=in_seconds(following.delay_seconds, at), due_ms=due_ms,
                   lane_due=lane_due(delivery["webhook_id"], due_ms))
    return AttemptOutcome(attempt, changes)
