"""One delivery attempt: sign the stored body, POST it through the outbound guard, and
decide what follows (delivered, try again later — on the broker or from the store — or
give up: after the last attempt of the schedule, or at once on a permanent failure). Used by the `webhooks` actor and, for the test operation, by the front."""

from __future__ import annotations

import dataclasses
import time

from . import outbound_http, retry_schedule, webhook_signing
from .clock import in_seconds, now_iso
from .secret_box import open_sealed
from .webhook_events import HANDOFF_GRACE_SECONDS, NEVER

# A worker holds a delivery this long at most (an attempt lasts ≤ the HTTP timeout).
LEASE_SECONDS = 60


async def send_signed(*, url: str, sealed_secret: str, secret_key: str, body: str, event: str,
                      delivery_id: str, webhook_id: str, allow_private: bool) -> outbound_http.HttpResult:
    """One signed POST; never raises, so every attempt ends with a result to record."""
    try:
        secret = open_sealed(sealed_secret, secret_key)
    except ValueError:  # POSTROOM_SECRET_KEY changed since the secret was sealed: not sent unsigned
        return outbound_http.HttpResult(0, 0, "not sent: the signing secret does not open with "
                                              "POSTROOM_SECRET_KEY (was it changed?)")
    raw = body.encode()
    headers = webhook_signing.delivery_headers(secret=secret, body=raw, timestamp=int(time.time()),
                                               event=event, delivery_id=delivery_id,
                                               webhook_id=webhook_id)
    return await outbound_http.post(url, raw, headers, allow_private=allow_private)


@dataclasses.dataclass(frozen=True)
class AttemptOutcome:
    attempt: dict  # the attempt's own record
    changes: dict  # fields to set on the delivery (lease released)
    broker_delay_ms: int | None  # send the next attempt through the broker after this wait


def outcome_of(delivery: dict, result: outbound_http.HttpResult, scale: float) -> AttemptOutcome:
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
               "last_error": result.error, "locked_by": "", "locked_until": NEVER, "updated_at": now}
    if result.ok:
        changes.update(status="delivered", delivered_at=now)
        return AttemptOutcome(attempt, changes, None)
    # a permanent failure (a URL the sender cannot read, a refused target) is not retried
    following = None if result.permanent else retry_schedule.after_failure(number, scale)
    if following is None:
        changes.update(status="failed", failed_at=now)
        return AttemptOutcome(attempt, changes, None)
    due = in_seconds(following.delay_seconds)
    changes["next_attempt_at"] = due
    if following.via_broker:
        # The broker carries it; the scheduler steps in only if that message is lost.
        changes["handoff_until"] = in_seconds(following.delay_seconds + HANDOFF_GRACE_SECONDS)
        return AttemptOutcome(attempt, changes, int(following.delay_seconds * 1000))
    changes["handoff_until"] = due  # the scheduler enqueues it when due
    return AttemptOutcome(attempt, changes, None)
