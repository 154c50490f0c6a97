"""A contact import (an API import job, `postroom import contacts`): the parsed CSV rows
cut into row groups of ROW_GROUP_ROWS and each upserted in a few bulk commands
(mongo/contact_import.write_row_group), with the summary the job and the command report.

The next row group is read and planned (parsed, its new contacts and their events built,
its pledge serialised) in a thread, and its suppressed addresses looked up, while the store
writes the current one: the store and this process then use the two cores at once instead
of taking turns, and the lookup fills the store's gaps between this row group's commands.
A row group's events are still being recorded while the next one's contacts are written
(the pledge holds them meanwhile), so the store has the next command waiting when it
finishes one instead of idling while this process encodes it; the contacts themselves
are written strictly in the file's order (a later row of an address wins)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from pymongo.asynchronous.database import AsyncDatabase

from mongo import contact_import
from mongo.contact_import import MAX_STORED_ERRORS, PlannedRowGroup
from pipelines.audience.contact_csv import ContactRow, RowError

ROW_GROUP_ROWS = 1000
COUNTERS = ("created", "updated", "unchanged", "suppressed")


@dataclass
class _RowGroupRead:
    """A row group as read from the file: its contact rows planned, and what reading found."""
    planned: PlannedRowGroup
    repeated: set[str]      # addresses an earlier row group already wrote
    rows: int = 0
    duplicates: int = 0
    errors: list[RowError] = field(default_factory=list)


def new_summary() -> dict[str, Any]:
    """`rows` read = `created` + `updated` + `unchanged` + `duplicates` + `error_count`;
    `suppressed` counts, among the first four, rows of suppressed addresses."""
    return {"rows": 0, "created": 0, "updated": 0, "unchanged": 0, "duplicates": 0, "suppressed": 0,
            "error_count": 0, "errors": []}


async def import_rows(db: AsyncDatabase, workspace_id: str, rows: Iterable, *, list_doc: dict | None = None,
                      tag_id: str | None = None,
                      on_progress: Callable[[int, dict], Awaitable[None] | None] | None = None,
                      row_group_rows: int = ROW_GROUP_ROWS) -> dict:
    """Every parsed row (ContactRow or RowError, as pipelines.audience.contact_csv yields them)
    upserted in row groups of `row_group_rows`. The summary (`new_summary`): contacts
    `created`, `updated` and `unchanged`, `duplicates` (rows whose address came earlier in
    the file, in this row group or an earlier one: merged into it, later cells winning),
    `suppressed`, `error_count` and the first MAX_STORED_ERRORS `errors` with their line
    numbers. `on_progress(rows_done, summary)` after each row group."""
    summary = new_summary()
    await contact_import.ensure_unique_addresses(db)
    reader = _row_groups(iter(rows), workspace_id, list_doc, tag_id, row_group_rows)

    async def read_next() -> _RowGroupRead | None:
        group = await asyncio.to_thread(next, reader, None)
        if group is not None:
            await contact_import.withhold_suppressed(db, workspace_id, group.planned, list_doc=list_doc,
                                                     tag_id=tag_id)
        return group

    upcoming = asyncio.ensure_future(read_next())
    recording: Awaitable[None] | None = None  # the previous row group's events, being recorded
    while (group := await upcoming) is not None:
        upcoming = asyncio.ensure_future(read_next())  # read while this one is written
        with _settled_on_failure(upcoming, recording):
            done = await contact_import.write_row_group(db, workspace_id, group.planned, list_doc=list_doc,
                                                        tag_id=tag_id, repeated=group.repeated, settle_later=True)
            with _settled_on_failure(done.recording):
                if recording is not None:
                    await recording
            recording = done.recording
        _add(summary, group, done)
        if on_progress is not None:
            with _settled_on_failure(recording):
                result = on_progress(summary["rows"], summary)
                if result is not None:
                    await result
    if recording is not None:
        await recording
    return summary


def _row_groups(rows: Iterator, workspace_id: str, list_doc: dict | None, tag_id: str | None,
                size: int) -> Iterator[_RowGroupRead]:
    """The file's row groups, each planned; the addresses seen so far are remembered across
    them, so a duplicate is counted once, in whichever row group it falls."""
    seen: set[str] = set()
    while True:
        contact_rows: list[ContactRow] = []
        read = _RowGroupRead(PlannedRowGroup([], [], {}), set())
        in_group: set[str] = set()
        for row in rows:
            read.rows += 1
            if isinstance(row, RowError):
                read.errors.append(row)
            else:
                key = row.email.lower()
                read.duplicates += key in seen or key in in_group
                if key in seen:
                    read.repeated.add(key)
                in_group.add(key)
                contact_rows.append(row)
            if len(contact_rows) >= size:
                break
        if read.rows == 0:
            return
        read.planned = contact_import.plan_row_group(workspace_id, contact_rows, list_doc=list_doc, tag_id=tag_id)
        seen |= in_group
        yield read


def _add(summary: dict, group: _RowGroupRead, done: contact_import.RowGroupOutcome) -> None:
    summary["rows"] += group.rows
    summary["duplicates"] += group.duplicates
    summary["error_count"] += len(group.errors)
    room = MAX_STORED_ERRORS - len(summary["errors"])
    summary["errors"].extend({"line": e.line, "message": e.message, "email": e.email} for e in group.errors[:room])
    for name in COUNTERS:
        summary[name] += getattr(done, name)


@contextlib.contextmanager
def _settled_on_failure(*under_way: Awaitable[Any] | None):
    """When a write fails, the read (or event recording) already under way is left to
    finish with its outcome retrieved, so the failure is the one reported."""
    try:
        yield
    except BaseException:
        for future in under_way:
            if isinstance(future, asyncio.Future):
                future.add_done_callback(lambda f: f.cancelled() or f.exception())
        raise
