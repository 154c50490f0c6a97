"""Scheduler jobs that tidy the store: each a one-call shell over guarded writes in mongo/."""

from __future__ import annotations

from pymongo.asynchronous.database import AsyncDatabase

from mongo import contact_removal, forms, idempotency, outbox, rate_windows, send_limits
from pipelines.core.settings import Settings


async def purge_expired(db: AsyncDatabase, settings: Settings) -> int:
    """Rate windows and Idempotency-Key records past their lifetime."""
    return await rate_windows.purge_expired(db) + await idempotency.purge_expired(db)


async def relay_stranded(db: AsyncDatabase, settings: Settings) -> int:
    """Outbox events a dead process left in their documents (mongo/outbox.py)."""
    return await outbox.relay_stranded(db)


async def purge_lapsed_slots(db: AsyncDatabase, settings: Settings) -> int:
    return await send_limits.purge_lapsed_slots(db)


async def purge_unrestorable(db: AsyncDatabase, settings: Settings) -> int:
    return await contact_removal.purge_unrestorable(db)


async def expire_signups(db: AsyncDatabase, settings: Settings) -> int:
    return await forms.expire_signups(db)
