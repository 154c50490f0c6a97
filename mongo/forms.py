"""Subscription forms (`forms`) and what people submitted to them (`form_signups`).

forms: `{_id, workspace_id, name, list_ids, fields: [{name, type, label, required}],
double_opt_in, title, description, submit_label, thank_you_text, confirmation_text,
confirmation_email_subject, confirmation_email_text, from_name, redirect_url,
confirmed_redirect_url, allowed_origins, created_at, updated_at}` — texts left unset are
None (pipelines.audience.forms fills the defaults when shown).

form_signups: one per form and address (`_id` = pipelines.audience.forms.signup_id), `{workspace_id,
form_id, email, first_name, last_name, attributes, status: pending|confirmed,
client_address, created_at, submitted_at, expires_at, last_sent_at ("" before the first
confirmation email), message_id, confirmed_at}`. A submission carries its
`form.submitted` event in the same write (the document is an outbox carrier). Pending
signups past `expires_at` are deleted by the scheduler."""

from __future__ import annotations

from pymongo import ASCENDING, DESCENDING, IndexModel, ReturnDocument
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from pipelines.core.clock import ms_of, now_iso, now_ms
from pipelines.messages.delivery_status import NEVER_MS

from . import documents, outbox
from .documents import NEWEST_FIRST, delete_owned, get_owned, update_owned

INDEXES: dict[str, list] = {
    "forms": [IndexModel([("workspace_id", ASCENDING), ("created_at", DESCENDING)], name="ws_created")],
    # the expiry sweep ranges over the integer twin (a date-like string in a filter makes
    # the embedded store read every signup); NEVER_MS once confirmed
    "form_signups": [IndexModel([("expires_ms", ASCENDING)], name="expires_ms")],
}

PENDING, CONFIRMED = "pending", "confirmed"
# What a repeated submission of the same address replaces on its signup.
_RESUBMITTED = ("email", "first_name", "last_name", "attributes", "status", "client_address",
                "submitted_at", "expires_at", "expires_ms")


async def create(db: AsyncDatabase, workspace_id: str, fields: dict) -> dict:
    return await documents.create(db.forms, workspace_id, fields)


async def get(db: AsyncDatabase, workspace_id: str, form_id: str) -> dict | None:
    return await get_owned(db.forms, workspace_id, form_id)


async def get_public(db: AsyncDatabase, form_id: str) -> dict | None:
    """A form by id alone: its public page and submission endpoint carry no workspace."""
    return await db.forms.find_one({"_id": form_id})


async def page(db: AsyncDatabase, workspace_id: str, *, limit: int, offset: int) -> tuple[list[dict], int]:
    return await documents.page(db.forms, {"workspace_id": workspace_id}, sort=NEWEST_FIRST, limit=limit,
                                offset=offset)


async def update(db: AsyncDatabase, workspace_id: str, form_id: str, changes: dict) -> dict | None:
    return await update_owned(db.forms, workspace_id, form_id, changes)


async def delete(db: AsyncDatabase, workspace_id: str, form_id: str) -> bool:
    """Delete the form; its pending signups can no longer be confirmed (and expire)."""
    return await delete_owned(db.forms, workspace_id, form_id)


# --- signups ------------------------------------------------------------------------------

def submitted_event(form: dict, signup: dict, fields: dict, contact: dict | None = None) -> dict:
    """form.submitted: `{form: {id, name}, email, contact, fields, status}` (status pending
    or confirmed; `contact` {id, email} once the address is a subscribed contact, else null)."""
    return outbox.event_document(form["workspace_id"], "form.submitted", {
        "form": {"id": form["_id"], "name": form["name"]}, "email": signup["email"],
        "contact": {"id": contact["_id"], "email": contact["email"]} if contact else None,
        "fields": fields, "status": signup["status"]})


async def record_submission(db: AsyncDatabase, signup: dict, event: dict) -> dict | None:
    """Store a submission carrying its form.submitted event in the same write: a new
    signup, or the same address again on this form (its answers, status and expiry
    replaced; when its last confirmation email went is kept). Returns the signup as it
    was before, or None when it is new."""
    before = None
    # a confirmed signup (single opt-in) has no expiry: "" never runs out
    signup = {**signup, "expires_ms": ms_of(signup["expires_at"]) if signup["expires_at"] else NEVER_MS}
    for _ in range(2):  # the expiry job may delete the signup between the two writes
        try:
            await db.form_signups.insert_one(outbox.inserted_with(signup, [event]))
            break
        except DuplicateKeyError:
            before = await db.form_signups.find_one_and_update(
                {"_id": signup["_id"]},
                outbox.carrying({"$set": {k: signup[k] for k in _RESUBMITTED}}, [event]),
                return_document=ReturnDocument.BEFORE)
            if before is not None:
                break
    await outbox.relay(db, "form_signups", [signup["_id"]], {event["_id"]})
    return before


async def mark_sent(db: AsyncDatabase, signup_id: str, message_id: str) -> None:
    await db.form_signups.update_one({"_id": signup_id},
                                     {"$set": {"last_sent_at": now_iso(), "message_id": message_id}})


async def get_signup(db: AsyncDatabase, workspace_id: str, signup_id: str) -> dict | None:
    return await db.form_signups.find_one({"_id": signup_id, "workspace_id": workspace_id})


async def mark_confirmed(db: AsyncDatabase, signup_id: str) -> bool:
    """pending → confirmed, guarded: True for the one caller that moved it."""
    result = await db.form_signups.update_one({"_id": signup_id, "status": PENDING},
                                              {"$set": {"status": CONFIRMED, "confirmed_at": now_iso(),
                                                        "expires_ms": NEVER_MS}})
    return result.modified_count == 1


async def expire_signups(db: AsyncDatabase, *, limit: int = 500) -> int:
    """A scheduler job (ops/store_jobs.py): delete pending signups whose confirmation link has run out."""
    stale = await db.form_signups.find({"expires_ms": {"$lt": now_ms()}, "status": PENDING}, {"_id": 1},
                                       limit=limit).to_list()
    if not stale:
        return 0
    await outbox.relay(db, "form_signups", [d["_id"] for d in stale])  # events first, never lost
    result = await db.form_signups.delete_many({"_id": {"$in": [d["_id"] for d in stale]}, "status": PENDING})
    return result.deleted_count

