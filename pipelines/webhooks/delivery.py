"""One delivery attempt: sign the stored body, POST it through the outbound guard, and
decide what follows (delivered, try again later, or give up: after the last attempt of
the schedule, or at once on a permanent failure). `send_batch` makes the attempts of one
turn of a subscription's lane, concurrently up to the endpoint's limit. Used by the
`webhooks` actor and, for the test operation, by the front."""

from __future__ import annotations

import asyncio
import dataclasses
import time

from pipelines.adapters import http_client as outbound_http
from pipelines.messages import retry_schedule
from pipelines.webhooks import signing as webhook_signing
from pipelines.core.clock import in_seconds, now_iso, utcnow
from pipelines.core.secret_box import open_sealed
from pipelines.webhooks.events import NEVER_MS, OFF_LANE, lane_due

# Deliveries one turn of a lane attempts at most, per unit of the endpoint's concurrency:
# enough to amortise the turn's store round trips, small enough that a slow endpoint's
# turn ends (and other lanes get theirs) within a few HTTP timeouts.
TURN_ROUNDS = 4


def lease_seconds(rounds: int = TURN_ROUNDS) -> int:
    """How long a turn holds its deliveries: every round may last one HTTP timeout, and
    the outcome writes must land before another turn may take them again."""
    return int(rounds * outbound_http.TIMEOUT_SECONDS) + 60


def _unsendable(reason: str) -> outbound_http.HttpResult:
    return outbound_http.HttpResult(0, 0, reason)


async def send_signed(*, url: str, sealed_secret: str | None = None, secret: str | None = None,
                      secret_key: str = "", body: str, event: str, delivery_id: str, webhook_id: str,
                      allow_private: bool, session: outbound_http.Session | None = None) -> outbound_http.HttpResult:
    """One signed POST; never raises, so every attempt ends with a result to record.
    `secret`: the opened signing secret (a batch opens it once), else `sealed_secret`."""
    if secret is None:
        try:
            secret = open_sealed(sealed_secret or "", secret_key)
        except ValueError:  # POSTROOM_SECRET_KEY changed since the secret was sealed: not sent unsigned
            return _unsendable("not sent: the signing secret does not open with POSTROOM_SECRET_KEY (was it changed?)")
    raw = body.encode()
    headers = webhook_signing.delivery_headers(secret=secret, body=raw, timestamp=int(time.time()),
                                               event=event, delivery_id=delivery_id,
                                               webhook_id=webhook_id)
    return await outbound_http.post(url, raw, headers, allow_private=allow_private, session=session)


async def send_batch(deliveries: list[dict], subscription: dict, *, secret_key: str, allow_private: bool,
                     concurrency: int, session: outbound_http.Session) -> list[outbound_http.HttpResult]:
    """Each delivery's attempt to `subscription`, at most `concurrency` in flight at once
    (the endpoint's limit), results in the deliveries' order. Never raises."""
    try:
        secret = open_sealed(subscription["secret_sealed"], secret_key)
    except ValueError:
        unsigned = _unsendable("not sent: the signing secret does not open with POSTROOM_SECRET_KEY (was it changed?)")
        return [unsigned for _ in deliveries]
    gate = asyncio.Semaphore(max(1, concurrency))

    async def attempt(delivery: dict) -> outbound_http.HttpResult:
        async with gate:
            return await send_signed(url=subscription["target_url"], secret=secret, body=delivery["body"],
                                     event=delivery["event"], delivery_id=delivery["_id"],
                                     webhook_id=subscription["_id"], allow_private=allow_private, session=session)
    return list(await asyncio.gather(*(attempt(d) for d in deliveries)))


@dataclasses.dataclass(frozen=True)
class AttemptOutcome:
    attempt: dict  # the attempt's own record
    changes: dict  # fields to set on the delivery (lease released)


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
               "last_error": result.error, "locked_by": "", "updated_at": now}
    if result.ok:
        changes.update(status="delivered", delivered_at=now, due_ms=NEVER_MS, lane_due=OFF_LANE)
        return AttemptOutcome(attempt, changes)
    # a permanent failure (a URL the sender cannot read, a refused target) is not retried
    following = None if result.permanent else retry_schedule.after_failure(number, scale)
    if following is None:
        changes.update(status="failed", failed_at=now, due_ms=NEVER_MS, lane_due=OFF_LANE)
        return AttemptOutcome(attempt, changes)
    # Every wait, short or long, is kept in the store: the lane's next turn is due then
    # (the scheduler wakes it), so no broker message waits for one delivery.
    at = utcnow()
    due_ms = int(at.timestamp() * 1000 + following.delay_seconds * 1000)
    changes.update(next_attempt_at=in_seconds(following.delay_seconds, at), due_ms=due_ms,
                   lane_due=lane_due(delivery["webhook_id"], due_ms))
    return AttemptOutcome(attempt, changes)
