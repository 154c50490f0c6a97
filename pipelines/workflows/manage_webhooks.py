"""A webhook subscription's commands (both forms of subscribe and delete, rotating the
secret) and replaying a delivery that failed for good. The signing secret is sealed at
rest and shown once, in the answer that made it."""

from __future__ import annotations

from pymongo.asynchronous.database import AsyncDatabase

from mongo import webhooks
from pipelines.core.documents import WebhookSubscription
from pipelines.core.errors import Conflict
from pipelines.core.secret_box import seal
from pipelines.core.settings import Settings
from pipelines.webhooks import signing


async def subscribe(db: AsyncDatabase, settings: Settings, workspace_id: str, *, events: list[str],
                    target_url: str, form: str) -> tuple[WebhookSubscription, str]:
    """The new subscription and its secret."""
    secret = signing.new_secret()
    doc = await webhooks.create(db, workspace_id, events=list(dict.fromkeys(events)), target_url=target_url,
                                secret_sealed=seal(secret, settings.secret_key), form=form)
    return doc, secret


async def unsubscribe(db: AsyncDatabase, workspace_id: str, webhook_id: str) -> bool:
    """False when there is no active subscription; its waiting deliveries are cancelled."""
    return await webhooks.deactivate(db, workspace_id, webhook_id)


async def rotate_secret(db: AsyncDatabase, settings: Settings, workspace_id: str,
                        webhook_id: str) -> tuple[WebhookSubscription | None, str]:
    """The subscription with a new secret, at once, and that secret; None when there is no
    active subscription."""
    secret = signing.new_secret()
    return await webhooks.replace_secret(db, workspace_id, webhook_id, seal(secret, settings.secret_key)), secret


async def replay_failed(db: AsyncDatabase, workspace_id: str, delivery_id: str) -> dict | None:
    """The workspace's failed delivery, pending again with its attempts counted anew (as
    `postroom webhooks replay`); None when the workspace has no such delivery, 409 when it
    is not failed (delivered meanwhile, or replayed already)."""
    delivery = await webhooks.delivery_of(db, workspace_id, delivery_id)
    if delivery is None:
        return None
    reopened = await webhooks.reopen_failed(db, delivery_id)
    if reopened is None:
        now = "pending again (replayed meanwhile)" if delivery["status"] == "failed" else delivery["status"]
        raise Conflict(f"Only a failed delivery can be replayed; this one is {now}.")
    return reopened
