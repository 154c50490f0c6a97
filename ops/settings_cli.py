"""Operator commands that change how a workspace or a destination domain is served:

- `postroom workspace set ID [--from-email A] [--company-name N] [--company-address A]
  [--monthly-limit N]`: the default sender, the company details behind the
  {{company_name}}/{{company_address}} merge tags and the footer, the monthly email limit.
- `postroom domain-limit set DOMAIN --rate-per-minute N --concurrency N` and
  `postroom domain-limit list`: per destination domain delivery limits (e.g. a warm-up).

Bad input exits 2 with a message; an unknown workspace exits 1."""

from __future__ import annotations

import json
import sys

from mongo import send_limits, workspaces
from pipelines.audience.addresses import normalize
from pipelines.domains.dns_records import valid_hostname

from . import config
from .cli_support import run_store

COMPANY_NAME_MAX_CHARS = 200
COMPANY_ADDRESS_MAX_CHARS = 500


class Refused(ValueError):
    """Operator input that cannot be stored; the message says why."""


def _run_store(work):
    return run_store(config.load(), work)


def _text(value: str, flag: str, max_chars: int, *, multiline: bool) -> str:
    value = value.strip()
    if len(value) > max_chars:
        raise Refused(f"{flag}: at most {max_chars} characters")
    if any(ord(c) < 32 and not (multiline and c == "\n") for c in value):
        raise Refused(f"{flag}: control characters are not allowed")
    return value


def workspace_changes(args) -> tuple[dict, dict]:
    """(top-level fields, `settings` entries) to write, validated."""
    fields, settings = {}, {}
    if args.from_email is not None:
        try:
            fields["default_from_email"] = normalize(args.from_email)
        except ValueError as error:
            raise Refused(f"--from-email: {error}") from None
    if args.company_name is not None:
        settings["company_name"] = _text(args.company_name, "--company-name", COMPANY_NAME_MAX_CHARS,
                                         multiline=False)
    if args.company_address is not None:
        # Postal addresses span lines; the footer keeps them.
        settings["company_address"] = _text(args.company_address.replace("\\n", "\n"), "--company-address",
                                            COMPANY_ADDRESS_MAX_CHARS, multiline=True)
    if args.monthly_limit is not None:
        if args.monthly_limit < 0:
            raise Refused("--monthly-limit: a number of emails per month, 0 for unlimited")
        fields["monthly_email_limit"] = args.monthly_limit
    if not fields and not settings:
        raise Refused("nothing to set: give --from-email, --company-name, --company-address or --monthly-limit")
    return fields, settings


def workspace_view(ws: dict) -> dict:
    settings = ws.get("settings") or {}
    return {"id": ws["_id"], "name": ws["name"], "from_email": ws.get("default_from_email"),
            "company_name": settings.get("company_name"), "company_address": settings.get("company_address"),
            "monthly_email_limit": ws.get("monthly_email_limit")}


def cmd_workspace_set(args) -> int:
    try:
        fields, settings = workspace_changes(args)
    except Refused as error:
        print(error, file=sys.stderr)
        return 2

    async def work(db):
        ws = await workspaces.get(db, args.workspace_id)
        if ws is None:
            return None
        # The whole `settings` dict is written back: other entries stay, no dotted paths.
        return await workspaces.update_settings(
            db, ws["_id"], {**fields, "settings": {**(ws.get("settings") or {}), **settings}})
    ws = _run_store(work)
    if ws is None:
        print(f"no workspace {args.workspace_id}", file=sys.stderr)
        return 1
    view = workspace_view(ws)
    if args.json:
        print(json.dumps(view))
    else:
        print("\n".join(f"{name}: {value}" for name, value in view.items()))
    return 0


def domain_name(value: str) -> str:
    name = value.strip().lower().rstrip(".")
    if not valid_hostname(name):
        raise Refused(f"{value!r} is not a domain name (e.g. gmail.com)")
    return name


def cmd_domain_limit_set(args) -> int:
    try:
        domain = domain_name(args.domain)
        if args.rate_per_minute < 0 or args.concurrency < 0:
            raise Refused("--rate-per-minute and --concurrency: 0 (unlimited) or more")
    except Refused as error:
        print(error, file=sys.stderr)
        return 2

    async def work(db):
        await send_limits.set_domain_limit(db, domain, rate_per_minute=args.rate_per_minute,
                                           concurrency=args.concurrency)
    _run_store(work)
    row = {"domain": domain, "rate_per_minute": args.rate_per_minute, "concurrency": args.concurrency}
    print(json.dumps(row) if args.json else
          f"{domain}: {args.rate_per_minute} per minute, {args.concurrency} at once (0 = unlimited)")
    return 0


def cmd_domain_limit_list(args) -> int:
    rows = [{"domain": d["_id"], "rate_per_minute": d["rate_per_minute"], "concurrency": d["concurrency"],
             "updated_at": d.get("updated_at")} for d in _run_store(send_limits.list_domain_limits)]
    if args.json:
        print(json.dumps(rows))
        return 0
    for row in rows:
        print(f"{row['domain']:40s} {row['rate_per_minute']:>8d}/min {row['concurrency']:>5d} at once")
    return 0


def add_workspace_set(workspace_actions) -> None:
    """`workspace set`, added by ops/cli.py next to `workspace create` and `list`."""
    wset = workspace_actions.add_parser("set", help="change a workspace's sender, company details or monthly limit")
    wset.add_argument("workspace_id")
    wset.add_argument("--from-email", dest="from_email", help="default sender address")
    wset.add_argument("--company-name", dest="company_name", help="{{company_name}}; '' clears it")
    wset.add_argument("--company-address", dest="company_address",
                      help="{{company_address}} and the footer; \\n separates lines; '' clears it")
    wset.add_argument("--monthly-limit", dest="monthly_limit", type=int,
                      help="emails per calendar month, 0 for unlimited")
    wset.add_argument("--json", action="store_true")
    wset.set_defaults(func=cmd_workspace_set)


def add_commands(sub) -> None:
    limits = sub.add_parser("domain-limit", help="delivery limits per destination domain"
                            ).add_subparsers(dest="action", required=True)
    lset = limits.add_parser("set", help="set one destination domain's rate and concurrency")
    lset.add_argument("domain")
    lset.add_argument("--rate-per-minute", dest="rate_per_minute", type=int, required=True,
                      help="deliveries per minute to this domain, 0 for unlimited")
    lset.add_argument("--concurrency", type=int, required=True,
                      help="simultaneous SMTP deliveries to this domain, 0 for unlimited")
    lset.add_argument("--json", action="store_true")
    lset.set_defaults(func=cmd_domain_limit_set)
    llist = limits.add_parser("list", help="the domains with their own limits")
    llist.add_argument("--json", action="store_true")
    llist.set_defaults(func=cmd_domain_limit_list)
