"""What the recipient pages (unsubscribe, preferences) read and change.

A token names a workspace and a contact (or only an address, for a transactional
message to someone who is not a contact). Unsubscribing marks the contact unsubscribed
(contact.unsubscribed), suppresses the address with reason `unsubscribe`, and counts
once on the campaign the email came from.

A message with several recipients carries links bound to the message alone (no contact,
no address): its pages list the message's recipients and act on the one chosen, which
must be one of them (`chosen_recipient`).

The preferences page offers the static lists the contact is in, and keeps offering a
list they left there (`preference_lists`, one small document per contact), so a box
unticked by mistake can be ticked again."""

from __future__ import annotations

from pymongo.asynchronous.database import AsyncDatabase

from . import contacts, lists, suppressions, tracking, workspaces

UNSUBSCRIBE_REASON = "unsubscribe"


async def recipient(db: AsyncDatabase, payload: dict) -> tuple[dict, dict | None] | None:
    """(workspace, contact or None) for a verified token payload; None if the workspace
    is gone. A contact deleted since the email was sent counts as no contact: its address
    can still be unsubscribed (suppressed)."""
    workspace = await workspaces.get(db, payload.get("w") or "")
    if workspace is None:
        return None
    contact_id = payload.get("c")
    if not contact_id:
        return workspace, None
    return workspace, await contacts.get(db, workspace["_id"], contact_id)


async def message_recipients(db: AsyncDatabase, workspace_id: str, message_id: str) -> list[str] | None:
    """The `to` addresses of the workspace's message, or None for an unknown message."""
    message = await db.messages.find_one({"_id": message_id}, {"workspace_id": 1, "to": 1})
    if message is None or message["workspace_id"] != workspace_id:
        return None
    return list(message["to"])


async def chosen_recipient(db: AsyncDatabase, workspace: dict, message_id: str,
                           chosen: str | None) -> tuple[dict | None, str] | None:
    """(contact or None, address) for the address picked on a message-bound page; None
    unless it is one of that message's recipients."""
    recipients = await message_recipients(db, workspace["_id"], message_id) or []
    if not chosen or chosen not in recipients:
        return None
    return await contacts.find_by_email(db, workspace["_id"], chosen), chosen


def is_unsubscribed(contact: dict | None, suppression: dict | None) -> bool:
    if contact is not None:
        return not contact["subscribed"]
    return suppression is not None


async def unsubscribe(db: AsyncDatabase, workspace: dict, contact: dict | None, email: str,
                      message_id: str | None, source: str) -> None:
    """Idempotent: a second unsubscribe changes and records nothing more."""
    workspace_id = workspace["_id"]
    if contact is not None:
        await contacts.set_subscribed(db, workspace_id, contact["_id"], False, source)
        email = contact["email"]
    await suppressions.add(db, workspace_id, email, UNSUBSCRIBE_REASON, source=source)
    await tracking.record_unsubscribe(db, workspace_id, message_id)


async def resubscribe(db: AsyncDatabase, workspace: dict, contact: dict, source: str) -> None:
    """Subscribe again; lifts the suppression only if it came from an unsubscribe (a bounce
    or a complaint keeps the address suppressed)."""
    await contacts.set_subscribed(db, workspace["_id"], contact["_id"], True, source)
    found = await suppressions.get(db, workspace["_id"], contact["email"])
    if found is not None and found["reason"] == UNSUBSCRIBE_REASON:
        await suppressions.remove(db, workspace["_id"], contact["email"])


def _offer_id(contact: dict) -> str:
    return f"{contact['workspace_id']}:{contact['_id']}"


async def offered_lists(db: AsyncDatabase, contact: dict) -> list[dict]:
    """[{id, name, member}] for the static lists to show, oldest list first."""
    offer = await db.preference_lists.find_one({"_id": _offer_id(contact)})
    ids = list(dict.fromkeys([*contact.get("lists", []), *(offer or {}).get("lists", [])]))
    found = await lists.get_many(db, contact["workspace_id"], ids) if ids else []
    member = set(contact.get("lists", []))
    return [{"id": d["_id"], "name": d["name"], "member": d["_id"] in member}
            for d in found if d.get("type") == "static"]


async def save_lists(db: AsyncDatabase, contact: dict, chosen: set[str]) -> None:
    offered = await offered_lists(db, contact)
    if offered:
        await db.preference_lists.update_one(
            {"_id": _offer_id(contact)},
            {"$addToSet": {"lists": {"$each": [o["id"] for o in offered]}},
             "$set": {"workspace_id": contact["workspace_id"]}}, upsert=True)
    by_id = {o["id"]: o for o in offered}
    docs = {d["_id"]: d for d in await lists.get_many(db, contact["workspace_id"], list(by_id))}
    for list_id, item in by_id.items():
        if list_id in chosen and not item["member"]:
            await lists.add_members(db, docs[list_id], [contact["_id"]], reason="preferences_page")
        elif list_id not in chosen and item["member"]:
            await lists.remove_members(db, docs[list_id], [contact["_id"]], reason="preferences_page")


async def unsubscribe_by_message(db: AsyncDatabase, message_id: str, source: str,
                                 sender: str | None = None) -> bool:
    """The `mailto:unsubscribe+MESSAGE_ID@…` of List-Unsubscribe: unsubscribe the message's
    recipient. A message with several recipients unsubscribes only the one who wrote
    (`sender`, the envelope sender), if it is one of them. False when nobody was."""
    message = await db.messages.find_one({"_id": message_id}, {"workspace_id": 1, "contact_id": 1, "to": 1})
    if message is None:
        return False
    workspace = await workspaces.get(db, message["workspace_id"])
    if workspace is None:
        return False
    email = message["to"][0]
    if len(message["to"]) > 1:
        match = [a for a in message["to"] if sender and a.lower() == sender.lower()]
        if not match:
            return False
        email = match[0]
        message = {**message, "contact_id": None}
    contact = (await contacts.get(db, workspace["_id"], message["contact_id"]) if message.get("contact_id")
               else await contacts.find_by_email(db, workspace["_id"], email))
    await unsubscribe(db, workspace, contact, email, message_id, source)
    return True
