"""Start a contact import or export job (POST /contacts/import, /contacts/export). An
import's file is stored with its job before the job is handed to the `imports` actor
(bulk_import.py runs it); an export is ready at once, read as it is downloaded."""

from __future__ import annotations

from pymongo.asynchronous.database import AsyncDatabase

from mongo import contact_import
from pipelines.core.clock import in_seconds
from pipelines.workflows.publisher import Publisher

EXPORT_LIFETIME_SECONDS = 24 * 3600


async def start_import(db: AsyncDatabase, publisher: Publisher, workspace_id: str, file: bytes, *,
                       list_id: str | None, tag_id: str | None) -> dict:
    """The queued import job of the CSV `file` (checked readable by the caller)."""
    job = await contact_import.create_job(db, workspace_id, "import", list_id=list_id, tag_id=tag_id,
                                          file_bytes=len(file), file_chunks=0)
    chunks = await contact_import.store_file(db, job["_id"], file)
    await contact_import.update_job(db, job["_id"], {"file_chunks": chunks})
    await publisher.import_contacts(job["_id"])
    return {**job, "file_chunks": chunks}


async def start_export(db: AsyncDatabase, workspace_id: str, *, list_id: str | None,
                       segment_id: str | None) -> dict:
    """The export job, ready now and gone after EXPORT_LIFETIME_SECONDS."""
    return await contact_import.create_job(db, workspace_id, "export", list_id=list_id, segment_id=segment_id,
                                           status="ready", expires_at=in_seconds(EXPORT_LIFETIME_SECONDS))
