"""Transactional email: send (now or scheduled), batch, status, cancel."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

from pydantic import Field, StringConstraints
from quart import Blueprint

from actors.render import render_messages
from mongo import messages as message_store
from pipelines.errors import Conflict, NotFound

from ..enqueue import enqueue
from ..idempotency import idempotent
from ..responses import one
from ..runtime import caller, db
from ..types import EmailAddress, Strict
from ..validation import body
from ..sending import build_message, schedule_fields

bp = Blueprint("email", __name__, url_prefix="/api/v1")

MAX_RECIPIENTS = 50


class SendEmail(Strict):
    to: EmailAddress | Annotated[list[EmailAddress], Field(min_length=1, max_length=MAX_RECIPIENTS)] = Field(
        description="One address, or a list of up to 50 addresses that all receive the same message.")
    subject: Annotated[str, StringConstraints(min_length=1, max_length=998)]
    html: str | None = None
    text: str | None = None
    template_id: str | None = None
    template_data: dict[str, Any] | None = None
    from_email: EmailAddress | None = None
    from_name: Annotated[str, StringConstraints(max_length=200)] | None = None
    reply_to: EmailAddress | None = None
    track_opens: bool = False
    track_clicks: bool = False
    send_at: dt.datetime | None = Field(None, description="ISO 8601; in the future and within 72 hours.")


def status_view(doc: dict) -> dict:
    return {
        "message_id": doc["_id"],
        "status": doc["status"],
        "to": doc["to"],
        "subject": doc["subject"],
        "created_at": doc["created_at"],
        "scheduled_at": doc.get("due_at"),
        "sent_at": doc.get("sent_at"),
        "delivered_at": doc.get("delivered_at"),
        "opened_at": doc.get("opened_at"),
        "clicked_at": doc.get("clicked_at"),
        "bounced_at": doc.get("bounced_at"),
        "smtp_response": doc.get("smtp_response"),
        "sandbox": bool(doc.get("sandbox")),
        "batch_id": doc.get("batch_id"),
        "history": doc.get("history", []),
        "suppressed_recipients": doc.get("suppressed_recipients", []),
    }


@bp.post("/email/send")
@idempotent()
@body(SendEmail)
async def send(data: SendEmail):
    doc = await build_message(data.model_dump(), caller())
    if doc["status"] == "suppressed":  # every recipient is suppressed: stored, never enqueued
        await message_store.insert_many(db(), [doc])
        return one({"message_id": doc["_id"], "status": "suppressed", "to": doc["to"],
                    "suppressed_recipients": doc["suppressed_recipients"], "sandbox": doc["sandbox"]}, 200)
    if data.send_at is not None:
        doc.update(schedule_fields(data.send_at))
        await message_store.insert_many(db(), [doc])
        return one({"scheduled": True, "message_id": doc["_id"], "scheduled_at": doc["due_at"]}, 201)
    await message_store.insert_many(db(), [doc])
    await enqueue(render_messages, [doc["_id"]])
    return one({"message_id": doc["_id"], "status": doc["status"], "to": doc["to"],
                "suppressed_recipients": doc["suppressed_recipients"], "sandbox": doc["sandbox"]}, 202)


@bp.get("/email/<message_id>/status")
async def status(message_id: str):
    doc = await message_store.get(db(), caller().workspace_id, message_id)
    if doc is None:
        raise NotFound("No such message in this workspace.")
    return one(status_view(doc))


@bp.delete("/email/<message_id>")
async def cancel(message_id: str):
    cancelled = await message_store.cancel_scheduled(db(), caller().workspace_id, message_id)
    if cancelled is not None:
        return one({"message_id": message_id, "status": "cancelled"})
    doc = await message_store.get(db(), caller().workspace_id, message_id)
    if doc is None:
        raise NotFound("No such message in this workspace.")
    if doc["status"] == "cancelled":
        return one({"message_id": message_id, "status": "cancelled"})
    raise Conflict(f"The message is already {doc['status']}; only a scheduled message can be cancelled.")
