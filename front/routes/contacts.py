"""Contacts: CRUD, search, bulk delete, delete-all (soft) and restore, the activity log,
duplicates across lists."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, StringConstraints
from quart import Blueprint

from mongo import activity as activity_store
from mongo import contact_removal
from mongo import contacts as contact_store
from mongo import lists as list_store
from pipelines.contact_search import search_filter
from pipelines.errors import ConfirmationRequired, Conflict, NotFound, ValidationFailed

from ..audience import MAX_ATTRIBUTES, check_attributes, contact_with_lists, list_or_404
from ..pagination import PageQuery, page
from ..responses import one
from ..runtime import caller, db
from ..types import EmailAddress, Id, Name100, Strict, Uuid
from ..validation import body, query

bp = Blueprint("contacts", __name__, url_prefix="/api/v1")

MAX_BULK_DELETE = 5000


class CreateContact(Strict):
    email: EmailAddress = Field(description="Required; normalised (domain lower-cased) and unique "
                                            "per workspace among live contacts, compared case-insensitively.")
    first_name: Name100 | None = None
    last_name: Name100 | None = None
    attributes: dict[str, Any] = Field(default_factory=dict, description=(
        "Custom values (up to 100; names of letters, digits, _ and -). Null values are dropped."))
    subscribed: bool = Field(True, description="Default true.")
    list_id: Uuid | None = Field(None, description="Adds the new contact to this static list (a UUID; "
                                                   "anything else is 400, an unknown list 404).")


class UpdateContact(Strict):
    email: EmailAddress = Field(None, description="A new address; must not belong to another live contact.")
    first_name: Name100 | None = Field(None, description="null clears.")
    last_name: Name100 | None = Field(None, description="null clears.")
    attributes: dict[str, Any] = Field(None, description=(
        "Merged into the existing attributes: given keys are set, a key set to null is removed, "
        "keys not given are kept."))
    subscribed: bool = Field(None, description="Changing it records contact.subscribed / contact.unsubscribed.")


class ContactQuery(PageQuery):
    search: Annotated[str, StringConstraints(max_length=200)] | None = Field(
        None, description="Every word must appear in the email, first name or last name (case-insensitive).")
    subscribed: bool | None = Field(None, description="true or false filters on subscription.")
    bounced: bool | None = Field(None, description="true lists only bounced contacts; false does not filter.")


class ContactIds(Strict):
    contact_ids: Annotated[list[Id], Field(min_length=1, max_length=MAX_BULK_DELETE)]


class DeleteAll(Strict):
    confirm: bool | None = Field(None, description="Must be true; otherwise 400 confirmation_required "
                                                   "and nothing is deleted.")


class Restore(Strict):
    deletion_id: Id | None = Field(None, description="The delete-all to undo (from its response or the "
                                                     "activity log); default: the latest one.")


class DuplicatesQuery(PageQuery):
    list_id: Uuid | None = Field(None, description="Only contacts that are also members of this list (a UUID).")


class ActivityQuery(PageQuery):
    action: Annotated[str, StringConstraints(max_length=100)] | None = Field(
        None, description="contacts.delete_all or contacts.restore.")


async def _contact_or_404(contact_id: str) -> dict:
    doc = await contact_store.get(db(), caller().workspace_id, contact_id)
    if doc is None:
        raise NotFound("No such contact in this workspace.")
    return doc


def _duplicate() -> Conflict:
    return Conflict("A contact with this email already exists in this workspace.", code="duplicate")


@bp.get("/contacts")
@query(ContactQuery)
async def list_contacts(params: ContactQuery):
    condition = search_filter(params.search, subscribed=params.subscribed, bounced=params.bounced)
    items, total = await contact_store.page(db(), caller().workspace_id, condition,
                                            limit=params.limit, offset=params.offset)
    return page([contact_store.view(d) for d in items], total=total, limit=params.limit, offset=params.offset)


@bp.post("/contacts")
@body(CreateContact)
async def create_contact(data: CreateContact):
    check_attributes(data.attributes)
    target = await list_or_404(data.list_id) if data.list_id is not None else None
    if target is not None and target["type"] != "static":
        raise ValidationFailed("list_id: contacts join a dynamic list by matching its conditions.",
                               path="list_id")
    doc = contact_store.new_document(
        caller().workspace_id, email=data.email, first_name=data.first_name, last_name=data.last_name,
        attributes=data.attributes, subscribed=data.subscribed, lists=[target["_id"]] if target else [])
    joined = (list_store.member_event(target, "list.member_added", doc),) if target is not None else ()
    if not await contact_store.insert(db(), doc, joined):
        raise _duplicate()
    return one(await contact_with_lists(doc), 201)


@bp.get("/contacts/<uuid:contact_id>")
async def get_contact(contact_id: str):
    return one(await contact_with_lists(await _contact_or_404(contact_id)))


@bp.patch("/contacts/<uuid:contact_id>")
@body(UpdateContact)
async def update_contact(contact_id: str, data: UpdateContact):
    current = await _contact_or_404(contact_id)
    fields = data.model_dump(include=data.model_fields_set - {"attributes"})
    attributes = data.attributes if "attributes" in data.model_fields_set else {}
    check_attributes(attributes)
    if not fields and not attributes:
        return one(await contact_with_lists(current))
    doc = await contact_store.update(
        db(), caller().workspace_id, contact_id, fields=fields,
        set_attributes={k: v for k, v in attributes.items() if v is not None},
        unset_attributes=[k for k, v in attributes.items() if v is None], max_attributes=MAX_ATTRIBUTES)
    if doc is None:
        raise _duplicate()
    return one(await contact_with_lists(doc))


@bp.delete("/contacts/<uuid:contact_id>")
async def delete_contact(contact_id: str):
    if not await contact_store.delete(db(), caller().workspace_id, contact_id):
        raise NotFound("No such contact in this workspace.")
    return one({"id": contact_id, "deleted": True})


@bp.post("/contacts/bulk-delete")
@body(ContactIds)
async def bulk_delete(data: ContactIds):
    """Permanently delete up to 5000 contacts; answers {deleted, not_found}."""
    deleted = await contact_store.delete_many(db(), caller().workspace_id, data.contact_ids)
    gone = set(deleted)
    return one({"deleted": len(deleted),
                "not_found": [i for i in dict.fromkeys(data.contact_ids) if i not in gone]})


@bp.post("/contacts/delete-all")
@body(DeleteAll, allow_empty=True)  # no body at all is "without confirm": confirmation_required
async def delete_all(data: DeleteAll):
    """Soft-delete every contact (confirm must be true); answers {deleted, deletion_id, restorable_until, activity_id}."""
    if data.confirm is not True:
        raise ConfirmationRequired("Send {\"confirm\": true} to delete every contact; nothing was deleted.",
                                   path="confirm")
    entry = await contact_removal.delete_all(db(), caller().workspace_id, caller().key_id)
    return one({"deleted": entry["details"]["count"], "deletion_id": entry["details"]["deletion_id"],
                "restorable_until": entry["details"]["restorable_until"], "activity_id": entry["_id"]})


@bp.post("/contacts/restore")
@body(Restore)
async def restore(data: Restore):
    """Undo a delete-all within 30 days; answers {deletion_id, restored, skipped, activity_id}."""
    entry = await contact_removal.find_deletion(db(), caller().workspace_id, data.deletion_id)
    if entry is None:
        raise NotFound("No delete-all to restore in this workspace.")
    if not contact_removal.restorable(entry):
        raise Conflict(f"The restore window of this delete-all ended at {entry['details']['restorable_until']}.")
    done = await contact_removal.restore(db(), caller().workspace_id, entry, caller().key_id)
    return one({**done["details"], "activity_id": done["_id"]})


@bp.get("/contacts/activity")
@query(ActivityQuery)
async def activity_log(params: ActivityQuery):
    """The workspace activity log (delete-all and restore), newest first."""
    items, total = await activity_store.page(db(), caller().workspace_id, params.action,
                                             limit=params.limit, offset=params.offset)
    return page([activity_store.view(d) for d in items], total=total, limit=params.limit, offset=params.offset)


@bp.get("/contacts/duplicates")
@query(DuplicatesQuery)
async def duplicates(params: DuplicatesQuery):
    """Contacts in two or more static lists, each with its lists [{id, name}]."""
    condition: dict = {"$expr": {"$gte": [{"$size": "$lists"}, 2]}}
    if params.list_id is not None:
        await list_or_404(params.list_id)
        condition = {"$and": [{"lists": params.list_id}, condition]}
    items, total = await contact_store.page(db(), caller().workspace_id, condition,
                                            limit=params.limit, offset=params.offset)
    ids = sorted({i for d in items for i in d["lists"]})
    names = {d["_id"]: d["name"] for d in await list_store.get_many(db(), caller().workspace_id, ids)}
    data = [{**contact_store.view(d), "lists": [{"id": i, "name": names[i]} for i in d["lists"] if i in names]}
            for d in items]
    return page(data, total=total, limit=params.limit, offset=params.offset)
