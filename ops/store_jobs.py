"""Scheduler jobs that tidy the store: each a one-call shell over guarded writes in mongo/."""

from __future__ import annotations

import time

from pymongo.asynchronous.database import AsyncDatabase

from mongo import console_sessions, contact_removal, forms, idempotency, outbox, rate_windows, send_limits
from pipelines.core.settings import Settings
from pipelines.workflows import message_retention


async def purge_expired(db: AsyncDatabase, settings: Settings) -> int:
    """Rate windows, Idempotency-Key records and console sessions past their lifetime."""
    return (await rate_windows.purge_expired(db) + await idempotency.purge_expired(db)
            + await console_sessions.purge_expired(db))


async def relay_stranded(db: AsyncDatabase, settings: Settings) -> int:
    """Outbox events a dead process left in their documents (mongo/outbox.py)."""
    return await outbox.relay_stranded(db)


async def purge_lapsed_slots(db: AsyncDatabase, settings: Settings) -> int:
    return await send_limits.purge_lapsed_slots(db)


async def purge_unrestorable(db: AsyncDatabase, settings: Settings) -> int:
    return await contact_removal.purge_unrestorable(db)


async def expire_signups(db: AsyncDatabase, settings: Settings) -> int:
    return await forms.expire_signups(db)


# Retention has nothing new to do from one second to the next: a pass a minute at most,
# and again at once while a pass found a full batch (a backlog).
RETENTION_EVERY_SECONDS = 60.0
_retention = {"next": 0.0}


async def apply_message_retention(db: AsyncDatabase, settings: Settings) -> int:
    """Old messages' bodies dropped, older messages deleted (pipelines/workflows/message_retention.py)."""
    if time.monotonic() < _retention["next"]:
        return 0
    done = await message_retention.apply_retention(db, settings)
    _retention["next"] = 0.0 if done >= message_retention.PASS_LIMIT else time.monotonic() + RETENTION_EVERY_SECONDS
    return done
