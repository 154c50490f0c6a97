"""Raw reports received by the inbound SMTP server (`inbound_reports`), kept whatever
becomes of them, and running totals per outcome (`inbound_stats`, one document).

A report: `_id` (uuid), mail_from, rcpt_tos, raw (the bytes as latin-1 text, which maps
every byte to one character and back), size_bytes, status (received → parsed |
unparseable | unmatched | failed), received_at, enqueued_at, processed_at, detail,
attempts (processing attempts so far), last_error; once known: message_id,
workspace_id, style (the report's format), bounce_ids, ignored_recipients (addresses the
report named that the message was not sent to)."""

from __future__ import annotations

from pymongo import ASCENDING, DESCENDING, IndexModel, ReturnDocument
from pymongo.asynchronous.database import AsyncDatabase

from pipelines.core.clock import ms_in, ms_of, now_iso
from pipelines.messages.delivery_status import NEVER_MS

INDEXES: dict[str, list] = {
    # `enqueued_ms`: the integer twin of enqueued_at the stale sweep ranges over (a date-like
    # string in a filter makes the embedded store read every report); NEVER_MS once processed
    "inbound_reports": [IndexModel([("enqueued_ms", ASCENDING)], name="enqueued_ms"),
                        IndexModel([("received_at", DESCENDING)], name="received")],
}
STATS_ID = "totals"
OUTCOMES = ("parsed", "unparseable", "unmatched", "failed")
STATUSES = ("received", *OUTCOMES)


def _enqueued_now() -> dict:
    at = now_iso()
    return {"enqueued_at": at, "enqueued_ms": ms_of(at)}


async def store(db: AsyncDatabase, doc: dict) -> None:
    await db.inbound_reports.insert_one({**doc, "enqueued_ms": ms_of(doc["enqueued_at"])})
    await db.inbound_stats.update_one({"_id": STATS_ID}, {"$inc": {"received": 1}}, upsert=True)


async def get(db: AsyncDatabase, report_id: str) -> dict | None:
    return await db.inbound_reports.find_one({"_id": report_id})


def raw_bytes(report: dict) -> bytes:
    return report["raw"].encode("latin-1")


async def claim(db: AsyncDatabase, report_id: str) -> dict | None:
    """One processing attempt of a report still `received`, counted in `attempts` before it
    starts (so an attempt that kills its worker counts too); None when it is not waiting."""
    return await db.inbound_reports.find_one_and_update(
        {"_id": report_id, "status": "received"},
        {"$inc": {"attempts": 1}, "$set": {"attempted_at": now_iso()}}, return_document=ReturnDocument.AFTER)


async def note_error(db: AsyncDatabase, report_id: str, error: str) -> None:
    await db.inbound_reports.update_one({"_id": report_id, "status": "received"}, {"$set": {"last_error": error}})


async def finish(db: AsyncDatabase, report_id: str, outcome: str, detail: str = "", **fields) -> bool:
    """received → outcome, once; the totals count it only on that first transition."""
    if outcome not in OUTCOMES:
        raise ValueError(outcome)
    result = await db.inbound_reports.update_one(
        {"_id": report_id, "status": "received"},
        {"$set": {"status": outcome, "detail": detail, "processed_at": now_iso(), "enqueued_ms": NEVER_MS,
                  **fields}})
    if result.modified_count:
        await db.inbound_stats.update_one({"_id": STATS_ID}, {"$inc": {outcome: 1}}, upsert=True)
    return bool(result.modified_count)


async def reopen(db: AsyncDatabase, report: dict) -> bool:
    """An unparseable, unmatched or failed report back to `received` with no attempts, to be
    processed again (by newer code); the totals move with it. False when it was not in
    that status any more (someone else reopened it)."""
    if report["status"] not in ("unparseable", "unmatched", "failed"):
        raise ValueError(report["status"])
    result = await db.inbound_reports.update_one(
        {"_id": report["_id"], "status": report["status"]},
        {"$set": {"status": "received", "attempts": 0, "last_error": "", "detail": "", **_enqueued_now()}})
    if result.modified_count:
        await db.inbound_stats.update_one({"_id": STATS_ID}, {"$inc": {report["status"]: -1}})
    return bool(result.modified_count)


async def list_reports(db: AsyncDatabase, *, status: str | None = None, workspace_id: str | None = None,
                       limit: int = 50) -> list[dict]:
    """Newest first, without the raw text."""
    query = {**({"status": status} if status else {}), **({"workspace_id": workspace_id} if workspace_id else {})}
    return await db.inbound_reports.find(query, {"raw": 0}, sort=[("received_at", -1), ("_id", 1)],
                                         limit=limit).to_list()


async def ids_with_status(db: AsyncDatabase, status: str) -> list[str]:
    return [d["_id"] for d in await db.inbound_reports.find({"status": status}, {"_id": 1}).to_list()]


async def stats(db: AsyncDatabase) -> dict:
    doc = await db.inbound_stats.find_one({"_id": STATS_ID}) or {}
    return {k: int(doc.get(k) or 0) for k in ("received", *OUTCOMES)}


async def stale_received(db: AsyncDatabase, older_than_seconds: int, limit: int = 200) -> list[str]:
    """Reports still `received` whose last enqueue is older than the given age (it was lost,
    or the bounces actor keeps failing); their `enqueued_at` moves to now so each one is
    handed out again at most once per that age."""
    cutoff = ms_in(-older_than_seconds)
    docs = await db.inbound_reports.find({"enqueued_ms": {"$lt": cutoff}, "status": "received"},
                                         {"_id": 1}, limit=limit).to_list()
    ids = [d["_id"] for d in docs]
    if ids:
        await db.inbound_reports.update_many({"_id": {"$in": ids}, "status": "received"},
                                             {"$set": _enqueued_now()})
    return ids
