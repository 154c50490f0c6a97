"""A webhook delivery on its last attempt, as after two days of failures: the real worker
tries it once more (a receiver told to fail then leaves it failed for good)."""

from __future__ import annotations

import uuid

from mongo import webhooks as webhook_store
from pipelines.core.clock import now_iso
from pipelines.messages.retry_schedule import MAX_ATTEMPTS
from pipelines.webhooks.events import plan_deliveries


def on_last_attempt(service, workspace_id: str, webhook_id: str, event: str = "contact.created") -> str:
    """The new delivery's id (the event: a contact created)."""
    stored = {"_id": str(uuid.uuid4()), "workspace_id": workspace_id, "event": event,
              "data": {"contact": {"id": "c-9", "email": "zed@example.org"}}, "timestamp": now_iso()}

    async def seed(db):
        subscription = await webhook_store.get(db, workspace_id, webhook_id)
        [delivery] = plan_deliveries(stored, [subscription], now_iso())
        delivery["attempt_count"] = MAX_ATTEMPTS - 1
        await webhook_store.insert_deliveries(db, [delivery])
        return delivery["_id"]
    return service.store.call(seed(service.store.db))
