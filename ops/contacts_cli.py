"""Contacts in and out from the command line:

- `postroom import contacts FILE.csv --workspace ID [--list ID] [--tag ID] [--json]` —
  upsert by address in row groups, a progress bar (rows, rows/s, ETA) on stderr, a summary
  at the end and every bad row with its line number;
- `postroom export contacts --workspace ID [--list ID | --segment ID] > out.csv` —
  streamed in `_id` order, a page at a time.

Exit codes: 0 every row imported; 1 some rows had errors (the others were imported),
or an unknown workspace, list, tag or segment; 2 a file that cannot be imported at all
(no email column, a bad column name, not UTF-8): nothing was written."""

from __future__ import annotations

import csv
import json
import sys
import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from mongo import contact_import, lists, segments, tags, workspaces
from pipelines.audience.contact_csv import HeaderError, export_header, export_row, export_writer, read_rows
from pipelines.audience.segment_rules import compile_conditions
from pipelines.workflows import bulk_import

from . import config
from .cli_support import run_store


def _count_records(path: str) -> int:
    with open(path, encoding="utf-8-sig", newline="") as handle:
        return max(sum(1 for _ in csv.reader(handle)) - 1, 0)


async def _target(db, workspace_id: str, list_id: str | None, tag_id: str | None):
    """(list document, error): the list must be static; the tag must exist."""
    if await workspaces.get(db, workspace_id) is None:
        return None, f"no workspace {workspace_id}"
    list_doc = None
    if list_id is not None:
        list_doc = await lists.get(db, workspace_id, list_id)
        if list_doc is None:
            return None, f"no list {list_id} in workspace {workspace_id}"
        if list_doc["type"] != "static":
            return None, f"list {list_id} is dynamic: contacts join it by matching its conditions"
    if tag_id is not None and await tags.get(db, workspace_id, tag_id) is None:
        return None, f"no tag {tag_id} in workspace {workspace_id}"
    return list_doc, ""


def cmd_import_contacts(args) -> int:
    try:
        total = _count_records(args.file)
        handle = open(args.file, encoding="utf-8-sig", newline="")
        columns, rows = read_rows(handle)
    except (OSError, UnicodeDecodeError, HeaderError, csv.Error) as error:
        print(f"{args.file}: {error}; nothing imported", file=sys.stderr)
        return 2
    progress = Progress(TextColumn("importing"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.fields[rate]:>8} rows/s"), TimeRemainingColumn(),
                        console=Console(stderr=True), transient=False)
    task = progress.add_task("import", total=total, rate="-")
    started = time.monotonic()

    def advance(done: int, summary: dict) -> None:
        elapsed = max(time.monotonic() - started, 1e-6)
        progress.update(task, completed=done, rate=f"{done / elapsed:,.0f}")

    async def work(db):
        list_doc, error = await _target(db, args.workspace, args.list, args.tag)
        if error:
            return None, error
        with progress:
            return await bulk_import.import_rows(db, args.workspace, rows, list_doc=list_doc,
                                                    tag_id=args.tag, on_progress=advance), ""
    try:
        summary, error = run_store(config.load(), work)
    except UnicodeDecodeError as decode_error:  # found after some row groups were written
        print(f"{args.file}: not UTF-8 ({decode_error}); the rows before it were imported", file=sys.stderr)
        return 1
    finally:
        handle.close()
    if error:
        print(error, file=sys.stderr)
        return 1
    summary["seconds"] = round(time.monotonic() - started, 3)
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"{summary['rows']} rows in {summary['seconds']} s: {summary['created']} created, "
              f"{summary['updated']} updated, {summary['unchanged']} unchanged, {summary['duplicates']} "
              f"duplicates merged, {summary['suppressed']} suppressed (kept unsubscribed), "
              f"{summary['error_count']} errors")
        for problem in summary["errors"]:
            print(f"line {problem['line']}: {problem['message']}", file=sys.stderr)
        if summary["error_count"] > len(summary["errors"]):
            print(f"… and {summary['error_count'] - len(summary['errors'])} more errors", file=sys.stderr)
    return 1 if summary["error_count"] else 0


async def selection(db, workspace_id: str, list_id: str | None, segment_id: str | None) -> tuple[dict | None, str]:
    """The filter of the contacts to export (None: all) or an error."""
    from front.audience import members_filter  # local import: it loads the front (quart); see ops/cli.py cmd_up
    if await workspaces.get(db, workspace_id) is None:
        return None, f"no workspace {workspace_id}"
    if list_id is not None:
        doc = await lists.get(db, workspace_id, list_id)
        return (members_filter(doc), "") if doc else (None, f"no list {list_id} in workspace {workspace_id}")
    if segment_id is not None:
        doc = await segments.get(db, workspace_id, segment_id)
        return ((compile_conditions(doc["conditions"]), "") if doc
                else (None, f"no segment {segment_id} in workspace {workspace_id}"))
    return None, ""


def cmd_export_contacts(args) -> int:
    out = export_writer(sys.stdout)

    async def work(db):
        condition, error = await selection(db, args.workspace, args.list, args.segment)
        if error:
            return error
        names = await contact_import.export_attribute_names(db, args.workspace, condition)
        out.writerow(export_header(names))
        count = 0
        async for doc in contact_import.export_contacts(db, args.workspace, condition):
            out.writerow(export_row(doc, names))
            count += 1
        print(f"{count} contacts exported", file=sys.stderr)
        return ""
    error = run_store(config.load(), work)
    if error:
        print(error, file=sys.stderr)
        return 1
    return 0


def add_commands(sub) -> None:
    imp = sub.add_parser("import", help="bulk imports").add_subparsers(dest="what", required=True)
    contacts = imp.add_parser("contacts", help="upsert contacts from a CSV file (email, first_name, last_name, "
                                               "any other column an attribute; `name:type` declares a type)")
    contacts.add_argument("file")
    contacts.add_argument("--workspace", required=True)
    contacts.add_argument("--list", help="add every imported contact to this static list")
    contacts.add_argument("--tag", help="tag every imported contact with this tag id")
    contacts.add_argument("--json", action="store_true", help="the summary as JSON on stdout")
    contacts.set_defaults(func=cmd_import_contacts)

    exp = sub.add_parser("export", help="bulk exports").add_subparsers(dest="what", required=True)
    contacts = exp.add_parser("contacts", help="live contacts as CSV on stdout")
    contacts.add_argument("--workspace", required=True)
    which = contacts.add_mutually_exclusive_group()
    which.add_argument("--list", help="only this list's members")
    which.add_argument("--segment", help="only contacts matching this segment")
    contacts.set_defaults(func=cmd_export_contacts)
