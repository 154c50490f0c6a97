"""Contacts: CRUD, search, bulk delete, delete-all (soft) and restore, the activity log,
duplicates across lists."""

from __future__ import annotations

import io
from typing import Annotated, Any

from pydantic import AfterValidator, Field, StringConstraints
from pydantic_core import PydanticCustomError
from quart import Blueprint, request

from front.audience import members_filter
from mongo import activity as activity_store
from mongo import contact_import, contact_removal
from mongo import contacts as contact_store
from mongo import lists as list_store
from mongo import lists as lists_store
from mongo import segments as segment_store
from mongo import tags as tag_store
from pipelines import views
from pipelines.audience.contact_csv import HeaderError, export_header, export_row, export_writer, read_rows
from pipelines.audience.contact_search import search_filter
from pipelines.audience.segment_rules import ATTRIBUTE_NAME, compile_conditions
from pipelines.core.clock import now_iso
from pipelines.core.errors import ConfirmationRequired, ValidationFailed
from pipelines.workflows import contact_jobs, manage_contacts
from pipelines.workflows import update_contact as updating

from ..audience import MAX_ATTRIBUTES, check_attributes, contact_views, contact_with_lists, contacts_page
from ..enqueue import enqueue
from ..lookup import found, owned
from ..pagination import PageQuery, page
from ..resource_routes import delete_route, list_route, read_route
from ..responses import one, streamed
from ..runtime import caller, db
from ..types import EmailAddress, FreeJson, Id, Name100, Strict, Uuid
from ..validation import body, query

bp = Blueprint("contacts", __name__, url_prefix="/api/v1")

MAX_BULK_DELETE = 5000


def _at_most_max_attributes(attributes: dict[str, Any]) -> dict[str, Any]:
    # counted while the body is validated (for a large body, in its parser process): a body
    # of millions of attributes is refused there, not shipped back whole to the serving loop
    # (unpickling 2.5 M of them held it 2.7 s)
    if len(attributes) > MAX_ATTRIBUTES:
        raise PydanticCustomError("too_long", "at most {limit} attributes.", {"limit": MAX_ATTRIBUTES})
    return attributes


# Names the rule language can address, values any JSON (no integer beyond 64 bits); null
# drops a key (audience.check_attributes also bounds each value's size)
Attributes = Annotated[dict[str, Any], AfterValidator(_at_most_max_attributes), FreeJson(lambda value: {
    "type": "object", "maxProperties": MAX_ATTRIBUTES, "additionalProperties": value,
    "propertyNames": {"pattern": ATTRIBUTE_NAME.pattern}})]


class CreateContact(Strict):
    email: EmailAddress = Field(description="Required; normalised (domain lower-cased) and unique "
                                            "per workspace among live contacts, compared case-insensitively.")
    first_name: Name100 | None = None
    last_name: Name100 | None = None
    attributes: Attributes = Field(default_factory=dict, description=(
        "Custom values (up to 100; names of letters, digits, _ and -). Null values are dropped."))
    subscribed: bool = Field(True, description="Default true.")
    list_id: Uuid | None = Field(None, description="Adds the new contact to this static list (a UUID; "
                                                   "anything else is 400, an unknown list 404).")


class UpdateContact(Strict):
    email: EmailAddress = Field(None, description="A new address; must not belong to another live contact.")
    first_name: Name100 | None = Field(None, description="null clears.")
    last_name: Name100 | None = Field(None, description="null clears.")
    attributes: Attributes = Field(None, description=(
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


@bp.get("/contacts")
@query(ContactQuery)
async def list_contacts(params: ContactQuery):
    condition = search_filter(params.search, subscribed=params.subscribed, bounced=params.bounced)
    return await contacts_page(condition, params)


@bp.post("/contacts")
@body(CreateContact)
async def create_contact(data: CreateContact):
    check_attributes(data.attributes)
    target = await owned(list_store, data.list_id, "list") if data.list_id is not None else None
    if target is not None and target["type"] != "static":
        raise ValidationFailed("list_id: contacts join a dynamic list by matching its conditions.",
                               path="list_id")
    doc = await manage_contacts.create(
        db(), caller().workspace_id, email=data.email, first_name=data.first_name, last_name=data.last_name,
        attributes=data.attributes, subscribed=data.subscribed, static_list=target)
    return one(await contact_with_lists(doc), 201)


read_route(bp, "/contacts/<uuid:contact_id>", "get_contact", contact_store, "contact", contact_with_lists)


@bp.patch("/contacts/<uuid:contact_id>")
@body(UpdateContact)
async def update_contact(contact_id: str, data: UpdateContact):
    current = await owned(contact_store, contact_id, "contact")
    fields = data.model_dump(include=data.model_fields_set - {"attributes"})
    attributes = data.attributes if "attributes" in data.model_fields_set else {}
    check_attributes(attributes)
    if not fields and not attributes:
        return one(await contact_with_lists(current))
    doc = await updating.update(db(), caller().workspace_id, contact_id, fields=fields,
                                attributes=attributes, max_attributes=MAX_ATTRIBUTES)
    if doc is None:
        raise manage_contacts.duplicate()
    return one(await contact_with_lists(doc))


delete_route(bp, "/contacts/<uuid:contact_id>", "delete_contact", manage_contacts.delete, "contact")


@bp.post("/contacts/bulk-delete")
@body(ContactIds)
async def bulk_delete(data: ContactIds):
    """Permanently delete up to 5000 contacts; answers {deleted, not_found}."""
    return one(await manage_contacts.delete_many(db(), caller().workspace_id, data.contact_ids))


@bp.post("/contacts/delete-all")
@body(DeleteAll, allow_empty=True)  # no body at all is "without confirm": confirmation_required
async def delete_all(data: DeleteAll):
    """Soft-delete every contact (confirm must be true); answers {deleted, deletion_id,
    restorable_until, activity_id}."""
    if data.confirm is not True:
        raise ConfirmationRequired("Send {\"confirm\": true} to delete every contact; nothing was deleted.",
                                   path="confirm")
    entry = await manage_contacts.delete_all(db(), caller().workspace_id, caller().key_id)
    return one({"deleted": entry["details"]["count"], "deletion_id": entry["details"]["deletion_id"],
                "restorable_until": entry["details"]["restorable_until"], "activity_id": entry["_id"]})


@bp.post("/contacts/restore")
@body(Restore)
async def restore(data: Restore):
    """Undo a delete-all within 30 days; answers {deletion_id, restored, skipped, activity_id}."""
    entry = await found(contact_removal.find_deletion(db(), caller().workspace_id, data.deletion_id),
                        "No delete-all to restore in this workspace.")
    done = await manage_contacts.restore(db(), caller().workspace_id, entry, caller().key_id)
    return one({**done["details"], "activity_id": done["_id"]})


list_route(bp, "/contacts/activity", "activity_log", ActivityQuery, activity_store.page, by=["action"],
           view=views.activity, summary="The workspace activity log (delete-all and restore), newest first.")


@bp.get("/contacts/duplicates")
@query(DuplicatesQuery)
async def duplicates(params: DuplicatesQuery):
    """Contacts in two or more static lists, each with its lists [{id, name}]."""
    condition: dict = {"$expr": {"$gte": [{"$size": "$lists"}, 2]}}
    if params.list_id is not None:
        await owned(list_store, params.list_id, "list")
        condition = {"$and": [{"lists": params.list_id}, condition]}
    items, total = await contact_store.page(db(), caller().workspace_id, condition,
                                            limit=params.limit, offset=params.offset)
    ids = sorted({i for d in items for i in d["lists"]})
    names = {d["_id"]: d["name"] for d in await list_store.get_many(db(), caller().workspace_id, ids)}
    data = [{**shown, "lists": [{"id": i, "name": names[i]} for i in d["lists"] if i in names]}
            for d, shown in zip(items, await contact_views(items), strict=True)]
    return page(data, total=total, limit=params.limit, offset=params.offset)


# -- import and export (jobs) ---------------------------------------------------------------

class ImportQuery(Strict):
    list_id: Id | None = Field(None, description="Add every imported contact to this static list.")
    tag_id: Id | None = Field(None, description="Tag every imported contact with this tag.")


class ExportRequest(Strict):
    list_id: Id | None = Field(None, description="Only this list's members (static or dynamic).")
    segment_id: Id | None = Field(None, description="Only contacts matching this segment.")


@bp.post("/contacts/import")
@query(ImportQuery)
async def start_import(params: ImportQuery):
    """Import a CSV file (the request body, `Content-Type: text/csv`, UTF-8, a BOM is
    fine): columns email, first_name, last_name, subscribed; any other column is an
    attribute (`name:type` declares string/number/integer/boolean, else inferred).
    Upserts by address. Answers 202 with a job to poll at GET /contacts/import/{job_id};
    per-row errors (with line numbers) are in the job. A file that cannot be imported at
    all (no email column, a bad column name, not UTF-8) is refused with 400 here."""
    data = await request.get_data()
    try:
        text = data.decode("utf-8-sig")
        read_rows(io.StringIO(text, newline=""))
    except UnicodeDecodeError:
        raise ValidationFailed("body: the CSV file must be UTF-8.", path="body") from None
    except HeaderError as error:
        raise ValidationFailed(f"body: {error}.", path="body") from None
    target = await owned(list_store, params.list_id, "list") if params.list_id is not None else None
    if target is not None and target["type"] != "static":
        raise ValidationFailed("list_id: contacts join a dynamic list by matching its conditions.", path="list_id")
    if params.tag_id is not None:
        await owned(tag_store, params.tag_id, "tag")
    workspace_id = caller().workspace_id
    job = await enqueue(lambda publisher: contact_jobs.start_import(
        db(), publisher, workspace_id, data, list_id=params.list_id, tag_id=params.tag_id))
    return one(views.contact_job(job), 202)


@bp.get("/contacts/import/<job_id>")
async def get_import(job_id: str):
    """An import job: status (queued, running, completed, failed), counters so far
    (rows, created, updated, unchanged, duplicates, suppressed, error_count) and `errors`
    [{line, message, email}] (the first 1000)."""
    return one(views.contact_job(await _live_job(job_id, "import")))


@bp.post("/contacts/export")
@body(ExportRequest, allow_empty=True)
async def start_export(data: ExportRequest):
    """Prepare an export of live contacts (all, a list's members or a segment's matches):
    answers 201 with the job and its `download_url`; the download streams CSV in `_id`
    order, as the contacts are when it is read. Jobs expire after 24 hours."""
    if data.list_id is not None and data.segment_id is not None:
        raise ValidationFailed("segment_id: give list_id or segment_id, not both.", path="segment_id")
    if data.list_id is not None:
        await owned(list_store, data.list_id, "list")
    if data.segment_id is not None:
        await owned(segment_store, data.segment_id, "segment")
    job = await contact_jobs.start_export(db(), caller().workspace_id, list_id=data.list_id,
                                          segment_id=data.segment_id)
    return one(views.contact_job(job), 201)


@bp.get("/contacts/export/<job_id>")
async def get_export(job_id: str):
    return one(views.contact_job(await _live_job(job_id, "export")))


@bp.get("/contacts/export/<job_id>/download")
async def download_export(job_id: str):
    """The export as CSV (text/csv), streamed a page of contacts at a time."""
    job = await _live_job(job_id, "export")
    workspace_id = caller().workspace_id
    condition = None
    if job.get("list_id"):
        list_doc = await found(lists_store.get(db(), workspace_id, job["list_id"]),
                               "The list of this export was deleted.")
        condition = members_filter(list_doc)
    elif job.get("segment_id"):
        segment = await found(segment_store.get(db(), workspace_id, job["segment_id"]),
                              "The segment of this export was deleted.")
        condition = compile_conditions(segment["conditions"])
    store = db()
    names = await contact_import.export_attribute_names(store, workspace_id, condition)

    async def lines():
        buffer = io.StringIO()
        out = export_writer(buffer)
        out.writerow(export_header(names))
        async for doc in contact_import.export_contacts(store, workspace_id, condition):
            out.writerow(export_row(doc, names))
            if buffer.tell() > 64 * 1024:
                yield buffer.getvalue().encode()
                buffer.seek(0)
                buffer.truncate()
        yield buffer.getvalue().encode()
    return streamed(lines(), "text/csv; charset=utf-8", f"contacts-{job_id}.csv", 200)


async def _live_job(job_id: str, kind: str) -> dict:
    job = await contact_import.get_job(db(), caller().workspace_id, job_id)
    live = job is not None and job["kind"] == kind and job.get("expires_at", "9") >= now_iso()
    return await found(job if live else None,
                       f"No such {kind} job in this workspace (export jobs expire after 24 hours).")
