"""`inbound_routes`: a workspace's routes for received mail. A route is also the signed
delivery target of its own webhook lane (mongo/webhooks.py): it carries what a
subscription does (`events` = ["email.received"], `target_url`, `secret_sealed`,
`active`), so the webhook machinery delivers to it as it delivers to a subscription, while
the webhook API never lists it (another collection)."""

from __future__ import annotations

from pymongo import ASCENDING, IndexModel
from pymongo.asynchronous.database import AsyncDatabase

from pipelines.core.clock import now_iso
from pipelines.core.documents import WebhookSubscription

from . import documents
from .documents import get_owned

INDEXES: dict[str, list] = {
    "inbound_routes": [IndexModel([("workspace_id", ASCENDING), ("active", ASCENDING), ("priority", ASCENDING),
                                   ("created_at", ASCENDING)], name="ws_active_order")],
}
# A route's order: lower priority first, then the oldest.
ORDER = [("priority", ASCENDING), ("created_at", ASCENDING), ("_id", ASCENDING)]


async def create(db: AsyncDatabase, workspace_id: str, *, pattern: str, target_url: str, secret_sealed: str,
                 priority: int, description: str | None) -> WebhookSubscription:
    return await documents.create(db.inbound_routes, workspace_id, {
        "pattern": pattern, "priority": priority, "description": description, "events": ["email.received"],
        "target_url": target_url, "secret_sealed": secret_sealed, "form": "inbound_route", "active": True},
        stamped=("secret_rotated_at",))


async def get(db: AsyncDatabase, workspace_id: str, route_id: str) -> WebhookSubscription | None:
    return await get_owned(db.inbound_routes, workspace_id, route_id, active=True)


async def list_page(db: AsyncDatabase, workspace_id: str, *, limit: int, offset: int) -> tuple[list[dict], int]:
    return await documents.page(db.inbound_routes, {"workspace_id": workspace_id, "active": True}, limit=limit,
                                offset=offset, sort=ORDER)


async def active_of(db: AsyncDatabase, workspace_id: str) -> list[dict]:
    """Every active route of the workspace, in order."""
    return await db.inbound_routes.find({"workspace_id": workspace_id, "active": True}, sort=ORDER).to_list()


async def deactivate(db: AsyncDatabase, workspace_id: str, route_id: str) -> bool:
    now = now_iso()
    result = await db.inbound_routes.update_one({"_id": route_id, "workspace_id": workspace_id, "active": True},
                                                {"$set": {"active": False, "deleted_at": now, "updated_at": now}})
    return result.modified_count == 1
