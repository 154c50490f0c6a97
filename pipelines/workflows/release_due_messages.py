"""Messages whose wait in the store is over go to the render queue (a scheduler job each,
ops/scheduler.py): scheduled sends at their `send_at`, and SMTP retries at their
`next_attempt_at` (pipelines/messages/retry_schedule.py). Each is a guarded write first, so
two schedulers never both enqueue one message."""

from __future__ import annotations

from pymongo.asynchronous.database import AsyncDatabase

from mongo import messages
from pipelines.messages import delivery_status
from pipelines.workflows.publisher import Publisher


async def promote_due_messages(db: AsyncDatabase, publisher: Publisher) -> int:
    """Scheduled sends now due: `scheduled` → `queued`, then rendered. How many."""
    promoted = [d["_id"] for d in await messages.due_scheduled(db)
                if await messages.apply(db, [delivery_status.promote(d["_id"])])]
    await publisher.render(promoted)
    return len(promoted)


async def promote_due_retries(db: AsyncDatabase, publisher: Publisher) -> int:
    """SMTP retries whose wait is over, rendered again (the same Message-ID and Date; the
    MIME was not kept). How many."""
    taken = [d["_id"] for d in await messages.due_retries(db)
             if await messages.take_due_retry(db, d["_id"], d["attempts"])]
    await publisher.render(taken)
    return len(taken)
