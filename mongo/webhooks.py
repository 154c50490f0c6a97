"""Webhook subscriptions (`webhooks`), their deliveries (`webhook_deliveries`, `_id` =
`<event id>:<subscription id>`), one record per attempt (`webhook_attempts`), and one lane
per subscription (`webhook_lanes`, `_id` = the subscription id).

A delivery waits in its subscription's lane: `lane_due` (pipelines/webhook_events.lane_due)
orders a lane's deliveries by when they are due, so a lane's due work is one range of one
index. A turn of the lane claims each volley with a lease by moving `due_ms`/`lane_due` to the
lease's end (guarded on being due, by `_id`), so two turns never attempt one delivery at
once, and a turn that died leaves its deliveries due again when the lease ends.

A lane doc says whether a turn is in flight (`busy_ms`: until when its job is presumed
alive; `token`: that job's) and when the lane next needs one (`wake_ms`); `rev` counts
the notes of new work, so a turn that ends does not miss work noted meanwhile. Every
write to a delivery adds one to its `version` (mongo/versions.py: never a timestamp);
every filter on time compares integers (`*_ms`)."""

from __future__ import annotations

import uuid

from pymongo import ASCENDING, DESCENDING, IndexModel, InsertOne, ReturnDocument, UpdateOne
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import BulkWriteError

from pipelines.core.clock import now_iso, now_ms
from pipelines.core.documents import WebhookDelivery, WebhookLane, WebhookSubscription
from pipelines.webhooks.events import NEVER_MS, OFF_LANE, due_ms_of, lane_due, lane_range

from . import documents, grouped_reads, inbound_routes, versions
from .documents import get_owned, newest_first

INDEXES: dict[str, list] = {
    "webhooks": [IndexModel([("workspace_id", ASCENDING), ("active", ASCENDING), ("created_at", DESCENDING)],
                            name="ws_active_created")],
    "webhook_deliveries": [
        IndexModel([("webhook_id", ASCENDING), ("created_at", DESCENDING)], name="webhook_created"),
        IndexModel([("status", ASCENDING), ("next_attempt_at", ASCENDING)], name="status_due"),
        IndexModel([("lane_due", ASCENDING)], name="lane_due"),
        IndexModel([("due_ms", ASCENDING)], name="due_ms"),
        # the console's recent failures (documents.newest_first)
        IndexModel([("workspace_id", ASCENDING), ("status", ASCENDING), ("failed_ms", DESCENDING)],
                   name="ws_status_failed_ms")],
    "webhook_attempts": [IndexModel([("delivery_id", ASCENDING), ("attempt", ASCENDING)], name="delivery")],
    "webhook_lanes": [IndexModel([("wake_ms", ASCENDING)], name="wake_ms")],
}

# Ids per write when a whole lane is cancelled.
CANCEL_CHUNK = 500


# -- subscriptions ---------------------------------------------------------------------
async def create(db: AsyncDatabase, workspace_id: str, *, events: list[str], target_url: str,
                 secret_sealed: str, form: str) -> WebhookSubscription:
    return await documents.create(db.webhooks, workspace_id, {
        "events": list(events), "target_url": target_url, "secret_sealed": secret_sealed, "form": form,
        "active": True}, stamped=("secret_rotated_at",))


async def get(db: AsyncDatabase, workspace_id: str, webhook_id: str) -> WebhookSubscription | None:
    return await get_owned(db.webhooks, workspace_id, webhook_id, active=True)


async def delivery_target(db: AsyncDatabase, workspace_id: str, lane_id: str) -> WebhookSubscription | None:
    """What a lane delivers to: its active subscription, or the active inbound route
    whose lane it is (mongo/inbound_routes.py: a route is a subscription of its own)."""
    return await get(db, workspace_id, lane_id) or await inbound_routes.get(db, workspace_id, lane_id)


async def list_active(db: AsyncDatabase, workspace_id: str, *, event: str | None, limit: int,
                      offset: int) -> tuple[list[WebhookSubscription], int]:
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
    # The first chunk at once (what a client sees in the log); a longer backlog is
    # cancelled by the lane's next turn, in the worker, not inside this request.
    if await cancel_lane(db, webhook_id, chunks=1) == CANCEL_CHUNK:
        await note_work(db, {webhook_id: (workspace_id, now_ms())})
    return True


async def replace_secret(db: AsyncDatabase, workspace_id: str, webhook_id: str,
                         sealed: str, *, collection: str = "webhooks") -> WebhookSubscription | None:
    """The active subscription (or, `collection="inbound_routes"`, route) with a new sealed secret."""
    now = now_iso()
    return await db[collection].find_one_and_update(
        {"_id": webhook_id, "workspace_id": workspace_id, "active": True},
        {"$set": {"secret_sealed": sealed, "secret_rotated_at": now, "updated_at": now}},
        return_document=ReturnDocument.AFTER)


async def active_for_workspaces(db: AsyncDatabase, workspace_ids: list[str]) -> list[dict]:
    # read with the same reads of concurrent jobs (mongo/grouped_reads), after this one asked:
    # a subscription created before still sees the next event
    return await grouped_reads.find_in(db, "webhooks", "workspace_id", sorted(set(workspace_ids)),
                                       where={"active": True})


# -- deliveries --------------------------------------------------------------------------
async def _insert_new(collection, docs: list[dict]) -> None:
    """Insert, ignoring documents that already exist (a repeated dispatch or attempt)."""
    if not docs:
        return
    try:
        await collection.bulk_write([InsertOne(d) for d in docs], ordered=False)
    except BulkWriteError as error:
        if any(e.get("code") != 11000 for e in error.details.get("writeErrors", [])):
            raise


async def insert_deliveries(db: AsyncDatabase, docs: list[dict]) -> None:
    """Insert (ignoring deliveries that already exist: a repeated dispatch), then note the
    work on their lanes, so a lane whose job was not enqueued is still found when due."""
    await _insert_new(db.webhook_deliveries, [{**d, versions.FIELD: 0} for d in docs])
    earliest: dict[str, tuple[str, int]] = {}
    for d in docs:
        seen = earliest.get(d["webhook_id"])
        if seen is None or d["due_ms"] < seen[1]:
            earliest[d["webhook_id"]] = (d["workspace_id"], d["due_ms"])
    await note_work(db, earliest)


async def due_in_lane(db: AsyncDatabase, webhook_id: str, limit: int) -> list[str]:
    """Ids of the lane's deliveries due now, earliest first (one `lane_due` range)."""
    docs = await db.webhook_deliveries.find({"lane_due": lane_range(webhook_id, now_ms())}, {"_id": 1},
                                            sort=[("lane_due", ASCENDING)], limit=limit).to_list()
    return [d["_id"] for d in docs]


async def claim(db: AsyncDatabase, webhook_id: str, delivery_ids: list[str], token: str,
                lease_seconds: float) -> list[WebhookDelivery]:
    """Lease the lane's given deliveries that are still pending and due (by `_id`): their
    due time moves to the lease's end. Returns the ones this call took (with their
    bodies); a delivery another turn holds, that is finished, or not due is left out."""
    if not delivery_ids:
        return []
    now = now_ms()
    until = now + int(lease_seconds * 1000)
    await db.webhook_deliveries.update_many(
        {"_id": {"$in": list(delivery_ids)}, "status": "pending", "due_ms": {"$lte": now}},
        versions.bump({"$set": {"locked_by": token, "due_ms": until, "lane_due": lane_due(webhook_id, until),
                                "updated_at": now_iso()}}))
    return await db.webhook_deliveries.find({"_id": {"$in": list(delivery_ids)}, "locked_by": token}).to_list()


async def finish(db: AsyncDatabase, token: str, outcomes: list[tuple[str, dict]]) -> int:
    """Apply each attempt's outcome `(delivery id, changes)`, only where `token` still
    holds the lease. Returns how many were applied."""
    if not outcomes:
        return 0
    result = await db.webhook_deliveries.bulk_write(
        [UpdateOne({"_id": delivery_id, "locked_by": token, "status": "pending"}, versions.bump({"$set": changes}))
         for delivery_id, changes in outcomes], ordered=False)
    return result.modified_count


async def record_attempts(db: AsyncDatabase, attempts: list[dict]) -> None:
    """One record per attempt; the same attempt recorded again (a turn run twice) is ignored."""
    await _insert_new(db.webhook_attempts, attempts)


async def next_due_in_lane(db: AsyncDatabase, webhook_id: str) -> int:
    """When the lane's earliest waiting delivery is due (a leased one: when its lease
    ends); NEVER_MS when it has none."""
    doc = await db.webhook_deliveries.find_one({"lane_due": lane_range(webhook_id)}, {"lane_due": 1},
                                               sort=[("lane_due", ASCENDING)])
    return NEVER_MS if doc is None else due_ms_of(doc["lane_due"])


async def cancel_lane(db: AsyncDatabase, webhook_id: str, *, chunks: int | None = None) -> int:
    """Every delivery waiting in the lane (or the first `chunks` × CANCEL_CHUNK) ends
    `cancelled` (its subscription is gone); found through the lane's index and written by
    `_id`. Returns how many were cancelled."""
    cancelled, rounds = 0, 0
    while chunks is None or rounds < chunks:
        rounds += 1
        docs = await db.webhook_deliveries.find({"lane_due": lane_range(webhook_id)}, {"_id": 1},
                                                limit=CANCEL_CHUNK).to_list()
        if not docs:
            return cancelled
        result = await db.webhook_deliveries.update_many(
            {"_id": {"$in": [d["_id"] for d in docs]}, "status": "pending"},
            versions.bump({"$set": {"status": "cancelled", "locked_by": "", "due_ms": NEVER_MS,
                                    "lane_due": OFF_LANE, "updated_at": now_iso()}}))
        if not result.modified_count:  # finished meanwhile by a turn: it left the lane itself
            return cancelled
        cancelled += result.modified_count
    return cancelled


async def reopen_failed(db: AsyncDatabase, delivery_id: str) -> dict | None:
    """An operator's replay: failed → pending, due now, attempts from 0 again (guarded on
    `failed`, so two replays make one), and its lane told. The delivery without its body;
    None when it is not failed (or does not exist)."""
    doc = await db.webhook_deliveries.find_one({"_id": delivery_id},
                                               {"status": 1, "replays": 1, "webhook_id": 1, "workspace_id": 1})
    if doc is None or doc["status"] != "failed":
        return None
    now, due = now_iso(), now_ms()
    result = await db.webhook_deliveries.update_one(
        {"_id": delivery_id, "status": "failed"},
        versions.bump({"$set": {"status": "pending", "attempt_count": 0, "next_attempt_at": now, "due_ms": due,
                                "lane_due": lane_due(doc["webhook_id"], due), "locked_by": "", "replayed_at": now,
                                "updated_at": now, "replays": int(doc.get("replays") or 0) + 1}}))
    if result.modified_count != 1:
        return None
    await note_work(db, {doc["webhook_id"]: (doc["workspace_id"], due)})
    return await db.webhook_deliveries.find_one({"_id": delivery_id}, {"body": 0})


async def oldest_due(db: AsyncDatabase) -> dict | None:
    """The pending delivery that has been due longest (an index range on `due_ms`)."""
    return await db.webhook_deliveries.find_one(
        {"due_ms": {"$lte": now_ms()}, "status": "pending"},
        {"_id": 1, "next_attempt_at": 1, "workspace_id": 1, "event": 1}, sort=[("due_ms", ASCENDING)])


# -- lanes -----------------------------------------------------------------------------------
async def note_work(db: AsyncDatabase, lanes: dict[str, tuple[str, int]]) -> None:
    """`{subscription id: (workspace id, due ms)}`: each lane has work due then. Creates
    the lane if needed; counts a note (`rev`) so a turn ending meanwhile takes another."""
    if lanes:
        await db.webhook_lanes.bulk_write([
            UpdateOne({"_id": webhook_id}, {"$set": {"workspace_id": workspace_id}, "$inc": {"rev": 1},
                                            "$min": {"wake_ms": due}, "$max": {"busy_ms": 0}}, upsert=True)
            for webhook_id, (workspace_id, due) in lanes.items()], ordered=False)


async def take_turns(db: AsyncDatabase, webhook_ids: list[str], lease_seconds: float) -> list[tuple[str, str]]:
    """Give each idle lane with work due a turn (guarded: no job in flight): `(lane,
    token)` for each one taken, whose job the caller must enqueue."""
    now = now_ms()
    taken = []
    for webhook_id in dict.fromkeys(webhook_ids):
        token = uuid.uuid4().hex
        result = await db.webhook_lanes.update_one(
            {"_id": webhook_id, "busy_ms": {"$lte": now}, "wake_ms": {"$lte": now}},
            {"$set": {"busy_ms": now + int(lease_seconds * 1000), "token": token}})
        if result.modified_count == 1:
            taken.append((webhook_id, token))
    return taken


async def release_turns(db: AsyncDatabase, turns: list[tuple[str, str]]) -> None:
    """Turns whose job never reached the broker: the lanes are free again at once (the
    scheduler's next pass tries again), not only when their lease ends."""
    for webhook_id, token in turns:
        await db.webhook_lanes.update_one({"_id": webhook_id, "token": token}, {"$set": {"busy_ms": 0, "token": ""}})


async def idle_lanes_due(db: AsyncDatabase, limit: int = 500) -> list[str]:
    """Lanes with work due and no job in flight (none enqueued, or its job was lost)."""
    now = now_ms()
    docs = await db.webhook_lanes.find({"wake_ms": {"$lte": now}, "busy_ms": {"$lte": now}}, {"_id": 1},
                                       sort=[("wake_ms", ASCENDING)], limit=limit).to_list()
    return [d["_id"] for d in docs]


async def lane(db: AsyncDatabase, webhook_id: str) -> WebhookLane | None:
    return await db.webhook_lanes.find_one({"_id": webhook_id})


async def extend_turn(db: AsyncDatabase, webhook_id: str, token: str, lease_seconds: float) -> bool:
    """The turn's job goes on (it is enqueued again): while `token` still holds the lane."""
    result = await db.webhook_lanes.update_one(
        {"_id": webhook_id, "token": token}, {"$set": {"busy_ms": now_ms() + int(lease_seconds * 1000)}})
    return result.modified_count == 1


async def end_turn(db: AsyncDatabase, webhook_id: str, token: str, rev: int, wake_ms: int) -> bool:
    """Free the lane, next needed at `wake_ms`: only while `token` holds it and no work
    was noted since the turn read `rev` (else the caller takes another turn)."""
    result = await db.webhook_lanes.update_one(
        {"_id": webhook_id, "token": token, "rev": rev},
        {"$set": {"busy_ms": 0, "token": "", "wake_ms": wake_ms}})
    return result.modified_count == 1


async def list_for_webhook(db: AsyncDatabase, workspace_id: str, webhook_id: str, *, status: str | None,
                           limit: int, offset: int) -> tuple[list[dict], int]:
    """A page of the subscription's deliveries, newest first, without their bodies."""
    where: dict = {"webhook_id": webhook_id, "workspace_id": workspace_id}
    if status is not None:
        where["status"] = status
    docs = await db.webhook_deliveries.find(
        where, {"body": 0}, sort=[("created_at", DESCENDING), ("_id", ASCENDING)],
        skip=offset, limit=limit).to_list()
    return docs, await db.webhook_deliveries.count_documents(where)


async def recent_failures(db: AsyncDatabase, workspace_id: str, limit: int) -> list[dict]:
    """The workspace's deliveries that failed for good, the latest first, without their bodies."""
    return await newest_first(db.webhook_deliveries, {"workspace_id": workspace_id, "status": "failed"}, None, limit,
                              field="failed_ms", projection={"body": 0})


async def delivery_of(db: AsyncDatabase, workspace_id: str, delivery_id: str) -> dict | None:
    """The workspace's delivery, without its body."""
    return await db.webhook_deliveries.find_one({"_id": delivery_id, "workspace_id": workspace_id}, {"body": 0})


async def attempts_for(db: AsyncDatabase, delivery_ids: list[str]) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {d: [] for d in delivery_ids}
    if delivery_ids:
        in_order = [("at", ASCENDING), ("attempt", ASCENDING)]
        for attempt in await db.webhook_attempts.find(
                {"delivery_id": {"$in": list(delivery_ids)}}, sort=in_order).to_list():
            found.setdefault(attempt["delivery_id"], []).append(attempt)
    return found
