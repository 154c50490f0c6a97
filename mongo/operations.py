"""What an operator asks of the store (`postroom status`, `webhooks failed|replay`,
`messages failed`): the oldest waiting items, messages by status, what is stuck, and the
work that failed for good. Every query here goes through an index (messages: their
integer scheduler times `due_ms` / `stall_ms`, pipelines/delivery_status.watch;
webhook_deliveries: their integer `due_ms`), and counts are lengths of bounded `find`s, not
`count_documents` (which scans on the embedded store)."""

from __future__ import annotations

from pymongo import ASCENDING, DESCENDING
from pymongo.asynchronous.database import AsyncDatabase

from pipelines.core.clock import ms_of, now_ms, parse_iso, utcnow
from pipelines.messages.delivery_status import NEVER_MS

from . import outbox, webhooks

# Counts of stuck things stop at this many (the screen says "≥ N").
COUNT_CAP = 10_000


def age_seconds(iso: str | None) -> float | None:
    if not iso:
        return None
    return round((utcnow() - parse_iso(iso)).total_seconds(), 1)


async def _first(collection, where: dict, field: str, projection: tuple[str, ...] = (), *,
                 sort_by: str | None = None) -> dict | None:
    """The first match by `sort_by` (default `field`), with `field` and its age."""
    doc = await collection.find_one(where, {"_id": 1, field: 1, **{p: 1 for p in projection}},
                                    sort=[(sort_by or field, ASCENDING)])
    return _shown(doc, field, projection)


def _shown(doc: dict | None, field: str, projection: tuple[str, ...]) -> dict | None:
    if doc is None:
        return None
    return {"id": doc["_id"], field: doc[field], "age_seconds": age_seconds(doc[field]),
            **{p: doc.get(p) for p in projection}}


async def oldest_waiting(db: AsyncDatabase) -> dict:
    """The oldest message waiting in `queued` (since its last change; not one waiting for
    its next SMTP attempt), and the oldest item that is due but not yet promoted: a
    scheduled message, a webhook delivery."""
    return {
        "queued_message": await _first(db.messages, {"stall_ms": {"$lt": NEVER_MS}, "status": "queued"},
                                       "updated_at", ("workspace_id",), sort_by="stall_ms"),
        "due_scheduled_message": await _first(db.messages, {"due_ms": {"$lte": now_ms()}, "status": "scheduled"},
                                              "due_at", ("workspace_id",), sort_by="due_ms"),
        "due_webhook_delivery": _shown(await webhooks.oldest_due(db), "next_attempt_at", ("workspace_id", "event")),
    }


async def messages_by_status_since(db: AsyncDatabase, since_iso: str) -> dict[str, int]:
    """Messages whose status last changed since `since_iso`, by that status."""
    cursor = await db.messages.aggregate([{"$match": {"updated_ms": {"$gte": ms_of(since_iso)}}},
                                          {"$group": {"_id": "$status", "count": {"$sum": 1}}}])
    rows = await cursor.to_list()
    return {r["_id"]: int(r["count"]) for r in sorted(rows, key=lambda r: str(r["_id"]))}


async def _bounded_count(collection, where: dict) -> int:
    return len(await collection.find(where, {"_id": 1}, limit=COUNT_CAP).to_list())


async def _counted_up_to(collection, where: dict) -> int:
    """How many match, up to COUNT_CAP: `$count` over one indexed integer range, which the
    embedded store answers from the index (no documents travel, none is read whole)."""
    counted = await (await collection.aggregate([{"$match": where}, {"$limit": COUNT_CAP},
                                                 {"$count": "n"}])).to_list()
    return int(counted[0]["n"]) if counted else 0


async def backlogs(db: AsyncDatabase) -> dict[str, int]:
    """Work waiting now, each up to COUNT_CAP, as ranges over integer `*_ms` fields: webhook
    deliveries due, outbox events not yet read by the webhook fan-out or by automations,
    automation runs due."""
    now = now_ms()
    return {
        "webhook_deliveries_due": await _counted_up_to(db.webhook_deliveries, {"due_ms": {"$lte": now}}),
        "outbox_for_webhooks": await _counted_up_to(db.outbox, {outbox.DISPATCH_MS: {"$lt": NEVER_MS}}),
        "outbox_for_automations": await _counted_up_to(db.outbox, {outbox.AUTOMATIONS_MS: {"$lt": NEVER_MS}}),
        "automation_runs_due": await _counted_up_to(db.automation_runs, {"wake_ms": {"$lte": now}}),
    }


async def open_automation_runs(db: AsyncDatabase) -> dict[str, int]:
    """Automation runs now, each up to COUNT_CAP: `active` (neither ended nor paused: only
    those have a wake time, pipelines/automations/runs.py) and, of those, `waiting` (a
    delay, an event, a webhook retry); from the runs' `wake` and `phase_wake` indexes."""
    in_flight = {"wake_ms": {"$lt": NEVER_MS}}
    return {"active": await _counted_up_to(db.automation_runs, in_flight),
            "waiting": await _counted_up_to(db.automation_runs, {"phase": "waiting", **in_flight})}


async def stuck(db: AsyncDatabase) -> dict[str, int]:
    lapsed = await db.messages.find({"due_ms": {"$lte": now_ms()}, "status": "sending"}, {"_id": 1},
                                    limit=COUNT_CAP).to_list()
    return {
        "messages_sending_past_lease": len(lapsed),
        "inbound_reports_unparseable": await _bounded_count(db.inbound_reports, {"status": "unparseable"}),
        "inbound_reports_failed": await _bounded_count(db.inbound_reports, {"status": "failed"}),
        "webhook_deliveries_failed": await _bounded_count(db.webhook_deliveries, {"status": "failed"}),
    }


# -- what failed for good ----------------------------------------------------------------

async def failed_deliveries(db: AsyncDatabase, workspace_id: str | None, limit: int) -> list[dict]:
    where: dict = {"status": "failed"}
    if workspace_id:
        where["workspace_id"] = workspace_id
    return await db.webhook_deliveries.find(where, {"body": 0}, sort=[("failed_at", DESCENDING)],
                                            limit=limit).to_list()


async def failed_delivery_ids(db: AsyncDatabase, workspace_id: str | None) -> list[str]:
    where: dict = {"status": "failed"}
    if workspace_id:
        where["workspace_id"] = workspace_id
    return [d["_id"] for d in await db.webhook_deliveries.find(where, {"_id": 1}).to_list()]


async def replay_delivery(db: AsyncDatabase, delivery_id: str) -> dict | None:
    """failed → pending, due now, attempts from 0 again (guarded on `failed`, so two
    replays make one); its lane gets a turn on the scheduler's next pass. None when the
    delivery is not failed (or does not exist)."""
    return await webhooks.reopen_failed(db, delivery_id)


async def failed_messages(db: AsyncDatabase, workspace_id: str | None, since_iso: str | None,
                          limit: int) -> list[dict]:
    # one flat filter: the embedded store answers {status, updated_ms range, ...} from the
    # updated_ms index, but reads every message for the same as an `$and` (834 ms at 30,000)
    where: dict = {"status": "failed"}
    if since_iso:
        where["updated_ms"] = {"$gte": ms_of(since_iso)}
    if workspace_id:
        where["workspace_id"] = workspace_id
    return await db.messages.find(
        where, {"_id": 1, "workspace_id": 1, "to": 1, "subject": 1, "error": 1, "last_error": 1,
                "updated_at": 1, "failed_at": 1, "campaign_id": 1, "history": 1},
        sort=[("updated_ms", DESCENDING)], limit=limit).to_list()
