"""A contact's commands besides a change (update_contact.py): create one (joining a static
list with its events), delete one or many for good, delete every contact softly and restore
them within the window. Addresses are unique among a workspace's live contacts, so a
create the store refuses is 409 duplicate."""

from __future__ import annotations

from pymongo.asynchronous.database import AsyncDatabase

from mongo import contact_removal, contacts, lists
from pipelines.core.errors import Conflict


def duplicate() -> Conflict:
    return Conflict("A contact with this email already exists in this workspace.", code="duplicate")


async def create(db: AsyncDatabase, workspace_id: str, *, email: str, first_name: str | None,
                 last_name: str | None, attributes: dict, subscribed: bool, static_list: dict | None) -> dict:
    """The new contact, a member of `static_list` when one is given."""
    doc = contacts.new_document(workspace_id, email=email, first_name=first_name, last_name=last_name,
                                attributes=attributes, subscribed=subscribed,
                                lists=[static_list["_id"]] if static_list else [])
    joined = tuple(lists.joining_events(static_list, doc, "api")) if static_list is not None else ()
    if not await contacts.insert(db, doc, joined):
        raise duplicate()
    return doc


async def delete(db: AsyncDatabase, workspace_id: str, contact_id: str) -> bool:
    return await contacts.delete(db, workspace_id, contact_id)


async def delete_many(db: AsyncDatabase, workspace_id: str, contact_ids: list[str]) -> dict:
    """{deleted: how many, not_found: the ids given that were no live contact}."""
    gone = set(await contacts.delete_many(db, workspace_id, contact_ids))
    return {"deleted": len(gone), "not_found": [i for i in dict.fromkeys(contact_ids) if i not in gone]}


async def delete_all(db: AsyncDatabase, workspace_id: str, key_id: str | None) -> dict:
    """Soft-delete every live contact; the activity entry that can undo it."""
    return await contact_removal.delete_all(db, workspace_id, key_id)


async def restore(db: AsyncDatabase, workspace_id: str, deletion: dict, key_id: str | None) -> dict:
    """Bring back the contacts of the delete-all `deletion`; 409 once its window has ended."""
    if not contact_removal.restorable(deletion):
        raise Conflict(f"The restore window of this delete-all ended at {deletion['details']['restorable_until']}.")
    return await contact_removal.restore(db, workspace_id, deletion, key_id)
