"""Messages whose wait in the store is over go to the render queue (the scheduler's
`release_and_watch_messages` each pass, ops/scheduler.py): scheduled sends at their `send_at`,
and SMTP retries at their `next_attempt_at` (pipelines/messages/retry_schedule.py); then the
watchdog looks for stalled ones. Each is a guarded write first, so two schedulers never both
enqueue one message."""

from __future__ import annotations

from pymongo.asynchronous.database import AsyncDatabase

from mongo import messages
from pipelines.core.settings import Settings
from pipelines.messages import delivery_status
from pipelines.workflows import message_watchdog
from pipelines.workflows.publisher import Publisher


async def release_and_watch(db: AsyncDatabase, settings: Settings, publisher: Publisher) -> int:
    """Scheduled sends come due, SMTP retries whose wait is over, then the watchdog
    (message_watchdog). The first two and the watchdog's lapsed claims are all found by
    `due_ms`: one probe first, so an idle pass makes two reads of messages, not five."""
    due = await messages.any_due(db)
    released = 0
    if due:
        released += await promote_due_messages(db, publisher)
        released += await promote_due_retries(db, publisher)
    return released + await message_watchdog.requeue_stalled_messages(db, settings, publisher, any_due=due)


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
