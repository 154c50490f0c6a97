"""Mail received at a workspace's inbound address (docs/inbound.md), from the port to the
route's receiver. The SMTP shell (ops/inbound.py) asks `workspace_for` at RCPT and calls
`accept` at DATA; the `inbound` actor (actors/inbound.py), or the port itself without a
broker, calls `process`:

1. load the stored message and its raw bytes;
2. authenticate it (SPF, DKIM, DMARC: pipelines/inbound/authentication.py) and parse it
   (pipelines/inbound/parsing.py, which never raises);
3. match the workspace's routes against the recipient (pipelines/inbound_routes/addresses.py);
4. build the `email.received` event (deterministic id) and hand it on: a delivery on the
   route's own webhook lane (the webhook machinery signs, posts and retries it) and, for
   workspace webhooks subscribed to the event, the outbox;
5. store what was found (received → processed, guarded).
Steps 4's writes are idempotent, so a job redelivered before step 5 repeats them harmlessly.

Nothing here answers mail: an auto-reply (`auto_submitted`) is stored and marked, and no
message is ever sent back to a sender, so no loop can start."""

from __future__ import annotations

import asyncio

from pymongo.asynchronous.database import AsyncDatabase

from mongo import inbound_addresses, inbound_domains, inbound_messages, inbound_routes, outbox
from mongo import webhooks as webhook_store
from pipelines.core.clock import ms_of, now_iso, now_ms
from pipelines.core.ids import new_uuid
from pipelines.core.settings import Settings
from pipelines.inbound.authentication import authenticate
from pipelines.inbound.parsing import parse_inbound
from pipelines.inbound_routes.addresses import first_match, recipient, token_of
from pipelines.inbound_routes.received_event import EVENT, as_json, bounded, event_data, event_id, stored_parse
from pipelines.webhooks.events import plan_deliveries
from pipelines.workflows.dispatch_webhook_events import give_turns
from pipelines.workflows.publisher import Publisher

# A message still `received` this long after arriving had its job lost: handed out again.
REQUEUE_AFTER_SECONDS = 120
# Messages one retention pass deletes at most.
RETENTION_PASS = 500


async def workspace_for(db: AsyncDatabase, settings: Settings, address: str) -> str | None:
    """The workspace an inbound address belongs to: by its token on the operator's inbound
    domain, or by a domain the workspace verified; None when it is none of ours."""
    found = recipient(address)
    if found is None:
        return None
    if found.domain == settings.inbound_domain.lower():
        mine = token_of(found, settings.inbound_domain)
        return None if mine is None else await inbound_addresses.workspace_of(db, mine)
    return await inbound_domains.owner(db, found.domain)


async def accept(db: AsyncDatabase, *, raw: bytes, mail_from: str, client_ip: str, helo: str,
                 recipients: list[tuple[str, str]]) -> list[str]:
    """Store the message once per `(recipient, workspace id)`, raw and with its envelope;
    the new messages' ids, each to be processed."""
    at = now_iso()
    docs: list[dict] = []
    for address, workspace_id in recipients:
        found = recipient(address)
        assert found is not None  # accepted at RCPT by workspace_for
        docs.append({"_id": new_uuid(), "workspace_id": workspace_id, "recipient": address,
                     "recipient_key": found.address, "tag": found.tag, "mail_from": mail_from or "",
                     "client_ip": client_ip, "helo": helo, "size_bytes": len(raw), "status": "received",
                     "received_at": at, "received_ms": ms_of(at), "route_id": None, "from_key": None,
                     "subject": None, "auto_submitted": False, "requeues": 0})
    await inbound_messages.store(db, docs, raw)
    return [d["_id"] for d in docs]


async def process(db: AsyncDatabase, publisher: Publisher | None, resolver, message_id: str) -> None:
    """Steps 1-5 above for one stored message (nothing when it is gone or done already).
    `publisher`: None without a broker, where the scheduler gives the route's lane its turn."""
    message = await inbound_messages.load(db, message_id)
    if message is None or message["status"] != "received":
        return
    raw = await inbound_messages.raw(db, message)
    authentication = as_json(await authenticate(raw, client_ip=message["client_ip"], helo=message["helo"],
                                                mail_from=message["mail_from"], resolver=resolver))
    # CPU-bound and bounded by the parser's own limits: off the loop the job's I/O runs on
    parsed = bounded(as_json(await asyncio.to_thread(parse_inbound, raw)))
    address = recipient(message["recipient"])
    assert address is not None  # stored only when it read as one
    route = first_match(await inbound_routes.active_of(db, message["workspace_id"]), address)
    event = outbox.event_document(message["workspace_id"], EVENT, event_data(message, parsed, authentication, route),
                                  event_id(message_id))
    await _hand_on(db, publisher, event, route)
    await inbound_messages.finish(db, message_id, {
        "parsed": stored_parse(parsed), "authentication": authentication,
        "route_id": None if route is None else route["_id"], "auto_submitted": bool(parsed.get("auto_submitted")),
        "from_key": _sender(parsed), "subject": parsed.get("subject")})


def _sender(parsed: dict) -> str | None:
    """The From address, lower-cased, as GET /inbound/messages?from= finds it."""
    found = parsed.get("from")
    if isinstance(found, list):
        found = found[0] if found else None
    if isinstance(found, dict):
        found = found.get("address") or found.get("email")
    return found.lower() if isinstance(found, str) and found else None


async def _hand_on(db: AsyncDatabase, publisher: Publisher | None, event: dict, route: dict | None) -> None:
    """The event to the route's lane (a delivery signed with the route's secret) and to the
    outbox, for workspace webhooks subscribed to `email.received`."""
    if route is not None:
        await webhook_store.insert_deliveries(db, plan_deliveries(event, [route], now_iso()))
        if publisher is not None:
            await give_turns(db, publisher, [route["_id"]])
    await outbox.record_many(db, [event], only_subscribed=True)


async def requeue_stale(db: AsyncDatabase, publisher: Publisher) -> int:
    """Messages whose job was lost (still `received` after REQUEUE_AFTER_SECONDS) handed
    out again; after MAX_REQUEUES they end `failed`, kept. How many were handed out."""
    again, _spent = await inbound_messages.stale_received(db, REQUEUE_AFTER_SECONDS)
    for message_id in again:
        await publisher.receive_inbound(message_id)
    return len(again)


async def apply_retention(db: AsyncDatabase, settings: Settings) -> int:
    """Received messages older than POSTROOM_INBOUND_RETENTION_DAYS deleted with their raw
    bytes (a pass at a time). How many."""
    cutoff = now_ms() - settings.inbound_retention_days * 86_400_000
    return await inbound_messages.delete_received_before(db, cutoff, RETENTION_PASS)
