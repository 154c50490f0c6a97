"""Message retention (a scheduler job, ops/store_jobs.apply_message_retention): a
message's bodies are dropped POSTROOM_MESSAGE_BODY_RETENTION_DAYS after it was created
(default 30), the message itself, with its timeline and search keys, after
POSTROOM_MESSAGE_RETENTION_DAYS (default 400). Bounce and complaint records are kept: they
are the suppression list's evidence (GET /bounces), and name the message only by id.

Bounded work: at most `limit` messages a pass, over every workspace in turn, each read
by an integer range over its `(workspace_id, created_ms)` index (mongo/message_retention.py)."""

from __future__ import annotations

from pymongo.asynchronous.database import AsyncDatabase

from mongo import attachments, message_retention
from pipelines.core.clock import now_ms
from pipelines.core.settings import Settings

DAY_MS = 24 * 3600 * 1000
PASS_LIMIT = 500  # messages one pass touches, at most


def cutoffs(settings: Settings, at_ms: int) -> tuple[int, int]:
    """(bodies before, messages before), epoch ms: a message deleted sooner than its
    bodies would be loses them with it."""
    bodies_days = min(settings.message_body_retention_days, settings.message_retention_days)
    return at_ms - bodies_days * DAY_MS, at_ms - settings.message_retention_days * DAY_MS


async def apply_retention(db: AsyncDatabase, settings: Settings, *, at_ms: int | None = None,
                          limit: int = PASS_LIMIT) -> int:
    """One pass: old messages deleted, then older bodies dropped, workspace by workspace,
    then the attachment files whose newest message is past the body retention, until
    `limit` messages and files were touched; how many were."""
    bodies_before, messages_before = cutoffs(settings, now_ms() if at_ms is None else at_ms)
    done = 0
    for workspace_id in await message_retention.workspace_ids(db):
        if done >= limit:
            break
        done += await message_retention.delete_messages(db, workspace_id, messages_before, limit - done)
        if done < limit:
            done += await message_retention.drop_bodies(db, workspace_id, bodies_before, limit - done)
    if done < limit:  # files no message accepted since the body cutoff names (their bodies are gone)
        done += await attachments.expired(db, bodies_before, limit - done)
    return done
