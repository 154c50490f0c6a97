"""Batches of transactional email (POST /email/batch): one document per batch whose flat
counters are bumped by `_id` as its messages finish, so GET /email/batch/:id never scans
messages.

Counters: `total`; `pending` (not finished yet); `sent` (accepted by the receiving
server); one per final outcome: `delivered`, `bounced`, `failed`, `suppressed`,
`cancelled`; `finished` (sum of the final outcomes). `completed_at` is set once
`finished` reaches `total`."""

from __future__ import annotations

from collections import Counter

from pymongo import UpdateOne
from pymongo.asynchronous.database import AsyncDatabase

from pipelines.core.clock import now_iso
from pipelines.core.documents import Batch
from pipelines.messages.delivery_status import BATCH_OUTCOMES

INDEXES: dict[str, list] = {}  # read and bumped by `_id` only


def new_batch(batch_id: str, workspace_id: str, key_id: str | None, message_ids: list[str],
              statuses: list[str]) -> Batch:
    """The batch document; messages already final at creation (e.g. suppressed) count at once."""
    now = now_iso()
    final = Counter(status for status in statuses if status in BATCH_OUTCOMES)
    finished = sum(final.values())
    return {"_id": batch_id, "workspace_id": workspace_id, "key_id": key_id,
            "message_ids": message_ids, "total": len(message_ids), "pending": len(statuses) - finished, "sent": 0,
            "delivered": final["delivered"], "bounced": final["bounced"], "failed": final["failed"],
            "suppressed": final["suppressed"], "cancelled": final["cancelled"],
            "finished": finished, "created_at": now, "completed_at": now if finished == len(message_ids) else ""}


async def insert(db: AsyncDatabase, doc: Batch) -> None:
    await db.batches.insert_one(doc)


async def get(db: AsyncDatabase, workspace_id: str, batch_id: str) -> Batch | None:
    return await db.batches.find_one({"_id": batch_id, "workspace_id": workspace_id},
                                     {"message_ids": 0})


async def record_finished(db: AsyncDatabase, finished: list[tuple[dict, str]]) -> None:
    """Count messages reaching a final outcome: [(message document, outcome)]. Callers
    hold the message's guarded transition, so each message is counted once."""
    per_batch: dict[str, Counter] = {}
    for message, outcome in finished:
        batch_id = message.get("batch_id")
        if not batch_id or outcome not in BATCH_OUTCOMES:
            continue
        counts = per_batch.setdefault(batch_id, Counter())
        counts[outcome] += 1
        counts["finished"] += 1
        counts["pending"] -= 1
        if outcome == "delivered":
            counts["sent"] += 1
    if not per_batch:
        return
    # `last_finished_at` in the same single-document write as the counts: the write that
    # finishes a batch is the last one applied to it, so a reader that sees the batch done
    # always has its completion time (completed_at below follows in a second write).
    at = now_iso()
    await db.batches.bulk_write(
        [UpdateOne({"_id": b}, {"$inc": dict(c), "$set": {"last_finished_at": at}}) for b, c in per_batch.items()],
        ordered=False)
    done = await db.batches.find({"_id": {"$in": list(per_batch)}, "completed_at": ""},
                                 {"total": 1, "finished": 1}).to_list()
    complete = [d["_id"] for d in done if d["finished"] >= d["total"]]
    if complete:
        await db.batches.update_many({"_id": {"$in": complete}, "completed_at": ""},
                                     {"$set": {"completed_at": now_iso()}})
