"""Campaign parts (`_id` = `<campaign>:<batch>:<n>`): the unit a sending campaign is
rendered, sent and recorded by. The fan-out cuts each batch of the audience into parts of
up to RENDER_CHUNK recipients and stores each part born claimed by the render job it
publishes for it (`lease_token`, until `lease_until`); that job records each recipient's
message once, at its outcome (mongo/messages.insert_moved), then marks the part `done`.
No message document exists for a recipient before then: a campaign recipient costs the
store one insert, not an insert, a claim and an outcome update.

`due_ms` (integer epoch ms, indexed: the embedded store answers a range over one integer
field from its index) is when an open part's lease ends: past it, its job is taken for
lost and the scheduler hands the part to a new one (a new token; the old job, if it ever
runs, finds the part no longer its own). A part whose job found its campaign paused is
`held`: `due_ms` NEVER_MS (no job, none lost), until the resume (or a cancel) hands it to a
new job (take_over)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pymongo import ASCENDING, IndexModel
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import BulkWriteError

from pipelines.core.clock import ms_of, now_iso, now_ms
from pipelines.core.documents import Campaign, CampaignPart
from pipelines.messages.delivery_status import NEVER_MS

INDEXES = {
    "campaign_parts": [IndexModel([("campaign_id", ASCENDING), ("done", ASCENDING)], name="campaign_open"),
                       IndexModel([("due_ms", ASCENDING)], name="due_ms")],
}


def new_part(campaign: Campaign, batch: int, number: int, contact_ids: list[str], token: str,
             lease_until: str) -> CampaignPart:
    return {"_id": f"{campaign['_id']}:{batch}:{number}", "campaign_id": campaign["_id"],
            "workspace_id": campaign["workspace_id"], "contact_ids": contact_ids, "done": False,
            "lease_token": token, "lease_until": lease_until, "due_ms": ms_of(lease_until), "created_at": now_iso()}


async def insert_new(db: AsyncDatabase, parts: list[CampaignPart]) -> list[CampaignPart]:
    """Store the parts; those that exist already (a fan-out job run twice: the first run's
    jobs, or the scheduler, see to them) are skipped. Returns the parts stored now."""
    if not parts:
        return []
    try:
        await db.campaign_parts.insert_many(parts, ordered=False)
        return parts
    except BulkWriteError as error:
        if any(e.get("code") != 11000 for e in error.details.get("writeErrors", [])):
            raise
        existing = {parts[e["index"]]["_id"] for e in error.details["writeErrors"]}
        return [p for p in parts if p["_id"] not in existing]


async def load(db: AsyncDatabase, part_id: str) -> CampaignPart | None:
    return await db.campaign_parts.find_one({"_id": part_id})


async def extend(db: AsyncDatabase, part_id: str, token: str, lease_until: str) -> bool:
    """Our claim on an open part lasts until `lease_until` (guarded on our token)."""
    result = await db.campaign_parts.update_one(
        {"_id": part_id, "lease_token": token, "done": False},
        {"$set": {"lease_until": lease_until, "due_ms": ms_of(lease_until)}})
    return result.modified_count == 1


async def finish(db: AsyncDatabase, part_id: str, token: str) -> bool:
    """Every recipient of the part is recorded (guarded on our claim; True once only)."""
    result = await db.campaign_parts.update_one(
        {"_id": part_id, "lease_token": token, "done": False},
        {"$set": {"done": True, "due_ms": NEVER_MS, "finished_at": now_iso()}})
    return result.modified_count == 1


async def any_open(db: AsyncDatabase, campaign_id: str) -> bool:
    return await db.campaign_parts.find_one({"campaign_id": campaign_id, "done": False}, {"_id": 1}) is not None


async def lapsed(db: AsyncDatabase, limit: int = 200) -> list[dict]:
    """Open parts whose job's lease has run out."""
    found = await db.campaign_parts.find({"due_ms": {"$lt": now_ms()}}, {"contact_ids": 0},
                                         limit=limit, sort=[("due_ms", 1)]).to_list()
    return [p for p in found if not p["done"]]


async def take_over(db: AsyncDatabase, part: Mapping[str, Any], token: str, lease_until: str, *,
                    revival: bool = True) -> bool:
    """A lapsed or held part claimed under a new token (guarded on the old one: once
    only); `revival`: its job was lost (counted), not held by a pause."""
    update: dict = {"$set": {"lease_token": token, "lease_until": lease_until, "due_ms": ms_of(lease_until),
                             "held": False}}
    if revival:
        update["$inc"] = {"revivals": 1}
    result = await db.campaign_parts.update_one(
        {"_id": part["_id"], "lease_token": part["lease_token"], "done": False}, update)
    return result.modified_count == 1


async def hold(db: AsyncDatabase, part_id: str, token: str) -> bool:
    """Our part held while its campaign is paused (guarded on our claim): no job has it,
    the scheduler leaves it alone, the resume hands it on."""
    result = await db.campaign_parts.update_one(
        {"_id": part_id, "lease_token": token, "done": False},
        {"$set": {"held": True, "due_ms": NEVER_MS, "held_at": now_iso()}})
    return result.modified_count == 1


async def held(db: AsyncDatabase, campaign_id: str) -> list[dict]:
    """The campaign's open parts held by a pause (the `campaign_open` index; without their
    contact ids)."""
    found = await db.campaign_parts.find({"campaign_id": campaign_id, "done": False},
                                         {"contact_ids": 0}).to_list()
    return [p for p in found if p.get("held")]
