"""Raw reports received by the inbound SMTP server (`inbound_reports`), kept whatever
becomes of them, and running totals per outcome (`inbound_stats`, one document).

A report: `_id` (uuid), mail_from, rcpt_tos, raw (the bytes as latin-1 text, which maps
every byte to one character and back), size_bytes, status (received → parsed |
unparseable | unmatched), received_at, enqueued_at, processed_at, detail."""

from __future__ import annotations

from pymongo import ASCENDING, IndexModel
from pymongo.asynchronous.database import AsyncDatabase

from pipelines.clock import in_seconds, now_iso

INDEXES: dict[str, list] = {
    "inbound_reports": [IndexModel([("status", ASCENDING), ("enqueued_at", ASCENDING)], name="status_enqueued")],
}
STATS_ID = "totals"
OUTCOMES = ("parsed", "unparseable", "unmatched")


async def store(db: AsyncDatabase, doc: dict) -> None:
    await db.inbound_reports.insert_one(doc)
    await db.inbound_stats.update_one({"_id": STATS_ID}, {"$inc": {"received": 1}}, upsert=True)


async def get(db: AsyncDatabase, report_id: str) -> dict | None:
    return await db.inbound_reports.find_one({"_id": report_id})


def raw_bytes(report: dict) -> bytes:
    return report["raw"].encode("latin-1")


async def finish(db: AsyncDatabase, report_id: str, outcome: str, detail: str = "", **fields) -> bool:
    """received → outcome, once; the totals count it only on that first transition."""
    if outcome not in OUTCOMES:
        raise ValueError(outcome)
    result = await db.inbound_reports.update_one(
        {"_id": report_id, "status": "received"},
        {"$set": {"status": outcome, "detail": detail, "processed_at": now_iso(), **fields}})
    if result.modified_count:
        await db.inbound_stats.update_one({"_id": STATS_ID}, {"$inc": {outcome: 1}}, upsert=True)
    return bool(result.modified_count)


async def stats(db: AsyncDatabase) -> dict:
    doc = await db.inbound_stats.find_one({"_id": STATS_ID}) or {}
    return {k: int(doc.get(k) or 0) for k in ("received", *OUTCOMES)}


async def stale_received(db: AsyncDatabase, older_than_seconds: int, limit: int = 200) -> list[str]:
    """Reports still `received` whose last enqueue is older than the given age (it was lost,
    or the bounces actor keeps failing); their `enqueued_at` moves to now so each one is
    handed out again at most once per that age."""
    cutoff = in_seconds(-older_than_seconds)
    docs = await db.inbound_reports.find({"status": "received", "enqueued_at": {"$lt": cutoff}},
                                         {"_id": 1}, limit=limit).to_list()
    ids = [d["_id"] for d in docs]
    if ids:
        await db.inbound_reports.update_many({"_id": {"$in": ids}, "status": "received"},
                                             {"$set": {"enqueued_at": now_iso()}})
    return ids
