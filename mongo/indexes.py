"""Every index the queries in mongo/ rely on, created by `postroom` at start-up.
The platform's are below; each feature module listed in INDEX_MODULES has its own INDEXES."""

from __future__ import annotations

from pymongo import ASCENDING, IndexModel
from pymongo.asynchronous.database import AsyncDatabase

from . import (
    activity,
    analytics,
    attachments,
    automation_runs,
    automations,
    batches,
    bounces,
    campaign_parts,
    campaigns,
    console_sessions,
    contact_import,
    contacts,
    domain_stats,
    domains,
    forms,
    inbound_addresses,
    inbound_domains,
    inbound_messages,
    inbound_reports,
    inbound_routes,
    lists,
    message_search,
    operators,
    outbox,
    segments,
    send_limits,
    suppressions,
    tags,
    templates,
    tracking,
    webhooks,
)

INDEXES: dict[str, list[IndexModel]] = {
    "api_keys": [IndexModel([("hash", ASCENDING)], unique=True, name="hash_unique"),
                 IndexModel([("workspace_id", ASCENDING)], name="workspace")],
    # what the scheduler finds messages by (pipelines/delivery_status.watch): single integer
    # fields, the only ranges the embedded store answers from an index; what GET /email
    # finds them by is in mongo/message_search.py
    "messages": [IndexModel([("due_ms", ASCENDING)], name="due_ms"),
                 IndexModel([("stall_ms", ASCENDING)], name="stall_ms"),
                 # when the status last changed: `postroom status` and `messages failed --since`
                 # range over it (they read every message on the ISO `updated_at`)
                 IndexModel([("updated_ms", ASCENDING)], name="updated_ms")],
    "outbox": [IndexModel([(outbox.DISPATCH_MS, ASCENDING)], name="dispatch_ms")],
    "domains": [IndexModel([("workspace_id", ASCENDING), ("domain", ASCENDING)], unique=True,
                           name="ws_domain_unique")],
    "idempotency": [IndexModel([("expires_ms", ASCENDING)], name="expiry_ms")],
    "rate_windows": [IndexModel([("expires_ms", ASCENDING)], name="expiry_ms")],
}

# The stranded-event sweep (mongo.outbox.relay_stranded) over every collection that carries events.
for _carrier in outbox.CARRIERS:
    INDEXES[_carrier] = [IndexModel([(outbox.PENDING_AT, ASCENDING)], name="outbox_pending")]


INDEX_MODULES = [campaign_parts, contacts, tags, lists, segments, activity, webhooks, templates, suppressions, bounces,
                 analytics, campaigns, tracking, batches, send_limits, inbound_reports, domains, contact_import,
                 automations, automation_runs, forms, message_search, attachments, console_sessions, operators,
                 domain_stats, inbound_addresses, inbound_routes, inbound_messages,
                 inbound_domains]


def all_indexes() -> dict[str, list[IndexModel]]:
    merged: dict[str, list[IndexModel]] = {k: list(v) for k, v in INDEXES.items()}
    for module in INDEX_MODULES:
        for collection, models in module.INDEXES.items():
            merged.setdefault(collection, []).extend(models)
    return merged


async def ensure_indexes(db: AsyncDatabase) -> None:
    for collection, models in all_indexes().items():
        if models:
            await db[collection].create_indexes(models)


async def prepare_store(db: AsyncDatabase) -> None:
    """What every process start makes sure of: the indexes. Nothing migrates documents or
    indexes of an earlier shape: none was released (docs/store-notes.md)."""
    await ensure_indexes(db)
