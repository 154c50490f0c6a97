"""Apply a bounce report: a stored inbound report → parsed bounces/complaints, believed
for the recipients of the message it is about, applied.

`handle_report` is the whole workflow on a store handle: the `bounces` actor
(actors/bounces.py) is its shell, and `postroom inbound` (with no RabbitMQ) and
`postroom inbound rerun` call it directly.

`record_rejections` is what the send step (send_chunk.py) calls for synchronous 5xx
rejections, through `record_bounces` as reports are, so both paths write the same
records, suppressions and events (pipelines/bounces/effects.py)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from pymongo.asynchronous.database import AsyncDatabase

from mongo import analytics, bounces, contacts, domain_stats, inbound_reports, messages, outbox, suppressions, tracking
from pipelines.bounces import effects as bounce_effects
from pipelines.bounces.parsing import Bounce, match, parse_report, sent_to
from pipelines.bounces.parsing.classify import SOFT_COUNTED
from pipelines.core.clock import in_seconds, now_iso
from pipelines.core.documents import BounceRecord
from pipelines.messages import deliverability, delivery_status
from pipelines.messages.labels import event_labels
from pipelines.messages.mime import message_id_from_verp

log = logging.getLogger("postroom.bounces")


MAX_REPORT_ATTEMPTS = 3


async def handle_report(db: AsyncDatabase, report_id: str,
                        on_feedback: Callable[[str], None] | None = None) -> str | None:
    """Parse a stored report and apply it; its final status, or None when it was not
    waiting (already handled). An attempt that raises is retried (by the broker, or the
    scheduler's sweep) until the report has had MAX_REPORT_ATTEMPTS; then it ends
    `failed`, kept with the error for an operator (`postroom inbound reports --status failed`,
    `postroom inbound rerun`). `on_feedback(feedback_type)` hears of each ARF report that
    is no complaint (auth-failure, virus, not-spam, other): the worker counts them."""
    report = await inbound_reports.claim(db, report_id)
    if report is None:
        return None
    attempts = report["attempts"]
    if attempts > MAX_REPORT_ATTEMPTS:  # the attempts before this one died with their worker
        await inbound_reports.finish(db, report_id, "failed", f"gave up after {MAX_REPORT_ATTEMPTS} attempts "
                                     f"({report.get('last_error') or 'no error recorded: the worker died'})")
        return "failed"
    try:
        return await _apply_report(db, report, on_feedback)
    except Exception as error:
        detail = f"{type(error).__name__}: {error}"[:500]
        log.exception("inbound report %s: attempt %d of %d failed", report_id, attempts, MAX_REPORT_ATTEMPTS,
                      extra={"report_id": report_id})
        if attempts >= MAX_REPORT_ATTEMPTS:
            await inbound_reports.finish(db, report_id, "failed", f"gave up after {attempts} attempts: {detail}",
                                         last_error=detail)
            return "failed"
        await inbound_reports.note_error(db, report_id, detail)
        raise


async def _apply_report(db: AsyncDatabase, report: dict, on_feedback: Callable[[str], None] | None) -> str:
    report_id = report["_id"]
    verp = next((m for m in map(message_id_from_verp, report["rcpt_tos"]) if m), None)
    # parsing is CPU work (up to 10 MB of MIME): off the loop every async actor shares
    parsed = await asyncio.to_thread(parse_report, inbound_reports.raw_bytes(report), verp_message_id=verp)
    message_id = parsed.message_id if parsed else verp
    found = await messages.load(db, [message_id]) if message_id else []
    message = found[0] if found else None
    about = {"message_id": message_id or "", "workspace_id": message["workspace_id"] if message else ""}
    if parsed is None:
        await inbound_reports.finish(db, report_id, "unparseable", "not a DSN, ARF or known bounce style", **about)
        return "unparseable"
    if not parsed.bounces:  # a success notice (2.x.x, delivered): understood, and nobody bounced
        await inbound_reports.finish(db, report_id, "parsed", "reports no failure (delivered, 2.x.x)",
                                     style=parsed.style, bounce_ids=[], **about)
        return "parsed"
    notices = [b for b in parsed.bounces if bounce_effects.is_feedback_notice(b)]
    if notices and len(notices) == len(parsed.bounces):
        return await _note_feedback(db, report_id, notices, parsed.style, about, on_feedback)
    if message is None:
        await inbound_reports.finish(db, report_id, "unmatched", f"no message {message_id or '(none named)'}",
                                     style=parsed.style, **about)
        return "unmatched"
    matched = match([b for b in parsed.bounces if not bounce_effects.is_feedback_notice(b)], sent_to(message))
    if not matched.bounces:
        await inbound_reports.finish(
            db, report_id, "unmatched", f"names no recipient of {message['_id']}: {', '.join(matched.ignored)}",
            style=parsed.style, ignored_recipients=matched.ignored, **about)
        return "unmatched"
    ids = await record_bounces(db, [(b, message) for b in matched.bounces], origin="report")
    await inbound_reports.finish(db, report_id, "parsed", style=parsed.style, bounce_ids=ids,
                                 ignored_recipients=matched.ignored, **about)
    return "parsed"


async def _note_feedback(db: AsyncDatabase, report_id: str, notices: list[Bounce], style: str, about: dict,
                         on_feedback: Callable[[str], None] | None) -> str:
    """An ARF report that is no complaint: kept, shown to the operator, applied to nobody."""
    types = sorted({b.feedback_type or "unknown" for b in notices})
    for notice in notices:
        level = logging.WARNING if notice.feedback_type in bounce_effects.OPERATOR_FEEDBACK else logging.INFO
        log.log(level, "inbound report %s: ARF %s report from %s about message %s: no complaint, nobody suppressed",
                report_id, notice.feedback_type, notice.reporting_mta or "an unnamed reporter",
                about["message_id"] or "(none named)",
                extra={"report_id": report_id, "feedback_type": notice.feedback_type})
        if on_feedback:
            on_feedback(notice.feedback_type or "unknown")
    await inbound_reports.finish(db, report_id, "parsed", f"feedback report ({', '.join(types)}): not a complaint",
                                 style=style, bounce_ids=[], feedback_types=types, **about)
    return "parsed"


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
        stored = doc if new else await bounces.get(db, ws, doc["_id"])
        assert stored is not None, "bounces are never deleted: the one that was there is"
        doc = stored
        recent = await bounces.count_recent(db, ws, doc["email"], type_="transient", categories=SOFT_COUNTED,
                                            since=in_seconds(-bounce_effects.TRANSIENT_WINDOW_SECONDS))
        effects = bounce_effects.effects_of(doc, transient_count=recent)
        await _apply(db, doc, effects, counted=not new, labels=event_labels(message))
        ids.append(doc["_id"])
    return ids


async def _apply(db: AsyncDatabase, doc: BounceRecord, effects: bounce_effects.Effects, *, counted: bool,
                 labels: dict) -> None:
    """`labels`: the message's metadata and tags, which its events carry."""
    ws, detail = doc["workspace_id"], f"{doc['smtp_status']} {doc['diagnostic_code']}".strip()
    if effects.message_status:
        await messages.apply(db, [delivery_status.forward(doc["message_id"], effects.message_status,
                                                          {"bounce_type": doc["type"]}, detail or doc["type"],
                                                          once_sent=True)])
    if effects.mark_contact_bounced:
        await contacts.mark_bounced(db, ws, doc["email"])
    if effects.suppress_reason:
        await suppressions.add(db, ws, doc["email"], effects.suppress_reason, source=doc["source"],
                               detail=detail or doc["diagnostic_code"])
    await outbox.record(db, ws, effects.event, {**bounce_effects.event_data(doc), **labels},
                        event_id=f"{doc['_id']}:{effects.event}")
    if doc["kind"] == "complaint":  # the campaign's `complained`, once per message
        await tracking.record_complaint(db, ws, doc["message_id"] or None)
    if not counted:  # counters are not idempotent: bump only with the first insert
        await analytics.bump(db, ws, doc["created_at"][:10], **effects.counters)
        if doc["source"] != "smtp":  # the send step counted a synchronous rejection for its domain
            await domain_stats.bump_many(db, deliverability.count_report(
                ws, doc["created_at"], doc["email"], complaint=doc["kind"] == "complaint",
                delayed=doc.get("action") == "delayed"))


async def record_rejections(db: AsyncDatabase, rejected: list[dict]) -> list[str]:
    """Synchronous 5xx answers at send time (`OutcomePlan.bounces`: message, email, code,
    text) through the same path as reports."""
    items = [(bounce_effects.from_smtp_rejection(r["email"], r["code"], r["text"]), r["message"])
             for r in rejected]
    return await record_bounces(db, items, origin="smtp")
