"""The `bounces` queue: a stored inbound report → parsed bounces/complaints, applied.

`record_bounces` is also what the `send` actor calls for synchronous 5xx rejections, so
both paths write the same records, suppressions and events (pipelines/bounce_effects.py)."""

from __future__ import annotations

import dramatiq
from pymongo.asynchronous.database import AsyncDatabase

from mongo import analytics, bounces, contacts, inbound_reports, messages, outbox, suppressions, tracking
from pipelines import bounce_effects
from pipelines.bounce_parsing import Bounce, parse_report
from pipelines.clock import in_seconds, now_iso
from pipelines.mime import message_id_from_verp

from . import runtime


@dramatiq.actor(queue_name="bounces", max_retries=10, min_backoff=1000, max_backoff=60_000)
async def process_report(report_id: str) -> None:
    db = runtime.store()
    report = await inbound_reports.get(db, report_id)
    if report is None or report["status"] != "received":
        return
    verp = next((m for m in map(message_id_from_verp, report["rcpt_tos"]) if m), None)
    parsed = parse_report(inbound_reports.raw_bytes(report), verp_message_id=verp)
    if parsed is None:
        await inbound_reports.finish(db, report_id, "unparseable", "not a DSN, ARF or known bounce style")
        return
    message = await messages.load(db, [parsed.message_id]) if parsed.message_id else []
    if not message:
        await inbound_reports.finish(db, report_id, "unmatched", f"no message {parsed.message_id or '(none named)'}",
                                     style=parsed.style)
        return
    ids = await record_bounces(db, [(b, message[0]) for b in parsed.bounces], origin="report")
    await inbound_reports.finish(db, report_id, "parsed", style=parsed.style, bounce_ids=ids)


async def record_bounces(db: AsyncDatabase, items: list[tuple[Bounce, dict]], *, origin: str) -> list[str]:
    """Record each (bounce, the message it concerns) and apply its effects; idempotent."""
    ids = []
    for bounce, message in items:
        ws = message["workspace_id"]
        # the same report delivered twice (or sent twice by the remote MTA) is one bounce;
        # a later report with another action or status (delayed, then failed) is another
        key = f"{origin}:{message['_id']}:{bounce.kind}:{bounce.action}:{bounce.smtp_status}"
        doc = bounce_effects.bounce_document(bounce, origin=key, workspace_id=ws,
                                             message_id=message["_id"], created_at=now_iso())
        new = await bounces.insert(db, doc)
        doc = doc if new else await bounces.get(db, ws, doc["_id"])
        recent = await bounces.count_recent(db, ws, doc["email"], type_="transient",
                                            since=in_seconds(-bounce_effects.TRANSIENT_WINDOW_SECONDS))
        effects = bounce_effects.effects_of(doc, transient_count=recent)
        await _apply(db, doc, effects, counted=not new)
        ids.append(doc["_id"])
    return ids


async def _apply(db: AsyncDatabase, doc: dict, effects: bounce_effects.Effects, *, counted: bool) -> None:
    ws, detail = doc["workspace_id"], f"{doc['smtp_status']} {doc['diagnostic_code']}".strip()
    if effects.message_status:
        await messages.advance(db, [(doc["message_id"], effects.message_status,
                                     {"bounce_type": doc["type"]}, detail or doc["type"])], once_sent=True)
    if effects.mark_contact_bounced:
        await contacts.mark_bounced(db, ws, doc["email"])
    if effects.suppress_reason:
        await suppressions.add(db, ws, doc["email"], effects.suppress_reason, source=doc["source"],
                               detail=detail or doc["diagnostic_code"])
    await outbox.record(db, ws, effects.event, bounce_effects.event_data(doc),
                        event_id=f"{doc['_id']}:{effects.event}")
    if doc["kind"] == "complaint":  # the campaign's `complained`, once per message
        await tracking.record_complaint(db, ws, doc["message_id"] or None)
    if not counted:  # counters are not idempotent: bump only with the first insert
        await analytics.bump(db, ws, doc["created_at"][:10], **effects.counters)


async def record_rejections(db: AsyncDatabase, rejected: list[dict]) -> list[str]:
    """Synchronous 5xx answers at send time (`OutcomePlan.bounces`: message, email, code,
    text) through the same path as reports."""
    items = [(bounce_effects.from_smtp_rejection(r["email"], r["code"], r["text"]), r["message"])
             for r in rejected]
    return await record_bounces(db, items, origin="smtp")
