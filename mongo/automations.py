"""Automations: one document each, its steps kept inside it in order.

    _id, workspace_id, name, status (draft | active | paused), trigger_type, trigger_config,
    steps [{id, step_type, config}] (position = index), version (integer, +1 per write),
    deleted (bool), deleted_at, key_id and sandbox (of the key that created it: its email
    steps send as that kind of key), created_at, updated_at, activated_at

Steps are written as the whole array, guarded on `version` (compare-and-set): two editors
cannot interleave a reorder and an insert, and the embedded store corrupts arrays of
sub-documents changed with `$push`. A deleted automation keeps its document (`deleted`)
and vanishes from every read."""

from __future__ import annotations

from pymongo import ASCENDING, DESCENDING, IndexModel, ReturnDocument
from pymongo.asynchronous.database import AsyncDatabase

from pipelines.core.clock import now_iso
from pipelines.core.ids import new_uuid

INDEXES: dict[str, list] = {
    "automations": [
        IndexModel([("workspace_id", ASCENDING), ("deleted", ASCENDING), ("created_at", DESCENDING)],
                   name="ws_live_created"),
        # the trigger pass: a workspace's automations of a trigger type; the daily date pass
        IndexModel([("workspace_id", ASCENDING), ("trigger_type", ASCENDING)], name="ws_trigger"),
        IndexModel([("trigger_type", ASCENDING), ("status", ASCENDING)], name="trigger_status"),
    ],
}


def new_document(workspace_id: str, *, name: str, trigger_type: str, trigger_config: dict,
                 steps: list[dict], key_id: str, sandbox: bool) -> dict:
    now = now_iso()
    return {"_id": new_uuid(), "workspace_id": workspace_id, "name": name, "status": "draft",
            "trigger_type": trigger_type, "trigger_config": trigger_config, "steps": steps, "version": 0,
            "deleted": False, "deleted_at": None, "key_id": key_id, "sandbox": sandbox,
            "created_at": now, "updated_at": now, "activated_at": None}


async def insert(db: AsyncDatabase, doc: dict) -> dict:
    await db.automations.insert_one(doc)
    return doc


def _live(workspace_id: str, automation_id: str) -> dict:
    return {"_id": automation_id, "workspace_id": workspace_id, "deleted": False}


async def get(db: AsyncDatabase, workspace_id: str, automation_id: str) -> dict | None:
    return await db.automations.find_one(_live(workspace_id, automation_id))


async def load_many(db: AsyncDatabase, automation_ids: list[str]) -> dict[str, dict]:
    """By id, deleted ones included (a run's engine decides what a deleted one means)."""
    docs = await db.automations.find({"_id": {"$in": list(automation_ids)}}).to_list()
    return {d["_id"]: d for d in docs}


async def page(db: AsyncDatabase, workspace_id: str, status: str | None, *, limit: int,
               offset: int) -> tuple[list[dict], int]:
    query: dict = {"workspace_id": workspace_id, "deleted": False}
    if status:
        query["status"] = status
    items = await db.automations.find(query, sort=[("created_at", DESCENDING), ("_id", ASCENDING)],
                                      skip=offset, limit=limit).to_list()
    return items, await db.automations.count_documents(query)


async def update(db: AsyncDatabase, workspace_id: str, automation_id: str, version: int,
                 changes: dict) -> dict | None:
    """Apply `changes` (steps, name, status, trigger…) if the automation is still at
    `version`; None when another write came first (or it is gone)."""
    return await db.automations.find_one_and_update(
        {**_live(workspace_id, automation_id), "version": version},
        {"$set": {**changes, "version": version + 1, "updated_at": now_iso()}},
        return_document=ReturnDocument.AFTER)


async def soft_delete(db: AsyncDatabase, workspace_id: str, automation_id: str) -> dict | None:
    now = now_iso()
    return await db.automations.find_one_and_update(
        _live(workspace_id, automation_id),
        {"$set": {"deleted": True, "deleted_at": now, "updated_at": now}, "$inc": {"version": 1}},
        return_document=ReturnDocument.AFTER)


async def triggered_by(db: AsyncDatabase, workspace_ids: list[str], trigger_types: list[str]) -> list[dict]:
    """Active automations of these workspaces with one of these trigger types."""
    if not workspace_ids or not trigger_types:
        return []
    return await db.automations.find({"workspace_id": {"$in": sorted(set(workspace_ids))},
                                      "trigger_type": {"$in": sorted(set(trigger_types))},
                                      "status": "active", "deleted": False}).to_list()


async def active_of_type(db: AsyncDatabase, trigger_type: str) -> list[dict]:
    return await db.automations.find({"trigger_type": trigger_type, "status": "active",
                                      "deleted": False}).to_list()


async def run_stats(db: AsyncDatabase, automation_id: str) -> dict:
    """Counts of the automation's runs: per status, and per step how many runs are at it
    (active or paused there), passed it, and failed at it. Read from the runs (single-field
    groups over the (automation_id, …) index), so they are right by construction."""
    async def grouped(match: dict, field: str, unwind: bool = False) -> dict[str, int]:
        pipeline: list[dict] = [{"$match": {"automation_id": automation_id, **match}}]
        if unwind:
            pipeline.append({"$unwind": f"${field}"})
        pipeline.append({"$group": {"_id": f"${field}", "n": {"$sum": 1}}})
        return {row["_id"]: row["n"] for row in await (await db.automation_runs.aggregate(pipeline)).to_list()}

    return {"by_status": await grouped({}, "status"),
            "at": await grouped({"status": {"$in": ["active", "paused"]}}, "step_id"),
            "failed_at": await grouped({"status": "failed"}, "step_id"),
            "passed": await grouped({}, "passed_steps", unwind=True)}


def new_step_id() -> str:
    return "step_" + new_uuid().replace("-", "")[:16]


# -- date_attribute triggers --------------------------------------------------------------------

async def date_pass_done(db: AsyncDatabase, pass_id: str) -> bool:
    """Whether the daily pass `<automation>:<day>` ran (a pass cut short runs again: its
    run ids are derived, so it starts nobody twice)."""
    return await db.automation_date_passes.find_one({"_id": pass_id}) is not None


async def mark_date_pass(db: AsyncDatabase, pass_id: str) -> None:
    await db.automation_date_passes.update_one({"_id": pass_id}, {"$set": {"at": now_iso()}}, upsert=True)


async def contacts_with_date(db: AsyncDatabase, workspace_id: str, attribute: str, pattern: str,
                             after_id: str | None, limit: int) -> list[dict]:
    """Live contacts whose `attributes.<attribute>` matches `pattern` (an anniversary), in
    `_id` order after `after_id`. A regex over the workspace's contacts, once a day per
    date automation: no index can answer "this month and day of any year"."""
    conditions: list[dict] = [{f"attributes.{attribute}": {"$regex": pattern}}]
    if after_id is not None:
        conditions.append({"_id": {"$gt": after_id}})
    return await db.contacts.find({"$and": [{"workspace_id": workspace_id, "deleted": False}, *conditions]},
                                  {"_id": 1, "email": 1, "attributes": 1}, sort=[("_id", ASCENDING)],
                                  limit=limit).to_list()
