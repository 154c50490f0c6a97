"""`postroom inbound`: the SMTP receiver for bounces and complaints, and `postroom dkim`.

It accepts mail for `bounce+<message id>@<bounce domain>` (VERP return paths, where
DSNs come back; also `bounce+<message id>@pr-bounces.<custom domain>`, the return-path host
of a workspace's domain, pipelines/domains/dns_records.py), `fbl@<bounce domain>` (where
feedback loops send ARF complaints) and `unsubscribe+<message id>@<bounce domain>`
(List-Unsubscribe by mail, applied at once),
refuses every other recipient, stores each message raw in `inbound_reports` and enqueues
the `bounces` actor with its id. Parsing happens there: a report that cannot be parsed
is still stored and counted, never dropped. A report whose enqueue failed is re-enqueued
by the scheduler (`requeue_stale_reports`).

Without RabbitMQ (no `POSTROOM_AMQP_URL`, e.g. beside `postroom up`) there is no broker
another process could consume from, so this process handles each stored report itself,
at once (pipelines/workflows/bounce_reports.handle_report, the same workflow the actor
runs). The operator commands `postroom inbound reports|show|rerun` are in ops/inbound_admin.py."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import signal
import sys

from aiosmtpd.smtp import SMTP

from actors.metrics import count_feedback_report
from actors.runtime import publisher
from mongo import domains, inbound_reports, processes
from mongo.client import connect
from pipelines.adapters.smtp_client import ehlo_choice
from pipelines.core.clock import now_iso
from pipelines.core.ids import new_uuid
from pipelines.domains.dns_records import bounce_domain_records, key_publication, valid_hostname, zone_line
from pipelines.messages.dkim import txt_value
from pipelines.messages.mime import message_id_from_verp
from pipelines.messages.unsubscribe_headers import message_id_from_mailto
from pipelines.workflows import unsubscribe
from pipelines.workflows.bounce_reports import handle_report
from pipelines.workflows.dkim_keys import shared_key

from . import config
from .inbound_admin import add_report_commands

log = logging.getLogger("postroom.inbound")

FEEDBACK_LOCAL_PARTS = ("fbl",)
MAX_REPORT_BYTES = 10 * 1024 * 1024
REQUEUE_AFTER_SECONDS = 120


def accepts(address: str, bounce_domain: str) -> bool:
    local, _, domain = address.rpartition("@")
    if domain.lower() != bounce_domain.lower():
        return False
    return (local.lower() in FEEDBACK_LOCAL_PARTS or message_id_from_verp(address) is not None
            or message_id_from_mailto(address) is not None)


class InboundHandler:
    """aiosmtpd handler: RCPT filter and DATA → store + enqueue."""

    def __init__(self, db, settings, enqueue):
        self.db, self.settings, self.enqueue = db, settings, enqueue

    async def handle_RCPT(self, server, _session, envelope, address, _rcpt_options):
        if not (accepts(address, self.settings.bounce_domain) or await self.custom_return_path(address)):
            return "550 5.1.1 no such mailbox here"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def custom_return_path(self, address: str) -> bool:
        """A VERP address on the return-path host of some workspace's domain."""
        if message_id_from_verp(address) is None:
            return False
        return await domains.is_return_path_host(self.db, address.rpartition("@")[2])

    async def handle_DATA(self, server, _session, envelope):
        unsubscribes = [m for m in map(message_id_from_mailto, envelope.rcpt_tos) if m]
        for message_id in unsubscribes:  # List-Unsubscribe by mail: nothing to parse
            await unsubscribe.by_message(self.db, message_id, "mailto", envelope.mail_from)
        if len(unsubscribes) == len(envelope.rcpt_tos):
            return "250 2.0.0 unsubscribed"
        raw: bytes = envelope.original_content or envelope.content
        doc = {"_id": new_uuid(), "mail_from": envelope.mail_from or "", "rcpt_tos": list(envelope.rcpt_tos),
               "raw": raw.decode("latin-1"), "size_bytes": len(raw), "status": "received",
               "received_at": now_iso(), "processed_at": None, "detail": ""}
        doc["enqueued_at"] = doc["received_at"]
        try:
            await inbound_reports.store(self.db, doc)
        except Exception:
            log.exception("could not store an inbound report")
            return "451 4.3.0 cannot store the message now, try again later"
        try:
            await self.enqueue(doc["_id"])
        except Exception:  # stored: the scheduler re-enqueues it
            log.exception("enqueue of inbound report %s failed", doc["_id"], extra={"report_id": doc["_id"]})
        return f"250 2.0.0 stored as {doc['_id']}"


async def serve(settings, stop: asyncio.Event) -> None:
    from actors import broker as broker_setup  # local import: the broker stack, only for this command (ops/cli.py)
    broker_setup.setup(settings)

    client, db = connect(settings.mongodb_url, settings.mongodb_database)
    in_flight: set[asyncio.Task] = set()

    async def enqueue(report_id: str) -> None:
        if settings.amqp_url:
            await publisher().process_report(report_id)
            return
        task = asyncio.create_task(_handle_here(handle_report, db, report_id))  # after the 250 goes out
        in_flight.add(task)
        task.add_done_callback(in_flight.discard)

    handler = InboundHandler(db, settings, enqueue)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: SMTP(handler, hostname=settings.bounce_domain, data_size_limit=MAX_REPORT_BYTES,
                     decode_data=False),
        host=settings.inbound_host, port=settings.inbound_port)
    print(f"postroom inbound listening on {settings.inbound_host}:{settings.inbound_port} "
          f"for bounce+*@{settings.bounce_domain} and fbl@{settings.bounce_domain}", flush=True)
    heartbeat = asyncio.create_task(processes.beat_until(db, "inbound", stop))
    try:
        await stop.wait()
    finally:
        await heartbeat
        server.close()
        await server.wait_closed()
        if in_flight:
            await asyncio.wait(in_flight, timeout=10)
        await client.close()


async def _handle_here(handle_report, db, report_id: str) -> None:
    try:
        await handle_report(db, report_id, on_feedback=count_feedback_report)  # as the bounces actor does
    except Exception:  # counted on the report; the scheduler's sweep hands it out again
        log.exception("inbound report %s could not be processed", report_id, extra={"report_id": report_id})


def cmd_inbound(args) -> int:
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
    bounce = bounce_domain_records(settings.bounce_domain, inbound_host=(args.mx or sending_host).lower().rstrip("."),
                                   sending_host=sending_host, sending_ips=args.sending_ip or [])
    if args.json:
        print(json.dumps(records + bounce))
    else:
        for record in records:
            print(zone_line(record))
        print(f"; {settings.bounce_domain}: MX to the host running `postroom inbound` (--mx), SPF of the "
              f"sending IPs (--sending-ip; else the addresses of the EHLO name {sending_host})")
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
                                       "MX and SPF records")
    dkim.add_argument("--json", action="store_true", help="a JSON array of {type, name, value, priority?}")
    dkim.add_argument("--mx", metavar="HOST", help="the host running `postroom inbound` (default: the EHLO name)")
    dkim.add_argument("--sending-ip", metavar="IP", action="append",
                      help="an address mail leaves from, for SPF (repeat for several; default: the EHLO name's)")
    dkim.set_defaults(func=cmd_dkim)


async def requeue_stale_reports(db, settings) -> int:
    """Reports stored but never processed (their enqueue failed): enqueue again."""
    stale = await inbound_reports.stale_received(db, REQUEUE_AFTER_SECONDS)
    for report_id in stale:
        await publisher().process_report(report_id)
    return len(stale)

