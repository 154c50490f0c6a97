"""An open or a click of a message, as the tracking pixel and the click redirect report
it: counted on the message (every one), on its campaign (every one, and uniquely the
first), the message's status moved forward where it can go, and the first one of each
message recorded in analytics, as an email.opened / email.clicked event and as a contact
event (what automations wait on)."""

from __future__ import annotations

from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from mongo import analytics, campaigns, messages, outbox
from mongo.tracking import add_contact_event, count_engagement
from pipelines.core.clock import now_iso
from pipelines.messages import delivery_status
from pipelines.messages.labels import event_labels

# open → message status, campaign counters, analytics counter, event, contact event type.
_ENGAGEMENT = {
    "open": ("opened", ("opened_unique", "opens_total"), "opens", "email.opened", "email_opened"),
    "click": ("clicked", ("clicked_unique", "clicks_total"), "clicks", "email.clicked", "email_clicked"),
}


async def record_engagement(db: AsyncDatabase, workspace_id: str, message_id: str, kind: str,
                            url: str | None = None) -> bool:
    """An open or click of a message: every one counts toward the campaign's total and moves
    the message status forward if it can; the first one per message also counts uniquely,
    in analytics, and emits email.opened / email.clicked and a contact event. False for an
    unknown message."""
    status, (unique_field, total_field), counter, event, contact_event = _ENGAGEMENT[kind]
    before, first = await count_engagement(db, workspace_id, message_id, kind)
    if before is None:
        return False
    campaign_id = before.get("campaign_id")
    if campaign_id:
        await campaigns.bump(db, campaign_id, **{total_field: 1, unique_field: int(first)})
    # Not only the first open moves the status: it may have come while the message was
    # still queued for another recipient's retry. No write when the move cannot apply.
    if before["status"] in delivery_status.sources_for(status, once_sent=True):
        await messages.apply(db, [delivery_status.forward(message_id, status, detail=url, once_sent=True)])
    if not first:
        return True
    at = now_iso()
    await analytics.bump(db, workspace_id, None, **{counter: 1})
    data = {"message_id": message_id, "to": before["to"], "subject": before["subject"],
            f"{status}_at": at, **({"campaign_id": campaign_id} if campaign_id else {}),
            **({"url": url} if url else {}), **event_labels(before)}
    await outbox.record(db, workspace_id, event, data, event_id=f"{message_id}:{event}")
    if before.get("contact_id"):
        try:
            await add_contact_event(db, workspace_id, before["contact_id"], contact_event, data,
                                    event_id=f"{message_id}:{contact_event}")
        except DuplicateKeyError:
            pass
    return True
