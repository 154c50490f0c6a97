"""Webhook subscriptions (`webhooks`), their deliveries (`webhook_deliveries`, `_id` =
`<event id>:<subscription id>`) and one record per attempt (`webhook_attempts`).

A delivery is claimed for an attempt with a lease (`locked_by`, `locked_until`) by a
guarded update on its `_id`, so two workers never attempt it at once; `handoff_until`
says until when it is the broker's to carry, after which the scheduler enqueues it. Every
write to a delivery adds one to its `version`, the guard of the scheduler's hand-off
(mongo/versions.py: never a timestamp)."""

from __future__ import annotations

from pymongo import ASCENDING, DESCENDING, IndexModel, InsertOne, ReturnDocument
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import BulkWriteError, DuplicateKeyError

from pipelines.clock import in_seconds, now_iso

from . import documents, grouped_reads, versions
from .documents import get_owned

INDEXES: dict[str, list] = {
    "webhooks": [IndexModel([("workspace_id", ASCENDING), ("active", ASCENDING), ("created_at", DESCENDING)],
                            name="ws_active_created")],
    "webhook_deliveries": [
        IndexModel([("webhook_id", ASCENDING), ("created_at", DESCENDING)], name="webhook_created"),
        IndexModel([("status", ASCENDING), ("next_attempt_at", ASCENDING)], name="status_due")],
    "webhook_attempts": [IndexModel([("delivery_id", ASCENDING), ("attempt", ASCENDING)], name="delivery")],
}


# -- subscriptions ---------------------------------------------------------------------
async def create(db: AsyncDatabase, workspace_id: str, *, events: list[str], target_url: str,
                 secret_sealed: str, form: str) -> dict:
    return await documents.create(db.webhooks, workspace_id, {
        "events": list(events), "target_url": target_url, "secret_sealed": secret_sealed, "form": form,
        "active": True}, stamped=("secret_rotated_at",))


async def get(db: AsyncDatabase, workspace_id: str, webhook_id: str) -> dict | None:
    return await get_owned(db.webhooks, workspace_id, webhook_id, active=True)


async def list_active(db: AsyncDatabase, workspace_id: str, *, event: str | None, limit: int,
                      offset: int) -> tuple[list[dict], int]:
    where: dict = {"workspace_id": workspace_id, "active": True}
    if event is not None:
        where["events"] = event
    docs = await db.webhooks.find(where, sort=[("created_at", DESCENDING), ("_id", ASCENDING)],
                                  skip=offset, limit=limit).to_list()
    return docs, await db.webhooks.count_documents(where)


async def deactivate(db: AsyncDatabase, workspace_id: str, webhook_id: str) -> bool:
    """Guarded: only an active subscription of this workspace; its waiting deliveries stop."""
    now = now_iso()
    result = await db.webhooks.update_one(
        {"_id": webhook_id, "workspace_id": workspace_id, "active": True},
        {"$set": {"active": False, "deleted_at": now, "updated_at": now}})
    if result.modified_count != 1:
        return False
    await db.webhook_deliveries.update_many(
        {"webhook_id": webhook_id, "status": "pending"},
        versions.bump({"$set": {"status": "cancelled", "updated_at": now}}))
    return True


async def replace_secret(db: AsyncDatabase, workspace_id: str, webhook_id: str, sealed: str) -> dict | None:
    now = now_iso()
    return await db.webhooks.find_one_and_update(
        {"_id": webhook_id, "workspace_id": workspace_id, "active": True},
        {"$set": {"secret_sealed": sealed, "secret_rotated_at": now, "updated_at": now}},
        return_document=ReturnDocument.AFTER)


async def active_for_workspaces(db: AsyncDatabase, workspace_ids: list[str]) -> list[dict]:
    # read with the same reads of concurrent jobs (mongo/grouped_reads), after this one asked:
    # a subscription created before still sees the next event
    return await grouped_reads.find_in(db, "webhooks", "workspace_id", sorted(set(workspace_ids)),
                                       where={"active": True})


# -- deliveries --------------------------------------------------------------------------
async def insert_deliveries(db: AsyncDatabase, docs: list[dict]) -> None:
    """Insert, ignoring deliveries that already exist (a repeated dispatch)."""
    if not docs:
        return
    try:
        await db.webhook_deliveries.bulk_write([InsertOne({**d, versions.FIELD: 0}) for d in docs], ordered=False)
    except BulkWriteError as error:
        if any(e.get("code") != 11000 for e in error.details.get("writeErrors", [])):
            raise


async def claim(db: AsyncDatabase, delivery_id: str, token: str, lease_seconds: int) -> dict | None:
    """Take a due, pending, unleased delivery for one attempt; None if another worker has
    it, it is not due yet, or it is finished."""
    now = now_iso()
    return await db.webhook_deliveries.find_one_and_update(
        {"_id": delivery_id, "status": "pending", "next_attempt_at": {"$lte": now},
         "locked_until": {"$lte": now}},
        versions.bump({"$set": {"locked_by": token, "locked_until": in_seconds(lease_seconds), "updated_at": now}}),
        return_document=ReturnDocument.AFTER)


async def finish_attempt(db: AsyncDatabase, delivery_id: str, token: str, changes: dict) -> bool:
    """Apply an attempt's outcome, only while we still hold the lease."""
    result = await db.webhook_deliveries.update_one(
        {"_id": delivery_id, "locked_by": token, "status": "pending"}, versions.bump({"$set": changes}))
    return result.modified_count == 1


async def cancel(db: AsyncDatabase, delivery_id: str, token: str) -> None:
    await db.webhook_deliveries.update_one(
        {"_id": delivery_id, "locked_by": token, "status": "pending"},
        versions.bump({"$set": {"status": "cancelled", "locked_by": "", "updated_at": now_iso()}}))


async def record_attempt(db: AsyncDatabase, attempt: dict) -> None:
    try:
        await db.webhook_attempts.insert_one(attempt)
    except DuplicateKeyError:  # the same attempt recorded by a redelivered message
        pass


async def due(db: AsyncDatabase, limit: int = 500) -> list[dict]:
    """Pending deliveries that are due and not (any more) the broker's to carry."""
    now = now_iso()
    return await db.webhook_deliveries.find(
        {"status": "pending", "next_attempt_at": {"$lte": now}, "handoff_until": {"$lte": now}},
        {"_id": 1, versions.FIELD: 1}, sort=[("next_attempt_at", ASCENDING)], limit=limit).to_list()


async def hand_off(db: AsyncDatabase, seen: dict, until: str) -> bool:
    """Guarded on the version `seen` (from `due`), so two schedulers never both enqueue one
    delivery, and one that a worker attempted meanwhile is left alone."""
    result = await db.webhook_deliveries.update_one(
        {"_id": seen["_id"], "status": "pending", **versions.guard(seen)},
        versions.bump({"$set": {"handoff_until": until}}))
    return result.modified_count == 1


async def list_for_webhook(db: AsyncDatabase, workspace_id: str, webhook_id: str, *, status: str | None,
                           limit: int, offset: int) -> tuple[list[dict], int]:
    where: dict = {"webhook_id": webhook_id, "workspace_id": workspace_id}
    if status is not None:
        where["status"] = status
    docs = await db.webhook_deliveries.find(
        where, {"body": 0}, sort=[("created_at", DESCENDING), ("_id", ASCENDING)],
        skip=offset, limit=limit).to_list()
    return docs, await db.webhook_deliveries.count_documents(where)


async def attempts_for(db: AsyncDatabase, delivery_ids: list[str]) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {d: [] for d in delivery_ids}
    if delivery_ids:
        for attempt in await db.webhook_attempts.find(
                {"delivery_id": {"$in": list(delivery_ids)}}, sort=[("at", ASCENDING), ("attempt", ASCENDING)]).to_list():
            found.setdefault(attempt["delivery_id"], []).append(attempt)
    return found
