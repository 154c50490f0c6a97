"""The `webhooks` queue: one attempt of one delivery — signed POST, attempt recorded,
the next attempt scheduled (short waits on the broker, long ones in the store)."""

from __future__ import annotations

import uuid

import dramatiq

from mongo import webhooks as webhook_store
from pipelines.webhook_delivery import LEASE_SECONDS, outcome_of, send_signed

from . import metrics, runtime


# Dramatiq's own retries cover only store or broker errors around an attempt; the HTTP
# retry schedule is ours (pipelines/retry_schedule.py) and never raises.
@dramatiq.actor(queue_name="webhooks", max_retries=5, min_backoff=1000, max_backoff=30_000)
async def deliver_webhook(delivery_id: str) -> None:
    db, settings, token = runtime.store(), runtime.settings(), uuid.uuid4().hex
    delivery = await webhook_store.claim(db, delivery_id, token, LEASE_SECONDS)
    if delivery is None:  # finished, not due, or another worker holds it
        return
    subscription = await webhook_store.get(db, delivery["workspace_id"], delivery["webhook_id"])
    if subscription is None:
        await webhook_store.cancel(db, delivery_id, token)
        return
    result = await send_signed(
        url=subscription["target_url"], sealed_secret=subscription["secret_sealed"], secret_key=settings.secret_key,
        body=delivery["body"], event=delivery["event"], delivery_id=delivery_id,
        webhook_id=subscription["_id"], allow_private=settings.allow_private_targets)
    outcome = outcome_of(delivery, result, settings.webhook_retry_scale)
    await webhook_store.record_attempt(db, outcome.attempt)
    metrics.count_webhook_attempt(outcome.changes.get("status", "pending"))
    if await webhook_store.finish_attempt(db, delivery_id, token, outcome.changes) and outcome.broker_delay_ms is not None:
        await runtime.publisher().deliver_webhooks([delivery_id], delay_ms=outcome.broker_delay_ms)
