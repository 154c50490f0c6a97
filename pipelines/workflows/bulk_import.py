"""A contact import (an API import job, `postroom contacts import`): every parsed CSV row
upserted in batches (mongo/contact_import.upsert_batch: two reads and two bulk writes a
batch), with the summary the job and the command report."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from pymongo.asynchronous.database import AsyncDatabase

from mongo import contact_import
from mongo.contact_import import MAX_STORED_ERRORS
from pipelines.audience.contact_csv import ContactRow, RowError

BATCH_ROWS = 1000


async def import_rows(db: AsyncDatabase, workspace_id: str, rows: Iterable, *, list_doc: dict | None = None,
                      tag_id: str | None = None,
                      on_progress: Callable[[int, dict], Awaitable[None] | None] | None = None,
                      batch_rows: int = BATCH_ROWS) -> dict:
    """Every parsed row (ContactRow or RowError, as pipelines.audience.contact_csv yields them)
    upserted in batches of `batch_rows`. The summary: `rows` read, contacts `created`,
    `updated` and `unchanged`, `duplicates` (rows whose address came earlier in the file:
    merged into it, later cells winning), `suppressed` (rows of suppressed addresses),
    `error_count` and the first MAX_STORED_ERRORS `errors` with their line numbers.
    `on_progress(rows_done, summary)` after each batch."""
    summary: dict[str, Any] = {"rows": 0, "created": 0, "updated": 0, "unchanged": 0, "duplicates": 0, "suppressed": 0,
               "error_count": 0, "errors": []}
    seen: set[str] = set()
    batch: list[ContactRow] = []

    async def flush() -> None:
        if batch:
            done = await contact_import.upsert_batch(db, workspace_id, batch, list_doc=list_doc, tag_id=tag_id)
            for name in ("created", "updated", "unchanged", "suppressed"):
                summary[name] += getattr(done, name)
            batch.clear()
        if on_progress is not None:
            result = on_progress(summary["rows"], summary)
            if result is not None:
                await result

    for row in rows:
        summary["rows"] += 1
        if isinstance(row, RowError):
            summary["error_count"] += 1
            if len(summary["errors"]) < MAX_STORED_ERRORS:
                summary["errors"].append({"line": row.line, "message": row.message, "email": row.email})
        else:
            key = row.email.lower()
            if key in seen:
                summary["duplicates"] += 1  # merged into the address's earlier row (later cells win)
            seen.add(key)
            batch.append(row)
        if len(batch) >= batch_rows:
            await flush()
    await flush()
    return summary
