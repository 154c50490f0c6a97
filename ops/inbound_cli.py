"""The `postroom inbound` and `postroom dkim` commands, registered without loading the
SMTP receiver and its parsing stack (ops/inbound.py), which only `postroom inbound`
needs: every other command starts that much faster."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import signal
import sys

from mongo import domains
from mongo.client import connect
from pipelines.adapters.smtp_client import ehlo_choice
from pipelines.domains.dns_records import MX_PRIORITY, bounce_domain_records, key_publication, valid_hostname, zone_line
from pipelines.messages.dkim import txt_value
from pipelines.workflows.dkim_keys import shared_key

from . import config
from .inbound_admin import add_report_commands


def cmd_inbound(args) -> int:
    from .inbound import serve  # local import: the SMTP handler and the parsing stack, only for this command

    async def main():
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().add_signal_handler(sig, stop.set)
        await serve(config.load(), stop)
    asyncio.run(main())
    return 0


def cmd_dkim(args) -> int:
    """Print the records the service publishes: the shared domain's DKIM key (created on
    first use) and, at each custom domain's CNAME target, that domain's key — the zone
    fragment the operator loads into the shared domain's DNS — then the bounce domain's
    MX and SPF records (the bounce domain may live in another zone)."""
    for ip in args.sending_ip or []:
        try:
            ipaddress.ip_address(ip)
        except ValueError:
            print(f"--sending-ip {ip}: not an IP address", file=sys.stderr)
            return 2
    if args.mx is not None and not valid_hostname(args.mx.lower().rstrip(".")):
        print(f"--mx {args.mx}: not a host name", file=sys.stderr)
        return 2
    settings = config.load()

    async def work():
        client, db = connect(settings.mongodb_url, settings.mongodb_database)
        try:
            return await shared_key(db, settings), await domains.all_records(db)
        finally:
            await client.close()
    key, custom = asyncio.run(work())
    records = [{"type": "TXT", "name": f"{key['selector']}._domainkey.{settings.shared_domain}",
                "value": txt_value(key["public_key"])}]
    records += [r for r in (key_publication(d.get("records") or []) for d in custom) if r is not None]
    sending_host = ehlo_choice(settings.smtp_helo_name, settings.base_url, settings.bounce_domain)[0]
    inbound_host = (args.mx or sending_host).lower().rstrip(".")
    bounce = bounce_domain_records(settings.bounce_domain, inbound_host=inbound_host,
                                   sending_host=sending_host, sending_ips=args.sending_ip or [])
    # workspaces' inbound addresses (docs/inbound.md) arrive at the same port
    bounce.append({"type": "MX", "name": settings.inbound_domain, "value": inbound_host, "priority": MX_PRIORITY})
    if args.json:
        print(json.dumps(records + bounce))
    else:
        for record in records:
            print(zone_line(record))
        print(f"; {settings.bounce_domain}: MX to the host running `postroom inbound` (--mx), SPF of the "
              f"sending IPs (--sending-ip; else the addresses of the EHLO name {sending_host}); "
              f"{settings.inbound_domain}: MX to the same host")
        for record in bounce:
            print(zone_line(record))
    return 0


def add_commands(sub) -> None:
    inbound = sub.add_parser("inbound", help="receive bounces and complaints over SMTP (aiosmtpd); "
                                             "`inbound reports|show|rerun` look at what was received")
    inbound.set_defaults(func=cmd_inbound)
    add_report_commands(inbound.add_subparsers(dest="inbound_command", metavar="{reports,show,rerun}"))
    dkim = sub.add_parser("dkim", help="print the DKIM TXT records to publish in the shared domain's zone "
                                       "(its own key and every custom domain's key), and the bounce domain's "
                                       "MX and SPF records, and the inbound domain's MX")
    dkim.add_argument("--json", action="store_true", help="a JSON array of {type, name, value, priority?}")
    dkim.add_argument("--mx", metavar="HOST", help="the host running `postroom inbound` (default: the EHLO name)")
    dkim.add_argument("--sending-ip", metavar="IP", action="append",
                      help="an address mail leaves from, for SPF (repeat for several; default: the EHLO name's)")
    dkim.set_defaults(func=cmd_dkim)
