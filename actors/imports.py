"""The `imports` queue: a contact import sent through the API, run from its stored file.

The job is claimed queued → running once, so a redelivered message does nothing; the
summary (counters and per-row errors with line numbers) is saved on the job after each
row group (pipelines/workflows/bulk_import.py), so a client polling it sees progress."""

from __future__ import annotations

import io
import logging

import dramatiq

from mongo import contact_import, lists
from pipelines.audience.contact_csv import HeaderError, read_rows
from pipelines.core.clock import now_iso
from pipelines.workflows import bulk_import

from . import runtime
from .retries import job_options

log = logging.getLogger("postroom.imports")


@dramatiq.actor(**job_options("imports"))
async def import_contacts(job_id: str) -> None:
    db = runtime.store()
    job = await contact_import.claim_job(db, job_id)
    if job is None:
        return  # already run or running
    data = await contact_import.load_file(db, job_id, job["file_chunks"])
    list_doc = await lists.get(db, job["workspace_id"], job["list_id"]) if job.get("list_id") else None
    try:
        _, rows = read_rows(io.StringIO(data.decode("utf-8-sig"), newline=""))
        summary = await bulk_import.import_rows(
            db, job["workspace_id"], rows, list_doc=list_doc, tag_id=job.get("tag_id"),
            on_progress=lambda done, summary: contact_import.update_job(db, job_id, {**summary}))
        outcome = {**summary, "status": "completed"}
    except (HeaderError, UnicodeDecodeError) as error:  # checked by the front already; kept for safety
        outcome = {"status": "failed", "failure": str(error)}
    except Exception as error:  # noqa: BLE001 - shown on the job; the rows before it are imported (idempotent)
        outcome = {"status": "failed", "failure": f"{type(error).__name__}: {error}"}
    await contact_import.update_job(db, job_id, {**outcome, "finished_at": now_iso()})
    await contact_import.drop_file(db, job_id, job["file_chunks"])
    log.info("contact import %s: %s rows, %s errors", outcome["status"], outcome.get("rows", 0),
             outcome.get("error_count", 0), extra={"job_id": job_id, "workspace_id": job["workspace_id"]})
