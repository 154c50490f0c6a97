"""Unsubscribing and subscribing again, one home for every way in: the unsubscribe page
and RFC 8058 one-click POST and the preferences page (front/routes/pages.py),
List-Unsubscribe by mail (ops/inbound.py), and a confirmed form signup
(pipelines/workflows/form_signup.py).

Unsubscribing marks the contact unsubscribed (contact.unsubscribed), suppresses the
address with reason `unsubscribe` (an address that is not a contact is only suppressed),
and counts once on the campaign the email came from. Subscribing again lifts only a
suppression an unsubscribe made: a bounce or a complaint keeps the address suppressed.

A message with several recipients carries links bound to the message alone (no contact,
no address): its pages act on the one address chosen, which must be one of the
message's recipients (`chosen_recipient`); by mail, only the recipient who wrote."""

from __future__ import annotations

from pymongo.asynchronous.database import AsyncDatabase

from mongo import contacts, lists, recipient_pages, suppressions, tracking, workspaces
from pipelines.audience import recipients
from pipelines.core.documents import Workspace

UNSUBSCRIBE_REASON = "unsubscribe"


def is_unsubscribed(contact: dict | None, suppression: dict | None) -> bool:
    if contact is not None:
        return not contact["subscribed"]
    return suppression is not None


async def chosen_recipient(db: AsyncDatabase, workspace: Workspace, message_id: str,
                           chosen: str | None) -> tuple[dict | None, str] | None:
    """(contact or None, address) for the address picked on a message-bound page; None
    unless it is one of that message's recipients."""
    recipients = await recipient_pages.message_recipients(db, workspace["_id"], message_id) or []
    if not chosen or chosen not in recipients:
        return None
    return await contacts.find_by_email(db, workspace["_id"], chosen), chosen


async def unsubscribe(db: AsyncDatabase, workspace: Workspace, contact: dict | None, email: str,
                      message_id: str | None, source: str) -> None:
    """Idempotent: a second unsubscribe changes and records nothing more."""
    workspace_id = workspace["_id"]
    if contact is not None:
        await contacts.set_subscribed(db, workspace_id, contact["_id"], False, source)
        email = contact["email"]
    await suppressions.add(db, workspace_id, email, UNSUBSCRIBE_REASON, source=source)
    await tracking.record_unsubscribe(db, workspace_id, message_id)


async def resubscribe(db: AsyncDatabase, workspace: Workspace, contact: dict, source: str) -> None:
    await contacts.set_subscribed(db, workspace["_id"], contact["_id"], True, source)
    found = await suppressions.get(db, workspace["_id"], contact["email"])
    if found is not None and found["reason"] == UNSUBSCRIBE_REASON:
        await suppressions.remove(db, workspace["_id"], contact["email"])


async def save_preferences(db: AsyncDatabase, workspace: Workspace, contact: dict, email: str, message_id: str | None,
                           *, subscribed: bool, chosen_lists: set[str]) -> None:
    """The preferences form: the subscription as ticked, and membership of exactly the
    ticked lists among those offered (a list left here stays offered)."""
    if subscribed and not contact["subscribed"]:
        await resubscribe(db, workspace, contact, "preferences_page")
    elif not subscribed and contact["subscribed"]:
        await unsubscribe(db, workspace, contact, email, message_id, "preferences_page")
    offered = {o["id"]: o for o in await recipient_pages.offered_lists(db, contact)}
    await recipient_pages.keep_offering(db, contact, list(offered))
    docs = {d["_id"]: d for d in await lists.get_many(db, contact["workspace_id"], list(offered))}
    for list_id, item in offered.items():
        if list_id in chosen_lists and not item["member"]:
            await lists.add_members(db, docs[list_id], [contact["_id"]], reason="preferences_page")
        elif list_id not in chosen_lists and item["member"]:
            await lists.remove_members(db, docs[list_id], [contact["_id"]], reason="preferences_page")


async def by_message(db: AsyncDatabase, message_id: str, source: str, sender: str | None = None) -> bool:
    """The `mailto:unsubscribe+MESSAGE_ID@…` of List-Unsubscribe: unsubscribe the message's
    recipient. A message with several recipients unsubscribes only the one who wrote
    (`sender`, the envelope sender), if it is one of them. False when nobody was."""
    message = await recipient_pages.message(db, message_id)
    if message is None:
        return False
    workspace = await workspaces.get(db, message["workspace_id"])
    if workspace is None:
        return False
    everyone = recipients.envelope(message)
    email = everyone[0]
    if len(everyone) > 1:
        match = [a for a in everyone if sender and a.lower() == sender.lower()]
        if not match:
            return False
        email = match[0]
        message = {**message, "contact_id": None}
    contact = (await contacts.get(db, workspace["_id"], message["contact_id"]) if message.get("contact_id")
               else await contacts.find_by_email(db, workspace["_id"], email))
    await unsubscribe(db, workspace, contact, email, message_id, source)
    return True
