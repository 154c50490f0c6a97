"""What the recipient pages (unsubscribe, preferences) read, and the lists they keep
offering (what unsubscribing changes is pipelines/workflows/unsubscribe.py).

A token names a workspace and a contact (or only an address, for a transactional
message to someone who is not a contact). A message with several recipients carries
links bound to the message alone: its pages list the message's recipients.

The preferences page offers the static lists the contact is in, and keeps offering a
list they left there (`preference_lists`, one small document per contact), so a box
unticked by mistake can be ticked again."""

from __future__ import annotations

from pymongo.asynchronous.database import AsyncDatabase

from pipelines.core.documents import Workspace

from . import contacts, lists, workspaces


async def recipient(db: AsyncDatabase, payload: dict) -> tuple[Workspace, dict | None] | None:
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


async def message(db: AsyncDatabase, message_id: str) -> dict | None:
    """Whom a message went to: its workspace_id, contact_id, `to`, `cc` and `bcc`."""
    return await db.messages.find_one({"_id": message_id},
                                      {"workspace_id": 1, "contact_id": 1, "to": 1, "cc": 1, "bcc": 1})


async def message_recipients(db: AsyncDatabase, workspace_id: str, message_id: str) -> list[str] | None:
    """The `to` and `cc` addresses of the workspace's message (the ones its headers show:
    a page listing them never shows a `bcc` address), or None for an unknown message."""
    found = await message(db, message_id)
    if found is None or found["workspace_id"] != workspace_id:
        return None
    return [*found["to"], *found.get("cc", ())]


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


async def keep_offering(db: AsyncDatabase, contact: dict, list_ids: list[str]) -> None:
    """These lists stay offered to the contact, member or not."""
    if list_ids:
        await db.preference_lists.update_one(
            {"_id": _offer_id(contact)},
            {"$addToSet": {"lists": {"$each": list_ids}}, "$set": {"workspace_id": contact["workspace_id"]}},
            upsert=True)
