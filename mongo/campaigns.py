"""Campaign documents (`_id` = campaign UUID) and the queries over their messages.

Every state change is a guarded `find_one_and_update` on the expected state, so two
fronts, a scheduler and a redelivered actor never start, finish or cancel a campaign
twice. The fan-out's position (`batches_done`, the next batch number) is saved per
batch, guarded on the batch that ran, so a restarted worker resumes where the last one
stopped and two copies of one batch cannot both advance it."""

from __future__ import annotations

from pymongo import ASCENDING, DESCENDING, IndexModel, ReturnDocument
from pymongo.asynchronous.database import AsyncDatabase

from pipelines.campaigns import progress
from pipelines.campaigns.fanout import CANCELLABLE, PAUSABLE, RESUMABLE, SCHEDULABLE, STARTABLE
from pipelines.campaigns.stats import COUNTERS, PENDING_STATUSES
from pipelines.core.clock import ms_of, now_iso, now_ms
from pipelines.core.documents import Campaign
from pipelines.messages import delivery_status
from pipelines.messages.delivery_status import NEVER_MS

from . import campaign_parts, messages
from .documents import get_owned, newest_first

INDEXES: dict[str, list] = {
    "campaigns": [IndexModel([("workspace_id", ASCENDING), ("created_at", DESCENDING)], name="ws_created"),
                  # the console's list (documents.newest_first): equalities and the integer, sorted by it
                  IndexModel([("workspace_id", ASCENDING), ("created_ms", DESCENDING)], name="ws_created_ms"),
                  IndexModel([("workspace_id", ASCENDING), ("status", ASCENDING), ("created_ms", DESCENDING)],
                             name="ws_status_created_ms"),
                  # what the scheduler ranges over: integers (a date-like string in a filter makes the
                  # embedded store read the whole collection), each in an index of its own
                  IndexModel([("send_at_ms", ASCENDING)], name="send_at_ms"),
                  IndexModel([("updated_ms", ASCENDING)], name="updated_ms"),
                  # finish_campaigns' and refunds' finds: one field each (the embedded store
                  # reads every campaign for a find no single-field index answers)
                  IndexModel([("status", ASCENDING)], name="status"),
                  IndexModel([("refund_due_ms", ASCENDING)], name="refund_due_ms"),
                  IndexModel([("release_due_ms", ASCENDING)], name="release_due_ms")],
    "messages": [IndexModel([("campaign_id", ASCENDING), ("status", ASCENDING)], name="campaign_status")],
}
CANCELLED = "campaign cancelled"  # the history detail of a message its campaign's cancel stopped
PAUSED = "campaign paused"  # the history detail of a message parked while its campaign is paused


async def insert(db: AsyncDatabase, doc: Campaign) -> Campaign:
    await db.campaigns.insert_one(doc)
    return doc


async def get(db: AsyncDatabase, workspace_id: str, campaign_id: str) -> Campaign | None:
    return await get_owned(db.campaigns, workspace_id, campaign_id)


async def load(db: AsyncDatabase, campaign_id: str) -> Campaign | None:
    return await db.campaigns.find_one({"_id": campaign_id})


async def list_page(db: AsyncDatabase, workspace_id: str, status: str | None,
                    limit: int, offset: int) -> tuple[list[Campaign], int]:
    query: dict = {"workspace_id": workspace_id}
    if status:
        query["status"] = status
    items = await db.campaigns.find(query, sort=[("created_at", -1), ("_id", 1)],
                                    skip=offset, limit=limit).to_list()
    return items, await db.campaigns.count_documents(query)


async def newest(db: AsyncDatabase, workspace_id: str, status: str | None, after: tuple[int, str] | None,
                 limit: int) -> list[Campaign]:
    """The console's list: newest first after the cursor `after`, without a count, from
    `ws_created_ms` / `ws_status_created_ms` (documents.newest_first)."""
    return await newest_first(db.campaigns, {"workspace_id": workspace_id, **({"status": status} if status else {})},
                              after, limit)


async def message_histories(db: AsyncDatabase, workspace_id: str, campaign_id: str, limit: int) -> list[dict]:
    """The campaign's latest `limit` messages, each with what its progress chart reads
    (pipelines/campaigns/progress.py): an aggregate answered from GET /email's
    `ws_campaign_created_ms` index (a `find` on `campaign_id` reads every message here)."""
    pipeline: list[dict] = [
                {"$match": {"workspace_id": workspace_id, "campaign_id": campaign_id, "created_ms": {"$gte": 0}}},
                {"$sort": {"created_ms": -1}}, {"$limit": limit},
                {"$project": {field: 1 for field in progress.FIELDS}}]
    return await (await db.messages.aggregate(pipeline)).to_list()


def _times(changes: dict) -> dict:
    """The integer twins of a status change's times: `updated_ms`, and `send_at_ms`, when
    the scheduler must start it (NEVER_MS once it is no longer scheduled, so the due
    range holds only scheduled campaigns)."""
    times = {"updated_ms": now_ms()}
    if changes.get("status") == "scheduled":
        times["send_at_ms"] = ms_of(changes["send_at"])
    elif "status" in changes:
        times["send_at_ms"] = NEVER_MS
    return times


async def _guarded(db: AsyncDatabase, query: dict, changes: dict) -> Campaign | None:
    changes = {**changes, "updated_at": now_iso(), **_times(changes)}
    return await db.campaigns.find_one_and_update(query, {"$set": changes},
                                                  return_document=ReturnDocument.AFTER)


async def start_sending(db: AsyncDatabase, workspace_id: str, campaign_id: str, fields: dict) -> Campaign | None:
    """draft|scheduled → sending; None when the campaign was not in a startable state."""
    return await _guarded(db, {"_id": campaign_id, "workspace_id": workspace_id,
                               "status": {"$in": list(STARTABLE)}},
                          {**fields, "status": "sending", "started_at": now_iso()})


async def schedule(db: AsyncDatabase, workspace_id: str, campaign_id: str, send_at: str) -> Campaign | None:
    return await _guarded(db, {"_id": campaign_id, "workspace_id": workspace_id,
                               "status": {"$in": list(SCHEDULABLE)}},
                          {"status": "scheduled", "send_at": send_at})


async def cancel(db: AsyncDatabase, workspace_id: str, campaign_id: str) -> Campaign | None:
    """scheduled/sending/paused → cancelled (guarded): the campaign as cancelled, or None.
    Its parts held by a pause are due to be handed on (`release_due_ms`), so their jobs
    record their recipients cancelled."""
    return await _guarded(db, {"_id": campaign_id, "workspace_id": workspace_id,
                               "status": {"$in": list(CANCELLABLE)}},
                          {"status": "cancelled", "cancelled_at": now_iso(), "release_due_ms": now_ms()})


async def pause(db: AsyncDatabase, workspace_id: str, campaign_id: str) -> Campaign | None:
    """sending → paused (guarded): the campaign as paused, or None."""
    return await _guarded(db, {"_id": campaign_id, "workspace_id": workspace_id,
                               "status": {"$in": list(PAUSABLE)}},
                          {"status": "paused", "paused_at": now_iso()})


async def resume(db: AsyncDatabase, workspace_id: str, campaign_id: str) -> Campaign | None:
    """paused → sending (guarded): the campaign as sending again, or None. Its held parts
    are due to be handed on (`release_due_ms`) until the resume has done it
    (`parts_released`), so a front that dies in between leaves them to the scheduler."""
    return await _guarded(db, {"_id": campaign_id, "workspace_id": workspace_id,
                               "status": {"$in": list(RESUMABLE)}},
                          {"status": "sending", "resumed_at": now_iso(), "release_due_ms": now_ms()})


async def status_of(db: AsyncDatabase, campaign_id: str) -> str | None:
    """The campaign's status now (one `_id` read), None when it is gone."""
    found = await db.campaigns.find_one({"_id": campaign_id}, {"status": 1})
    return None if found is None else found["status"]


async def releases_due(db: AsyncDatabase, before_ms: int, limit: int = 50) -> list[Campaign]:
    """Campaigns resumed or cancelled before `before_ms` whose held parts were not all
    handed on (the resume's front died in between)."""
    return await db.campaigns.find({"release_due_ms": {"$lt": before_ms}}, {"_id": 1, "release_due_ms": 1},
                                   limit=limit).to_list()


async def parts_released(db: AsyncDatabase, campaign_id: str, due_ms: int) -> None:
    """The held parts due at `due_ms` were handed on (guarded on it: a later resume's stays due)."""
    await db.campaigns.update_one({"_id": campaign_id, "release_due_ms": due_ms},
                                  {"$set": {"release_due_ms": NEVER_MS}})


async def mark_refund_due(db: AsyncDatabase, campaign_id: str) -> None:
    """The scheduler gives back, once nothing of the cancelled campaign is in flight, what
    will never leave (`refunds_due`, `take_refund`)."""
    await db.campaigns.update_one({"_id": campaign_id, "status": "cancelled"},
                                  {"$set": {"refund_due": True, "refund_due_ms": now_ms()}})


async def refunds_due(db: AsyncDatabase, limit: int = 50) -> list[Campaign]:
    # on the integer (set while a refund is due): a find on the boolean read every campaign
    return await db.campaigns.find({"refund_due_ms": {"$lt": NEVER_MS}}, limit=limit).to_list()


async def take_refund(db: AsyncDatabase, campaign_id: str, count: int) -> bool:
    """Claim a cancelled campaign's refund once (guarded): True for the one caller that
    may give `count` back to the plan."""
    result = await db.campaigns.update_one({"_id": campaign_id, "refund_due": True},
                                           {"$set": {"refund_due": False, "refund_due_ms": NEVER_MS,
                                                     "plan_refunded": count,
                                                     "refunded_at": now_iso()}})
    return result.modified_count == 1


async def fail(db: AsyncDatabase, campaign_id: str, reason: str) -> Campaign | None:
    return await _guarded(db, {"_id": campaign_id, "status": {"$in": list(STARTABLE)}},
                          {"status": "failed", "failed_at": now_iso(), "failure_reason": reason})


async def complete(db: AsyncDatabase, campaign_id: str) -> Campaign | None:
    """sending → sent, once the fan-out is done (the caller checked nothing is pending)."""
    return await _guarded(db, {"_id": campaign_id, "status": "sending", "fanout_done": True},
                          {"status": "sent", "completed_at": now_iso()})


async def advance_cursor(db: AsyncDatabase, campaign_id: str, batch: int, *, created: int, done: bool) -> bool:
    """Batch `batch` is done: the cursor moves to the next, guarded on this one."""
    result = await db.campaigns.update_one(
        {"_id": campaign_id, "batches_done": batch},
        {"$set": {"fanout_done": done, "fanout_at": now_iso()},
         "$inc": {"batches_done": 1, "messages_created": created}})
    return result.modified_count == 1


async def record_audience(db: AsyncDatabase, campaign_id: str, token: str, total: int, batches: int) -> bool:
    """The audience resolved by the first fan-out job, kept once (guarded on none kept yet
    and on the campaign still sending): True for the one caller whose batches are used."""
    result = await db.campaigns.update_one(
        {"_id": campaign_id, "status": "sending", "audience_resolved": False},
        {"$set": {"audience_resolved": True, "recipients_token": token, "total_recipients": total,
                  "batches_queued": batches, "fanout_done": total == 0, "fanout_at": now_iso()}})
    return result.modified_count == 1


async def touch_fanout(db: AsyncDatabase, campaign_id: str) -> None:
    await db.campaigns.update_one({"_id": campaign_id}, {"$set": {"fanout_at": now_iso()}})


async def due_scheduled(db: AsyncDatabase, limit: int = 50) -> list[Campaign]:
    return await db.campaigns.find({"send_at_ms": {"$lte": now_ms()}, "status": "scheduled"},
                                   limit=limit, sort=[("send_at_ms", 1)]).to_list()


async def sending(db: AsyncDatabase, limit: int = 200) -> list[Campaign]:
    """Campaigns sending, or paused (what they had in flight still lands: their stats follow).
    One equality a status: the embedded store answers `status: {$in: …}` by reading every
    campaign (bench.store_scale's finish_campaigns tick, 1.6 → 15 ms from 1,000 to 20,000)."""
    found: list[Campaign] = []
    for status in ("sending", "paused"):
        found += await db.campaigns.find({"status": status}, limit=limit - len(found)).to_list()
        if len(found) >= limit:
            break
    return found


async def recently_finished(db: AsyncDatabase, since_ms: int, limit: int = 200) -> list[Campaign]:
    """Campaigns finished since `since_ms` (epoch ms): late outcomes (DSNs) still move their stats."""
    return await db.campaigns.find({"updated_ms": {"$gte": since_ms}, "status": {"$in": ["sent", "cancelled"]}},
                                   limit=limit).to_list()


async def bump(db: AsyncDatabase, campaign_id: str, **counters: int) -> None:
    unknown = set(counters) - set(COUNTERS)
    if unknown:
        raise ValueError(f"unknown campaign counter(s): {', '.join(sorted(unknown))}")
    fields = {k: int(v) for k, v in counters.items() if v}
    if fields:
        await db.campaigns.update_one({"_id": campaign_id}, {"$inc": fields})


async def refresh_status_counts(db: AsyncDatabase, campaign_id: str) -> dict[str, int]:
    """Count the campaign's messages per status and keep the snapshot on the campaign."""
    rows = await (await db.messages.aggregate([
        {"$match": {"campaign_id": campaign_id}},
        {"$group": {"_id": "$status", "n": {"$sum": 1}}}])).to_list()
    counts = {str(r["_id"]): int(r["n"]) for r in rows}
    await db.campaigns.update_one({"_id": campaign_id},
                                  {"$set": {"status_counts": counts, "stats_at": now_iso()}})
    return counts


async def has_pending_messages(db: AsyncDatabase, campaign_id: str) -> bool:
    """Some recipient is still to be recorded (a part not done: campaign_parts.py) or
    its message is queued or on the wire."""
    if await campaign_parts.any_open(db, campaign_id):
        return True
    found = await db.messages.find_one({"campaign_id": campaign_id,
                                        "status": {"$in": list(PENDING_STATUSES)}}, {"_id": 1})
    return found is not None


async def bump_created(db: AsyncDatabase, campaign_id: str, change: int) -> None:
    """Correct the count of recipients handed on to sending (`messages_created`)."""
    if change:
        await db.campaigns.update_one({"_id": campaign_id}, {"$inc": {"messages_created": change}})


async def cancel_unsent(db: AsyncDatabase, campaign_id: str) -> int:
    """Messages of a cancelled campaign that have not reached SMTP become `cancelled`.
    A message claimed for sending is left to finish: it may be on the wire — also one
    still `queued` under the born claim of its render or send job (delivery_status.born_claim),
    which cancels it itself unless it is sending it already; but not one born claimed by
    a delayed send job not due yet (a throttle hold, a deferral: delivery_status.not_held)."""
    docs = await db.messages.find({"campaign_id": campaign_id, "status": "queued"},
                                  {"_id": 1, "lease_token": 1, "job_due_ms": 1}).to_list()
    now = now_ms()
    unheld = [(d["_id"], guard) for d in docs if (guard := delivery_status.not_held(d, now)) is not None]
    if not unheld:
        return 0
    return await messages.apply(db, [delivery_status.cancel(mid, current="queued", detail=CANCELLED, guard=guard)
                                     for mid, guard in unheld])


async def withhold_stopped(db: AsyncDatabase, docs: list[dict]) -> list[dict]:
    """For the render and send steps: messages of cancelled campaigns are marked
    `cancelled`, those of paused campaigns parked (delivery_status.park: queued, waiting
    in the store for the resume), and both left out; the rest are returned. One query per
    call, none when no message belongs to a campaign."""
    campaign_ids = {d["campaign_id"] for d in docs if d.get("campaign_id")}
    if not campaign_ids:
        return docs
    stopped = {c["_id"]: c["status"] for c in await db.campaigns.find(
        {"_id": {"$in": list(campaign_ids)}, "status": {"$in": ["cancelled", "paused"]}}, {"status": 1}).to_list()}
    if not stopped:
        return docs
    mine = [d for d in docs if d.get("campaign_id") in stopped]
    await messages.apply(db, [delivery_status.cancel(d["_id"], current=d["status"], detail=CANCELLED,
                                                     claim=d.get("lease_token"))
                              for d in mine if stopped[d["campaign_id"]] == "cancelled"
                              and delivery_status.can_move(d["status"], "cancelled")]
                         + [delivery_status.park(d["_id"], current=d["status"], claim=d.get("lease_token") or "")
                            for d in mine if stopped[d["campaign_id"]] == "paused"
                            and d["status"] in delivery_status.sources("park")])
    return [d for d in docs if d.get("campaign_id") not in stopped]


async def unpark(db: AsyncDatabase, campaign_id: str) -> int:
    """A resumed campaign's parked messages are due now: the scheduler's due-retry pass
    (release_due_messages.promote_due_retries) renders them again. How many."""
    at = now_iso()
    result = await db.messages.update_many(
        {"campaign_id": campaign_id, "status": "queued", "parked": True},
        {"$set": {"next_attempt_at": at, "due_ms": ms_of(at), "parked": False}})
    return result.modified_count
