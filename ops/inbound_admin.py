"""What operators use to see the reports `postroom inbound` received, above all those that
were not understood:

- `postroom inbound reports [--status S] [--workspace ID] [--limit N] [--json]` — newest first;
- `postroom inbound show ID [--json]` — one report: what became of it, a summary of its
  headers and MIME parts, and the raw message as received;
- `postroom inbound rerun ID | --all-unparseable [--json]` — parse an unparseable,
  unmatched or failed report again with the code installed now, and apply it. Parsed
  reports are refused: their bounces are already applied.

Exit codes: 0 done; 1 an unknown report, or a rerun that raised (the report stays
`received` and is retried as usual); 2 bad usage (a parsed report to rerun)."""

from __future__ import annotations

import email
import email.parser
import email.policy
import json
import sys

from mongo import inbound_reports
from mongo.inbound_reports import STATUSES

from . import config
from .cli_support import one_or_missing, run_store

SUMMARY_HEADERS = ("From", "To", "Subject", "Date", "Message-ID", "Content-Type")
MAX_PARTS_LISTED = 50
REPORT_FIELDS = ("status", "received_at", "processed_at", "mail_from", "rcpt_tos", "size_bytes", "style",
                 "message_id", "workspace_id", "detail", "attempts", "last_error", "bounce_ids",
                 "ignored_recipients")


def _view(doc: dict) -> dict:
    return {"id": doc["_id"], **{k: doc.get(k) for k in REPORT_FIELDS}}


def headers_summary(raw: bytes) -> tuple[dict, list[str]]:
    """The report's main headers and the content types of its parts (breadth first, at
    most MAX_PARTS_LISTED). The headers are read alone, so they show even for a message
    the MIME parser cannot take apart (one nested a thousand deep exhausts its stack)."""
    top = email.parser.BytesHeaderParser(policy=email.policy.compat32).parsebytes(raw)
    headers = {name: str(top[name]) for name in SUMMARY_HEADERS if top[name] is not None}
    try:
        msg = email.message_from_bytes(raw, policy=email.policy.compat32)
    except RecursionError:
        return headers, ["(too deeply nested to take apart)"]
    parts, queue = [], [msg]
    while queue and len(parts) < MAX_PARTS_LISTED:
        part = queue.pop(0)
        parts.append(part.get_content_type())
        payload = part.get_payload()
        if part.is_multipart() and isinstance(payload, list):
            queue.extend(payload)
    return headers, parts


def cmd_reports(args) -> int:
    docs = run_store(config.load(), lambda db: inbound_reports.list_reports(
        db, status=args.status, workspace_id=args.workspace, limit=args.limit))
    if args.json:
        print(json.dumps([_view(d) for d in docs]))
        return 0
    for d in docs:
        print(f"{d['_id']}  {d['status']:<11}  {d['received_at']}  {d.get('style') or '-':<13}  "
              f"{d.get('message_id') or '-'}  {d.get('detail') or ''}")
    return 0


def cmd_show(args) -> int:
    doc = one_or_missing(config.load(), lambda db: inbound_reports.get(db, args.id), f"no inbound report {args.id}")
    if doc is None:
        return 1
    raw = inbound_reports.raw_bytes(doc)
    headers, parts = headers_summary(raw)
    if args.json:
        print(json.dumps({**_view(doc), "headers": headers, "parts": parts, "raw": doc["raw"]}))
        return 0
    for key, value in _view(doc).items():
        if value not in (None, "", []):
            print(f"{key}: {', '.join(value) if isinstance(value, list) else value}")
    print("headers:")
    for name, value in headers.items():
        print(f"  {name}: {' '.join(value.split())}")
    print(f"parts: {' '.join(parts)}")
    print()
    print(doc["raw"].replace("\r\n", "\n"))
    return 0


def cmd_rerun(args) -> int:
    # local import: the bounce parsing stack, only for this command (postroom's others start faster)
    from pipelines.workflows.bounce_reports import handle_report

    async def work(db):
        if args.all_unparseable:
            ids = await inbound_reports.ids_with_status(db, "unparseable")
        else:
            ids = [args.id]
        results, code = [], 0
        for report_id in ids:
            report = await inbound_reports.get(db, report_id)
            if report is None:
                return [], f"no inbound report {report_id}", 1
            if report["status"] == "parsed":
                return [], f"report {report_id} is parsed: its bounces are applied already", 2
            if report["status"] != "received" and not await inbound_reports.reopen(db, report):
                continue  # someone else reopened it meanwhile
            try:
                await handle_report(db, report_id)
            except Exception as error:  # noqa: BLE001 - counted on the report; shown, and retried as usual
                code = 1
                print(f"{report_id}: raised {type(error).__name__}: {error}", file=sys.stderr)
            after = await inbound_reports.get(db, report_id)
            results.append({**_view(after), "before": report["status"]})
        return results, "", code

    results, error, code = run_store(config.load(), work)
    if error:
        print(error, file=sys.stderr)
        return code
    if args.json:
        print(json.dumps(results))
        return code
    for r in results:
        bounces = len(r.get("bounce_ids") or [])
        print(f"{r['id']}: {r['before']} → {r['status']}"
              + (f" ({r['style']}, {bounces} bounce{'s' if bounces != 1 else ''})" if r["status"] == "parsed"
                 else f" ({r['detail'] or r.get('last_error') or ''})"))
    if not results:
        print("nothing to rerun")
    return code


def add_report_commands(sub) -> None:
    reports = sub.add_parser("reports", help="list received reports, newest first")
    reports.add_argument("--status", choices=STATUSES, help="only reports in this status (e.g. unparseable, failed)")
    reports.add_argument("--workspace", help="only reports about messages of this workspace")
    reports.add_argument("--limit", type=int, default=50)
    reports.add_argument("--json", action="store_true")
    reports.set_defaults(func=cmd_reports)
    show = sub.add_parser("show", help="one report: outcome, headers summary, the raw message")
    show.add_argument("id")
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=cmd_show)
    rerun = sub.add_parser("rerun", help="parse a report again with the current code, and apply it")
    which = rerun.add_mutually_exclusive_group(required=True)
    which.add_argument("id", nargs="?")
    which.add_argument("--all-unparseable", action="store_true", help="every report that is unparseable now")
    rerun.add_argument("--json", action="store_true")
    rerun.set_defaults(func=cmd_rerun)
