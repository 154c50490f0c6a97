"""`postroom inbound`: the SMTP receiver for bounces, complaints and mail to workspaces'
inbound addresses (the command, with `postroom dkim`, is registered in ops/inbound_cli.py).

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
runs).

It also accepts mail for a workspace's inbound address (`<token>[+tag]@<inbound domain>`,
docs/inbound.md): SIZE is announced (POSTROOM_INBOUND_MAX_MESSAGE_BYTES; aiosmtpd refuses
a larger message with 552), an unknown recipient gets 550 5.1.1, a sender past its budget
(POSTROOM_INBOUND_MESSAGES_PER_MINUTE per IP and per MAIL FROM) 450 4.7.1, a message of
hostile structure the parser's refusal (pipelines/inbound/parsing.refusal_for); the rest
is stored raw once per recipient (pipelines/workflows/receive_inbound.accept) and handed
to the `inbound` actor (or, without a broker, processed here).

The operator commands `postroom inbound reports|show|rerun` are in ops/inbound_admin.py."""

from __future__ import annotations

import asyncio
import logging
import time

from aiosmtpd.smtp import SMTP

from actors.metrics import count_feedback_report
from actors.runtime import publisher
from mongo import domains, inbound_reports, processes
from mongo.client import connect
from pipelines.adapters.dns_client import DnsPythonResolver
from pipelines.core.clock import now_iso
from pipelines.core.ids import new_uuid
from pipelines.inbound.parsing import refusal_for
from pipelines.inbound_routes.flood import FloodGate, sender_keys
from pipelines.messages.mime import message_id_from_verp
from pipelines.messages.unsubscribe_headers import message_id_from_mailto
from pipelines.workflows import receive_inbound, unsubscribe
from pipelines.workflows.bounce_reports import handle_report

log = logging.getLogger("postroom.inbound")

FEEDBACK_LOCAL_PARTS = ("fbl",)
REQUEUE_AFTER_SECONDS = 120


def accepts(address: str, bounce_domain: str) -> bool:
    local, _, domain = address.rpartition("@")
    if domain.lower() != bounce_domain.lower():
        return False
    return (local.lower() in FEEDBACK_LOCAL_PARTS or message_id_from_verp(address) is not None
            or message_id_from_mailto(address) is not None)


def _client_ip(session) -> str:
    peer = session.peer
    return str(peer[0]) if isinstance(peer, tuple) and peer else str(peer or "")


class InboundHandler:
    """aiosmtpd handler: RCPT filter (reports, then workspaces' inbound addresses) and
    DATA → store + enqueue."""

    def __init__(self, db, settings, enqueue, receive=None):
        self.db, self.settings, self.enqueue = db, settings, enqueue
        self.receive = receive  # hands on a stored inbound message (its id)
        self.flood = FloodGate(settings.inbound_messages_per_minute)

    async def handle_RCPT(self, server, session, envelope, address, _rcpt_options):
        if accepts(address, self.settings.bounce_domain) or await self.custom_return_path(address):
            envelope.rcpt_tos.append(address)
            return "250 OK"
        try:
            workspace_id = await receive_inbound.workspace_for(self.db, self.settings, address)
        except Exception:  # the store is away: the sender's MTA tries again later
            log.exception("could not look up an inbound recipient")
            return "451 4.3.0 cannot check the recipient now, try again later"
        if workspace_id is None:
            return "550 5.1.1 no such mailbox here"
        wait = self.flood.wait_seconds(sender_keys(_client_ip(session), envelope.mail_from), time.monotonic())
        if wait:
            return f"450 4.7.1 too many messages from this sender; try again in {wait} s"
        envelope.rcpt_tos.append(address)
        _inbound_of(envelope)[address] = workspace_id
        return "250 OK"

    async def custom_return_path(self, address: str) -> bool:
        """A VERP address on the return-path host of some workspace's domain."""
        if message_id_from_verp(address) is None:
            return False
        return await domains.is_return_path_host(self.db, address.rpartition("@")[2])

    async def handle_DATA(self, server, session, envelope):
        raw: bytes = envelope.original_content or envelope.content
        inbound = _inbound_of(envelope)
        answer = "250 2.0.0 nothing to do"
        if inbound:
            answer = await self.receive_mail(session, envelope, raw, inbound)
            if not answer.startswith("2"):
                return answer
        reports = [a for a in envelope.rcpt_tos if a not in inbound]
        return await self.store_report(envelope, reports, raw) if reports else answer

    async def receive_mail(self, session, envelope, raw: bytes, inbound: dict[str, str]) -> str:
        """Mail to workspaces' inbound addresses: refused whole when its structure is hostile,
        else stored once per recipient and handed on."""
        refusal = refusal_for(raw)
        if refusal is not None:
            return f"{refusal.code} {refusal.text}"
        senders = sender_keys(_client_ip(session), envelope.mail_from)
        try:
            ids = await receive_inbound.accept(self.db, raw=raw, mail_from=envelope.mail_from or "",
                                               client_ip=_client_ip(session), helo=session.host_name or "",
                                               recipients=list(inbound.items()))
        except Exception:
            log.exception("could not store an inbound message")
            return "451 4.3.0 cannot store the message now, try again later"
        self.flood.count(senders, time.monotonic())
        for message_id in ids:
            try:
                await self.receive(message_id)
            except Exception:  # stored: the scheduler hands it out again
                log.exception("enqueue of inbound message %s failed", message_id)
        return f"250 2.0.0 received as {' '.join(ids)}"

    async def store_report(self, envelope, rcpt_tos: list[str], raw: bytes) -> str:
        unsubscribes = [m for m in map(message_id_from_mailto, rcpt_tos) if m]
        for message_id in unsubscribes:  # List-Unsubscribe by mail: nothing to parse
            await unsubscribe.by_message(self.db, message_id, "mailto", envelope.mail_from)
        if len(unsubscribes) == len(rcpt_tos):
            return "250 2.0.0 unsubscribed"
        doc = {"_id": new_uuid(), "mail_from": envelope.mail_from or "", "rcpt_tos": list(rcpt_tos),
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


def _inbound_of(envelope) -> dict[str, str]:
    """The envelope's accepted inbound recipients → their workspace (kept on the envelope
    between RCPT and DATA; aiosmtpd makes a new envelope per transaction)."""
    if not hasattr(envelope, "postroom_inbound"):
        envelope.postroom_inbound = {}
    return envelope.postroom_inbound


async def serve(settings, stop: asyncio.Event) -> None:
    from actors import broker as broker_setup  # local import: the broker stack, only for this command (ops/cli.py)
    broker_setup.setup(settings)

    client, db = connect(settings.mongodb_url, settings.mongodb_database)
    in_flight: set[asyncio.Task] = set()

    def in_process(work) -> None:
        task = asyncio.create_task(work)  # after the 250 goes out
        in_flight.add(task)
        task.add_done_callback(in_flight.discard)

    async def enqueue(report_id: str) -> None:
        if settings.amqp_url:
            await publisher().process_report(report_id)
            return
        in_process(_handle_here(handle_report, db, report_id))

    async def receive(message_id: str) -> None:
        if settings.amqp_url:
            await publisher().receive_inbound(message_id)
            return
        in_process(_receive_here(db, settings, message_id))

    handler = InboundHandler(db, settings, enqueue, receive)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: SMTP(handler, hostname=settings.bounce_domain, data_size_limit=settings.inbound_max_message_bytes,
                     decode_data=False),
        host=settings.inbound_host, port=settings.inbound_port)
    print(f"postroom inbound listening on {settings.inbound_host}:{settings.inbound_port} "
          f"for bounce+*@{settings.bounce_domain}, fbl@{settings.bounce_domain} "
          f"and <workspace token>+*@{settings.inbound_domain}", flush=True)
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


async def _receive_here(db, settings, message_id: str) -> None:
    """Without a broker: the inbound actor's work, in this process (the scheduler of the
    `postroom up` beside it gives the route's lane its turn)."""
    try:
        await receive_inbound.process(db, None, DnsPythonResolver(settings.dns_resolver), message_id)
    except Exception:  # still `received`: the scheduler's sweep hands it out again
        log.exception("inbound message %s could not be processed", message_id)


async def _handle_here(handle_report, db, report_id: str) -> None:
    try:
        await handle_report(db, report_id, on_feedback=count_feedback_report)  # as the bounces actor does
    except Exception:  # counted on the report; the scheduler's sweep hands it out again
        log.exception("inbound report %s could not be processed", report_id, extra={"report_id": report_id})


async def requeue_stale_inbound(db, settings) -> int:
    """Inbound messages stored but never processed (their enqueue failed): handed out again."""
    return await receive_inbound.requeue_stale(db, publisher())


async def apply_inbound_retention(db, settings) -> int:
    """Received messages past POSTROOM_INBOUND_RETENTION_DAYS deleted, raw bytes and all."""
    return await receive_inbound.apply_retention(db, settings)


async def requeue_stale_reports(db, settings) -> int:
    """Reports stored but never processed (their enqueue failed): enqueue again."""
    stale = await inbound_reports.stale_received(db, REQUEUE_AFTER_SECONDS)
    for report_id in stale:
        await publisher().process_report(report_id)
    return len(stale)

