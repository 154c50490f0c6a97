"""Transactional email: send (now or scheduled), batch, status, cancel."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Literal

from pydantic import Field, StringConstraints
from quart import Blueprint

from mongo import batches as batch_store
from mongo import messages as message_store
from pipelines.errors import Conflict, NotFound

from ..auth import count_emails, give_back_emails
from ..idempotency import idempotent
from ..responses import one
from ..runtime import caller, db
from ..sending import build_batch, build_message, charge_store_and_enqueue, refund_plan, schedule_fields
from ..types import DisplayName, EmailAddress, JsonObject, Strict
from ..validation import body

bp = Blueprint("email", __name__, url_prefix="/api/v1")

MAX_RECIPIENTS = 50
MAX_BATCH_MESSAGES = 1000
MAX_TEMPLATE_DATA_BYTES = 256 * 1024


class EmailContent(Strict):
    """One email: who it goes to, from whom, and what it says."""
    to: EmailAddress | Annotated[list[EmailAddress], Field(min_length=1, max_length=MAX_RECIPIENTS)] = Field(
        description="One address, or a list of up to 50 addresses that all receive the same message.")
    subject: Annotated[str, StringConstraints(min_length=1, max_length=998)] = Field(
        description="HTML tags are stripped and line breaks folded.")
    html: str | None = Field(None, description="HTML body, at most 256 KB.")
    text: str | None = Field(None, description="Plain-text body (derived from html when absent).")
    template_id: str | None = Field(None, description="A template of this workspace to render.")
    template_data: JsonObject(MAX_TEMPLATE_DATA_BYTES) | None = Field(None, description=(
        "Keys become merge tags; at most 256 KB serialised. A list whose {{#each}} loops would take more "
        "than the render budget (100,000 steps per message, see the README) is refused: validation_error, "
        "path template_data.<list>."))
    from_email: EmailAddress | None = Field(
        None, description="On a verified domain of the workspace: the From address; otherwise the "
                          "Reply-To of mail sent from the workspace's address on the shared domain.")
    from_name: DisplayName | None = Field(None, description="Display name of the sender (no control characters).")
    reply_to: EmailAddress | None = Field(None, description="Reply-To address (wins over from_email).")
    track_opens: bool = Field(False, description="Add an open-tracking pixel.")
    track_clicks: bool = Field(False, description="Rewrite links for click tracking.")
    stream: Literal["transactional", "marketing"] = Field(
        "transactional", description="`transactional` (default: receipts, password resets): a marketing "
                                     "unsubscribe does not hold it back. `marketing`: held back by unsubscribes, "
                                     "sent with List-Id and one-click List-Unsubscribe, always with the postal "
                                     "address.")
    footer: bool = Field(True, description="Rule 9's compliance footer (unsubscribe and preferences links, "
                                           "company name and address), appended unless the HTML places "
                                           "`{{unsubscribe_url}}`. `false` leaves it out: transactional mail only.")


class SendEmail(EmailContent):
    send_at: dt.datetime | None = Field(
        None, description="ISO 8601; in the future and within 72 hours. Without a time zone: UTC.")


class SendBatch(Strict):
    messages: Annotated[list[EmailContent], Field(min_length=1, max_length=MAX_BATCH_MESSAGES)] = Field(
        description="1 to 1000 emails, each validated on its own (errors name `messages[i].field`).")


def batch_view(doc: dict) -> dict:
    return {
        "batch_id": doc["_id"],
        "status": batch_store.batch_status(doc),
        "total": doc["total"],
        "counts": {"queued": doc["pending"], "sent": doc["sent"],
                   **{k: doc[k] for k in batch_store.FINAL_OUTCOMES}},
        "created_at": doc["created_at"],
        "completed_at": batch_store.completed_at(doc),
    }


def status_view(doc: dict) -> dict:
    return {
        "message_id": doc["_id"],
        "status": doc["status"],
        "to": doc["to"],
        "subject": doc["subject"],
        "created_at": doc["created_at"],
        "scheduled_at": doc.get("due_at"),
        "queued_at": doc.get("queued_at"),
        "sent_at": doc.get("sent_at"),
        "delivered_at": doc.get("delivered_at"),
        "opened_at": doc.get("opened_at"),
        "clicked_at": doc.get("clicked_at"),
        "bounced_at": doc.get("bounced_at"),
        "failed_at": doc.get("failed_at"),
        "cancelled_at": doc.get("cancelled_at"),
        "error": doc.get("error"),
        "smtp_response": doc.get("smtp_response"),
        "sandbox": bool(doc.get("sandbox")),
        "batch_id": doc.get("batch_id"),
        "history": doc.get("history", []),
        "suppressed_recipients": doc.get("suppressed_recipients", []),
    }


async def _accept(docs: list[dict], batch: dict | None = None) -> None:
    """Count the emails in the key's email window (all or none), then charge, store and
    enqueue them; units of a request that ends up sending nothing are given back."""
    await count_emails(caller(), len(docs))
    try:
        await charge_store_and_enqueue(caller(), docs, batch)
    except Exception as error:
        await give_back_emails(getattr(error, "unsent", len(docs)))
        raise


@bp.post("/email/send")
@idempotent()
@body(SendEmail)
async def send(data: SendEmail):
    schedule = schedule_fields(data.send_at) if data.send_at is not None else None
    doc = await build_message(data.model_dump(), caller())
    if schedule is not None and doc["status"] != "suppressed":
        doc.update(schedule)
    await _accept([doc])
    if doc["status"] == "scheduled":
        return one({"scheduled": True, "message_id": doc["_id"], "scheduled_at": doc["due_at"]}, 201)
    # queued now (202), or every recipient suppressed: stored, never enqueued (200)
    return one({"message_id": doc["_id"], "status": doc["status"], "to": doc["to"],
                "suppressed_recipients": doc["suppressed_recipients"], "sandbox": doc["sandbox"]},
               200 if doc["status"] == "suppressed" else 202)


@bp.post("/email/batch")
@idempotent()
@body(SendBatch)
async def send_batch(data: SendBatch):
    batch, docs = await build_batch([m.model_dump() for m in data.messages], caller())
    await _accept(docs, batch)
    return one({"batch_id": batch["_id"], "status": batch_store.batch_status(batch),
                "total": batch["total"], "message_ids": [d["_id"] for d in docs]}, 202)


@bp.get("/email/batch/<batch_id>")
async def batch_status(batch_id: str):
    doc = await batch_store.get(db(), caller().workspace_id, batch_id)
    if doc is None:
        raise NotFound("No such batch in this workspace.")
    return one(batch_view(doc))


@bp.get("/email/<message:message_id>/status")
async def status(message_id: str):
    doc = await message_store.get(db(), caller().workspace_id, message_id)
    if doc is None:
        raise NotFound("No such message in this workspace.")
    return one(status_view(doc))


@bp.delete("/email/<message:message_id>")
async def cancel(message_id: str):
    cancelled = await message_store.cancel_scheduled(db(), caller().workspace_id, message_id)
    if cancelled is not None:  # never sent: its count goes back to the plan
        if not cancelled.get("sandbox"):
            await refund_plan(cancelled["workspace_id"], 1, cancelled["created_at"])
        return one({"message_id": message_id, "status": "cancelled"})
    doc = await message_store.get(db(), caller().workspace_id, message_id)
    if doc is None:
        raise NotFound("No such message in this workspace.")
    if doc["status"] == "cancelled":
        return one({"message_id": message_id, "status": "cancelled"})
    raise Conflict(f"The message is already {doc['status']}; only a scheduled message can be cancelled.")
