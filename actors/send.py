"""The `send` queue: rendered MIME → SMTP, many messages in flight per worker."""

from __future__ import annotations

import asyncio
import uuid

import dramatiq

from mongo import messages, outbox
from pipelines.outcomes import plan_outcomes

from . import runtime

LEASE_SECONDS = 300


@dramatiq.actor(queue_name="send", max_retries=10, min_backoff=1000, max_backoff=60_000)
async def send_messages(message_ids: list[str], attempt: int = 0) -> None:
    db = runtime.store()
    claimed = await messages.claim_for_sending(db, message_ids, uuid.uuid4().hex, LEASE_SECONDS)
    if not claimed:
        return
    rendered = await messages.load_rendered(db, [m["_id"] for m in claimed])
    transport = runtime.transport()

    async def deliver(message: dict):
        mime = rendered.get(message["_id"])
        if mime is None:
            return message, None
        return message, await transport.send(mime["mail_from"], mime["recipients"],
                                             mime["data"].encode("ascii"), message["_id"])

    results = await asyncio.gather(*(deliver(m) for m in claimed))
    plan = plan_outcomes(results, attempt)
    await messages.advance(db, plan.transitions)
    await outbox.record_many(db, plan.events)
    await messages.drop_rendered(db, plan.finished_ids)
    if plan.retry_ids:
        await messages.release_for_retry(db, plan.retry_ids, plan.retry_notes)
        send_messages.send_with_options(args=(plan.retry_ids, attempt + 1), delay=plan.retry_delay_ms)
