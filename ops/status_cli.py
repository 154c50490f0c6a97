"""One screen for an operator, and the work that failed for good:

- `postroom status [--json] [--window SECONDS]` — processes seen recently (heartbeats),
  queue depths, the oldest queued and oldest due items, messages per status in the last
  hour, and what is stuck;
- `postroom webhooks failed [--workspace ID] [--limit N] [--json]` and
  `postroom webhooks replay ID | --all-failed [--workspace ID] [--json]` — a replayed
  delivery is pending again with its attempts from zero; the scheduler hands it to a
  worker on its next pass;
- `postroom messages failed [--workspace ID] [--since ISO|30m|2h|1d] [--limit N] [--json]`.

Exit codes: 0 done; 1 an unknown or not-failed delivery to replay; 2 bad usage."""

from __future__ import annotations

import json
import re
import sys
from datetime import timedelta

from mongo import operations, processes
from pipelines.core.clock import in_seconds, iso, parse_iso, utcnow

from . import config
from .cli_support import run_store

HOUR_SECONDS = 3600


def _queue_rows(settings) -> tuple[list[dict], str]:
    from actors.queue_inspection import counts_or_note  # local import: the broker stack (ops/cli.py cmd_up)

    from .queues import fresh_beats  # local import: beside the one above
    return counts_or_note(settings.amqp_url, [] if settings.amqp_url else fresh_beats(settings))


def gather_status(settings, window_seconds: float) -> dict:
    async def work(db):
        seen = await processes.recent(db, in_seconds(-HOUR_SECONDS))
        return {
            "processes": [{"name": p["_id"], "kind": p.get("kind"), "seen_at": p.get("seen_at"),
                           "age_seconds": operations.age_seconds(p.get("seen_at")),
                           "alive": p.get("seen_at", "") >= in_seconds(-window_seconds),
                           "passes": p.get("passes", 0), **({"queues": p["queues"]} if p.get("queues") else {})}
                          for p in seen],
            "oldest": await operations.oldest_waiting(db),
            "messages_last_hour": await operations.messages_by_status_since(db, in_seconds(-HOUR_SECONDS)),
            "stuck": await operations.stuck(db),
        }
    report = run_store(settings, work)
    report["queues"], report["queues_note"] = _queue_rows(settings)
    return report


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = max(seconds, 0)
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def cmd_status(args) -> int:
    report = gather_status(config.load(), args.window)
    if args.json:
        print(json.dumps(report))
        return 0
    print("processes (seen in the last hour)")
    if not report["processes"]:
        print("  none")
    for p in report["processes"]:
        state = "alive" if p["alive"] else "STALE"
        extra = f"  queues={','.join(p['queues'])}" if p.get("queues") else ""
        print(f"  {p['kind']:<10} {state:<6} seen {_age(p['age_seconds']):>5} ago  {p['name']}{extra}")
    print("queues (ready / unacked / consumers)")
    if report["queues_note"]:
        print(f"  {report['queues_note']}")
    for q in report["queues"]:
        fmt = lambda v: "-" if v is None else str(v)  # noqa: E731
        print(f"  {q['queue']:<16} {fmt(q['ready']):>7} {fmt(q['unacked']):>7} {fmt(q['consumers']):>5}")
    print("oldest waiting")
    for kind, item in report["oldest"].items():
        if item is None:
            print(f"  {kind:<22} none")
        else:
            print(f"  {kind:<22} {_age(item['age_seconds']):>5}  {item['id']}")
    print("messages in the last hour, by status")
    counts = report["messages_last_hour"]
    print("  " + ("  ".join(f"{status}={n}" for status, n in counts.items()) if counts else "none"))
    print("stuck")
    for name, count in report["stuck"].items():
        print(f"  {name:<30} {count}{'  <-' if count else ''}")
    return 0


def _delivery_view(doc: dict) -> dict:
    return {"id": doc["_id"], "workspace_id": doc["workspace_id"], "webhook_id": doc["webhook_id"],
            "event": doc["event"], "status": doc["status"], "attempt_count": doc["attempt_count"],
            "last_status_code": doc.get("last_status_code"), "last_error": doc.get("last_error"),
            "failed_at": doc.get("failed_at"), "replays": int(doc.get("replays") or 0),
            "created_at": doc["created_at"]}


def cmd_webhooks_failed(args) -> int:
    docs = run_store(config.load(), lambda db: operations.failed_deliveries(db, args.workspace, args.limit))
    rows = [_delivery_view(d) for d in docs]
    if args.json:
        print(json.dumps(rows))
        return 0
    for r in rows:
        reason = r["last_error"] or f"HTTP {r['last_status_code']}"
        print(f"{r['id']}  {r['event']:<22} {r['attempt_count']} attempts  failed {r['failed_at']}  {reason}")
    if not rows:
        print("no failed webhook deliveries")
    return 0


def cmd_webhooks_replay(args) -> int:
    async def work(db):
        ids = await operations.failed_delivery_ids(db, args.workspace) if args.all_failed else [args.id]
        done, refused = [], []
        for delivery_id in ids:
            doc = await operations.replay_delivery(db, delivery_id)
            (done if doc is not None else refused).append(_delivery_view(doc) if doc else delivery_id)
        return done, refused
    done, refused = run_store(config.load(), work)
    if args.json:
        print(json.dumps({"replayed": done, "refused": refused}))
    else:
        for r in done:
            print(f"{r['id']}: failed → pending (replay {r['replays']})")
        for delivery_id in refused:
            print(f"{delivery_id}: no failed delivery with this id", file=sys.stderr)
        if not done and not refused:
            print("nothing to replay")
    return 1 if refused else 0


_RELATIVE = re.compile(r"^(\d+)([mhd])$")


def since_iso(text: str | None) -> str | None:
    """`--since`: an ISO timestamp or a relative age such as 30m, 2h, 1d."""
    if text is None:
        return None
    match = _RELATIVE.match(text)
    if match:
        unit = {"m": "minutes", "h": "hours", "d": "days"}[match.group(2)]
        return iso(utcnow() - timedelta(**{unit: int(match.group(1))}))
    return iso(parse_iso(text))


def cmd_messages_failed(args) -> int:
    try:
        since = since_iso(args.since)
    except ValueError:
        print(f"--since {args.since!r}: give an ISO timestamp or an age like 30m, 2h, 1d", file=sys.stderr)
        return 2
    docs = run_store(config.load(), lambda db: operations.failed_messages(db, args.workspace, since, args.limit))
    rows = [{"id": d["_id"], "workspace_id": d["workspace_id"], "to": d.get("to"), "subject": d.get("subject"),
             "campaign_id": d.get("campaign_id"), "failed_at": d.get("failed_at") or d.get("updated_at"),
             "reason": d.get("error") or d.get("last_error") or next(
                 (h.get("detail") for h in reversed(d.get("history") or []) if h.get("status") == "failed"), None)}
            for d in docs]
    if args.json:
        print(json.dumps(rows))
        return 0
    for r in rows:
        to = ", ".join(r["to"]) if isinstance(r["to"], list) else (r["to"] or "")
        print(f"{r['id']}  {r['failed_at']}  ws={r['workspace_id']}  to={to}  {r['reason'] or ''}")
    if not rows:
        print("no failed messages")
    return 0


def add_commands(sub) -> None:
    status = sub.add_parser("status", help="one screen: processes, queues, oldest waiting items, stuck work")
    status.add_argument("--window", type=float, default=60.0,
                        help="a process not seen for this many seconds is shown STALE")
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=cmd_status)

    hooks = sub.add_parser("webhooks", help="webhook deliveries that failed for good").add_subparsers(
        dest="action", required=True)
    failed = hooks.add_parser("failed", help="deliveries that failed for good, newest first")
    failed.add_argument("--workspace")
    failed.add_argument("--limit", type=int, default=50)
    failed.add_argument("--json", action="store_true")
    failed.set_defaults(func=cmd_webhooks_failed)
    replay = hooks.add_parser("replay", help="make a failed delivery pending again (attempts from zero)")
    which = replay.add_mutually_exclusive_group(required=True)
    which.add_argument("id", nargs="?")
    which.add_argument("--all-failed", action="store_true")
    replay.add_argument("--workspace", help="with --all-failed: only this workspace's")
    replay.add_argument("--json", action="store_true")
    replay.set_defaults(func=cmd_webhooks_replay)

    messages = sub.add_parser("messages", help="messages that failed").add_subparsers(dest="action", required=True)
    mfailed = messages.add_parser("failed", help="failed messages with their reasons, newest first")
    mfailed.add_argument("--workspace")
    mfailed.add_argument("--since", help="an ISO timestamp or an age: 30m, 2h, 1d")
    mfailed.add_argument("--limit", type=int, default=50)
    mfailed.add_argument("--json", action="store_true")
    mfailed.set_defaults(func=cmd_messages_failed)
