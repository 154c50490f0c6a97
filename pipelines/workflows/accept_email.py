"""Accept transactional email: from a validated send request (one email, or a batch)
to stored messages handed to the `render` queue — and cancel a scheduled one.

    send / send_batch   build the message document(s) (the same rules for single sends
                        and batch items), take the key's email window, charge the plan,
                        store, enqueue the render; what then fails is given back
    accept              charge, store and enqueue messages built with `build_message`
                        (a form's confirmation email)
    cancel              a scheduled email → `cancelled`, its count back to the plan

The caller (front/routes/email.py, form_signup.py) passes who it is as an
`Identity`; nothing here knows about requests."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import logging
from typing import Protocol

from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import ConnectionFailure, DuplicateKeyError, PyMongoError

from mongo import attachments as attachment_store
from mongo import batches as batch_store
from mongo import domains as domain_store
from mongo import message_intake, send_limits
from mongo import messages as message_store
from mongo import suppressions as suppression_store
from mongo import templates as template_store
from pipelines.audience import recipients
from pipelines.core.clock import future_within, in_seconds, iso, now_iso, parse_iso, utcnow
from pipelines.core.documents import Batch, Workspace
from pipelines.core.errors import (
    UNAVAILABLE_RETRY_AFTER_SECONDS,
    Conflict,
    Forbidden,
    NoContent,
    NotFound,
    PostroomError,
    ServerError,
    ServiceUnavailable,
    ValidationFailed,
)
from pipelines.core.ids import batch_id_for, message_id_for, new_batch_id, new_message_id
from pipelines.core.settings import Settings
from pipelines.messages import custom_headers, delivery_status, mail_streams, send_jobs, throttle
from pipelines.messages import sender as sender_rules
from pipelines.messages.attachments import AttachmentFile
from pipelines.messages.labels import stored_labels
from pipelines.templates.personalise import check_merge_tags, stored_template_data
from pipelines.templates.text import clean_subject
from pipelines.workflows.publisher import Publisher, PublishFailed, not_queued

MAX_SCHEDULE_AHEAD = dt.timedelta(hours=72)
log = logging.getLogger("postroom.front")


@dataclasses.dataclass(frozen=True)
class Identity:
    """Who sends: the workspace, the API key (None: mail the service sends for the
    workspace, e.g. a form's confirmation), whether the key is a sandbox key, and the
    seed of the request's Idempotency-Key (None without one), which names what the
    request creates so every attempt under one key names it alike."""
    workspace: Workspace
    key_id: str | None
    sandbox: bool = False
    seed: str | None = None

    @property
    def workspace_id(self) -> str:
        return self.workspace["_id"]


class EmailWindow(Protocol):
    """The API key's email rate window (front/auth): `take` counts emails (all or none,
    429 when they do not fit), `give_back` returns them when nothing is sent."""

    async def take(self, emails: int) -> None: ...

    async def give_back(self, emails: int) -> None: ...


@dataclasses.dataclass(frozen=True)
class Accepting:
    """What the steps work with."""
    db: AsyncDatabase
    settings: Settings
    publisher: Publisher | None  # None: building messages only (`prepare`), nothing is published


async def send(db: AsyncDatabase, settings: Settings, publisher: Publisher, who: Identity, fields: dict, *,
               send_at: dt.datetime | None = None, window: EmailWindow | None = None) -> dict:
    """One email (`send_at`: scheduled, within 72 hours); its stored document: `queued`,
    `scheduled`, or `suppressed` (every recipient suppressed: stored, never enqueued)."""
    run = Accepting(db, settings, publisher)
    schedule = schedule_fields(send_at) if send_at is not None else None
    # The email is charged to the plan while the message is built (its suppression
    # lookup), not after: one store round trip fewer on the request's path.
    ahead = None if who.sandbox else ChargeAhead(run, who)
    try:
        doc = await build_message(run, who, fields)
        if schedule is not None and doc["status"] != "suppressed":
            doc.update(schedule)
        await _accept_counted(run, who, [doc], None, window, ahead=ahead, files=fields.get("attachments") or [])
    except Exception:
        if ahead is not None:  # given back before the answer (nothing once charge_plan settled it)
            await ahead.give_back()
        raise
    except BaseException:  # cancelled: given back once it lands
        if ahead is not None:
            ahead.abandon()
        raise
    return doc


async def send_batch(db: AsyncDatabase, settings: Settings, publisher: Publisher, who: Identity,
                     items: list[dict], *, window: EmailWindow | None = None) -> tuple[Batch, list[dict]]:
    """A batch: every item checked on its own (the first failure names
    `messages[i]...`), with the workspace's domains and suppressions looked up once for
    the whole batch. The batch document and its messages."""
    run = Accepting(db, settings, publisher)
    domains = await domain_store.verified_map(db, who.workspace_id)
    everyone = list(dict.fromkeys(r for item in items for field in recipients.HEADER_FIELDS
                                  for r in recipients.as_list(item.get(field))))
    reasons = await suppression_store.reasons_among(db, who.workspace_id, everyone)
    templates: dict = {}
    docs = [await build_message(run, who, item, path_prefix=f"messages[{i}].", index=i, suppression_reasons=reasons,
                                domains=domains, templates=templates) for i, item in enumerate(items)]
    batch_id = batch_id_for(who.seed) if who.seed else new_batch_id()
    for doc in docs:
        doc["batch_id"] = batch_id
    batch = batch_store.new_batch(batch_id, who.workspace_id, who.key_id, [d["_id"] for d in docs],
                                  [d["status"] for d in docs])
    files = [f for item in items for f in item.get("attachments") or ()]
    await _accept_counted(run, who, docs, batch, window, files=files)
    return batch, docs


async def _accept_counted(run: Accepting, who: Identity, docs: list[dict], batch: Batch | None,
                          window: EmailWindow | None, *, ahead: ChargeAhead | None = None,
                          files: list[AttachmentFile] | None = None) -> None:
    """Count the emails in the key's email window (all or none), then charge, store and
    enqueue them; units of a request that ends up sending nothing are given back.
    `ahead`: the one email's plan charge, made while the message was built (`send`);
    `files`: the attachments the messages name."""
    if window is None:
        await _accept(run, who, docs, batch, ahead, files)
        return
    await window.take(len(docs))
    try:
        await _accept(run, who, docs, batch, ahead, files)
    except Exception as error:
        await window.give_back(getattr(error, "unsent", len(docs)))
        raise


async def accept(db: AsyncDatabase, settings: Settings, publisher: Publisher, who: Identity,
                 docs: list[dict]) -> None:
    """Charge, store and enqueue messages made by `prepare` (no key window)."""
    await _accept(Accepting(db, settings, publisher), who, docs, None)


async def prepare(db: AsyncDatabase, settings: Settings, who: Identity, fields: dict) -> dict:
    """The message document for these send fields, not stored yet (for `accept`)."""
    return await build_message(Accepting(db, settings, publisher=None), who, fields)


async def load_template(db: AsyncDatabase, fields: dict, workspace_id: str, path_prefix: str,
                        cache: dict | None) -> dict | None:
    """The live template a send names (404 template_not_found if unknown, deleted or another
    workspace's); `cache` lets a batch look each template up once."""
    template_id = fields.get("template_id")
    if not template_id:
        return None
    if fields.get("html") is not None:
        raise ValidationFailed("Give either html or template_id, not both.", path=f"{path_prefix}html")
    cache = {} if cache is None else cache
    if template_id not in cache:
        cache[template_id] = await template_store.get(db, workspace_id, template_id)
    if cache[template_id] is None:
        raise NotFound("No template with this id in the workspace.", code="template_not_found",
                       path=f"{path_prefix}template_id")
    return cache[template_id]


async def sender_of(db: AsyncDatabase, settings: Settings, workspace: Workspace, fields: dict,
                    domains: dict[str, bool] | None = None) -> sender_rules.Sender:
    """Who mail of this workspace with these `from_email` / `from_name` / `reply_to`
    fields is from (400 missing_from_email, 403 domain_invalid)."""
    if domains is None:
        domains = await domain_store.verified_map(db, workspace["_id"])
    return sender_rules.workspace_sender(
        workspace, from_email=fields.get("from_email"), from_name=fields.get("from_name"),
        reply_to=fields.get("reply_to"), shared_domain=settings.shared_domain, domains=domains)


async def build_message(run: Accepting, who: Identity, fields: dict, *, path_prefix: str = "", index: int = 0,
                        suppression_reasons: dict[str, str] | None = None, domains: dict[str, bool] | None = None,
                        templates: dict | None = None) -> dict:
    """`suppression_reasons` / `domains` / `templates`: the suppressed addresses among the
    recipients with their reasons, the workspace's sending domains and the templates named
    so far when the caller already looked them up in bulk (batch sends); otherwise they are
    looked up here. `index`: the message's place in its request, which names it under an
    Idempotency-Key."""
    db, settings = run.db, run.settings
    stream, html = _checked_content(fields, settings, path_prefix)
    workspace = who.workspace
    template = await load_template(db, fields, workspace["_id"], path_prefix, templates)
    # Malformed merge tags, and loops over template_data that could only blow the render
    # budget, are refused now, with their position, not discovered at render.
    check_merge_tags(clean_subject(fields["subject"]), html, fields.get("text"), path_prefix=path_prefix,
                     template_html=template["html"] if template else None,
                     template_data=fields.get("template_data"))
    try:
        sender = await sender_of(db, settings, workspace, fields, domains)
    except PostroomError as error:  # name the batch item the rule failed on
        if path_prefix and error.path:
            error.path = path_prefix + error.path
        raise
    people = recipient_lists(fields, path_prefix)
    if suppression_reasons is None:
        suppression_reasons = await suppression_store.reasons_among(db, workspace["_id"], recipients.envelope(people))
    suppressed = mail_streams.blocked_addresses(stream, suppression_reasons)
    now = now_iso()
    doc = {
        "_id": _message_id(who.seed, index),
        "workspace_id": workspace["_id"],
        "key_id": who.key_id,
        "sandbox": who.sandbox,
        "kind": "transactional",
        "stream": stream,
        "footer": fields.get("footer", True) is not False,
        **people,
        "subject": clean_subject(fields["subject"]),
        "html": html,
        "text": fields.get("text"),
        "template_id": fields.get("template_id"),
        "template_version": template["version"] if template else None,  # rendered exactly as sent
        **stored_template_data(fields.get("template_data")),
        "from_address": sender.from_address,
        "from_name": sender.from_name,
        "reply_to": sender.reply_to,
        "signing_domain": sender.signing_domain,
        "custom_domain": sender.custom_domain,
        "track_opens": bool(fields.get("track_opens")),
        "track_clicks": bool(fields.get("track_clicks")),
        "status": "queued",
        "queued_at": now,
        "attempts": 0,
        "batch_id": None,
        "campaign_id": None,
        "created_at": now,
        "updated_at": now,
        "history": [{"status": "queued", "at": now}],
        **stored_labels(fields.get("metadata"), fields.get("tags")),
        **extras(fields),
    }
    return without_suppressed(doc, suppressed)


def _checked_content(fields: dict, settings: Settings, path_prefix: str) -> tuple[str, str | None]:
    """The message's stream and HTML, once what it says is allowed: some content, the
    footer on marketing mail, HTML within the size limit."""
    if not any(fields.get(k) for k in ("html", "text", "template_id")):
        raise NoContent("One of html, text or template_id is required.", path=path_prefix.rstrip(".") or None)
    stream = fields.get("stream") or mail_streams.TRANSACTIONAL
    if stream == mail_streams.MARKETING and fields.get("footer") is False:
        raise ValidationFailed("Marketing mail always carries the compliance footer.", path=f"{path_prefix}footer")
    html = fields.get("html")
    if html is not None and len(html.encode()) > settings.max_html_bytes:
        raise ValidationFailed(f"html is larger than {settings.max_html_bytes // 1024} KB.",
                               path=f"{path_prefix}html")
    return stream, html


def recipient_lists(fields: dict, path_prefix: str = "") -> dict[str, list[str]]:
    """The message's `to`, and its `cc` and `bcc` when given (each address once; at most
    50 in all, else 400 naming the list that goes over)."""
    try:
        lists = recipients.recipient_lists(fields["to"], fields.get("cc"), fields.get("bcc"))
    except ValueError as error:
        raise ValidationFailed(f"to, cc and bcc name more than {recipients.MAX_RECIPIENTS} recipients together.",
                               path=f"{path_prefix}{error}") from None
    return {field: lists[field] for field in recipients.HEADER_FIELDS if field == "to" or fields.get(field)}


def extras(fields: dict) -> dict:
    """The sender's own headers ([name, value] pairs, in order) and the attachments'
    references (their bytes are stored apart: mongo/attachments.py), when given."""
    out: dict = {}
    if fields.get("headers"):
        out["headers"] = [[name, value] for name, value in custom_headers.checked(fields["headers"])]
    if fields.get("attachments"):
        out["attachments"] = [f.reference() for f in fields["attachments"]]
    return out


def _message_id(seed: str | None, index: int) -> str:
    """Random; under an Idempotency-Key, the same on every attempt of the request, so a
    retry after an unknown outcome cannot store a second copy."""
    return message_id_for(seed, index) if seed else new_message_id()


def without_suppressed(doc: dict, suppressed: set[str]) -> dict:
    """Suppressed recipients are dropped and listed in `suppressed_recipients`; with none
    left the message is final as `suppressed` (stored, never enqueued, `to` kept as asked)."""
    doc["suppressed_recipients"] = []
    split = recipients.without_suppressed(doc, suppressed)
    if split is not None:
        changes, nobody_left = split
        doc.update(changes)
        if nobody_left:
            detail = "all recipients are on the suppression list"
            doc.update(status="suppressed", suppressed_at=doc["created_at"],
                       history=[{"status": "suppressed", "at": doc["created_at"], "detail": detail}])
    return doc


def schedule_fields(send_at: dt.datetime) -> dict:
    when = future_within(send_at, MAX_SCHEDULE_AHEAD, "72 hours", path="send_at")
    at = now_iso()
    return {"status": "scheduled", "due_at": iso(when), "queued_at": None,
            "history": [{"status": "scheduled", "at": at}]}


async def charge_plan(run: Accepting, who: Identity, count: int, ahead: ChargeAhead | None = None) -> None:
    """The plan's monthly sending limit (403 limit_reached). Emails are counted when the
    API accepts them, all or none per request; sandbox keys send nothing and count nothing.
    `ahead`: one email already charged while the message was built, settled against `count`."""
    if who.sandbox:
        return
    limit = _plan_limit(run, who)
    if ahead is not None:
        fitted = await ahead.settle(count)
    else:  # counted even when unlimited, so a limit set mid-month sees the month's real usage
        fitted = await send_limits.charge_plan(run.db, who.workspace_id, throttle.month_of(utcnow()), count, limit)
    if not fitted:
        raise Forbidden(f"The plan's limit of {limit} emails this month has been reached.", code="limit_reached")


def _plan_limit(run: Accepting, who: Identity) -> int:
    return throttle.monthly_limit(who.workspace, run.settings.plan_monthly_email_limit)


# charges made ahead being given back for cancelled requests, each in a task of its own
_refunds: set[asyncio.Task] = set()


class ChargeAhead:
    """One email charged to the plan in a task of its own, started before the message is
    built (a single send): its store round trip runs beside the message's suppression
    lookup instead of after it. Settled by `charge_plan` against what the message turned
    out to send (`settle`), or, when the request fails first, given back before its
    answer (`give_back`; `abandon` when it was cancelled: once the charge lands). Until
    then a request that sends nothing (invalid, suppressed) holds one unit of the month,
    which a concurrent send at the very limit may see as used."""

    def __init__(self, run: Accepting, who: Identity):
        self.db, self.workspace_id, self.settled = run.db, who.workspace_id, False
        self.month = throttle.month_of(utcnow())  # given back to the month it was counted in
        self.task = asyncio.ensure_future(send_limits.charge_plan(
            run.db, who.workspace_id, self.month, 1, _plan_limit(run, who)))

    async def settle(self, count: int) -> bool:
        """Whether `count` emails (0 or 1) are charged now: the one charged ahead kept,
        given back for a message that sends nothing, or refused by the limit (then
        nothing was counted). From here on, what is kept is the caller's to give back."""
        if count > 1:
            raise ValueError("a charge made ahead covers one email")
        try:
            fitted = await self.task
        except BaseException:
            self.abandon()
            raise
        self.settled = True
        if fitted and count == 0:
            await self._refund()
        return fitted or count == 0

    async def give_back(self) -> None:
        """The request failed before `settle`: the email given back if it was counted."""
        if self.settled:
            return
        self.settled = True
        try:
            fitted = await self.task
        except Exception:  # not counted (the store's error; the request's own is what it answers)
            return
        if fitted:
            await self._refund()

    def abandon(self) -> None:
        """`give_back` in a task of its own, for a request that cannot wait (cancelled)."""
        if self.settled:
            return
        task = asyncio.ensure_future(self.give_back())
        _refunds.add(task)
        task.add_done_callback(_refunds.discard)

    async def _refund(self) -> None:
        """Best effort: a unit the store did not take back stays counted; the client's
        own answer is not made to fail for it."""
        try:
            await send_limits.refund_plan(self.db, self.workspace_id, self.month, 1)
        except PyMongoError:
            log.warning("plan refund of 1 email for workspace %s failed", self.workspace_id,
                        extra={"workspace_id": self.workspace_id})


async def refund_plan(db: AsyncDatabase, workspace_id: str, count: int, accepted_at: str | None = None) -> None:
    """Give back live emails that will never be sent (not stored, not queued, or a scheduled
    send cancelled), to the month they were counted in."""
    month = throttle.month_of(parse_iso(accepted_at) if accepted_at else utcnow())
    await send_limits.refund_plan(db, workspace_id, month, count)


async def _accept(run: Accepting, who: Identity, docs: list[dict], batch: Batch | None,
                  ahead: ChargeAhead | None = None, files: list[AttachmentFile] | None = None) -> None:
    """Charge the plan for the messages that will be sent (`ahead`: see charge_plan), then
    store the attachments' bytes (before the messages that name them: a render never misses
    them; not for sandbox keys, which render nothing), the batch (if any) and the messages,
    and enqueue them. Whatever then fails to be stored or queued is given back, so the
    client's retry is not counted twice."""
    count = sum(1 for d in docs if d["status"] != "suppressed")
    await charge_plan(run, who, count, ahead)
    try:
        if files and count and not who.sandbox:
            await attachment_store.store(run.db, who.workspace_id, files)
        if batch is not None:
            try:
                await batch_store.insert(run.db, batch)
            except DuplicateKeyError:  # stored by an earlier attempt under this Idempotency-Key
                pass
        await _store_and_enqueue(run, docs, born=who.seed is None)
    except Exception as error:
        if not who.sandbox:
            try:
                await refund_plan(run.db, who.workspace_id, getattr(error, "unsent", count))
            except PyMongoError:  # the store is away: the client's answer says why, not this
                log.warning("plan refund of %d email(s) for workspace %s failed", count, who.workspace_id,
                            extra={"workspace_id": who.workspace_id})
        raise


async def _store_and_enqueue(run: Accepting, docs: list[dict], *, failure_code: str = "schedule_failed",
                             born: bool = True) -> None:
    """Store the messages, then hand the ones to send now to the `render` queue in chunks.
    What the client is told agrees with what will happen:
    - stored and queued: success;
    - a failed insert is followed by a look at what the store holds (a write whose answer
      was lost may have landed): all stored → carry on as if it had answered; otherwise
      what did land is marked failed and the answer says nothing will be sent (503 when
      the store was unreachable, else 500 `failure_code`);
    - the store does not answer that look: 503 with `outcome_unknown`, naming the
      messages; a retry with the same Idempotency-Key builds the same ids, so it finds
      them if they landed (and sends them once) or stores them if they did not;
    - an enqueue failure: the messages not queued are marked failed (the watchdog never
      sends what the client will retry), 500 `failure_code` with `unsent`.
    `born`: the messages to send now are stored born claimed by their render jobs
    (delivery_status.born_claim), which then send them with no claim write of their own.
    Not under an Idempotency-Key: every attempt stores the same ids, and an earlier
    attempt may have published jobs for them already (its answer lost after the publish),
    so a retry's jobs must claim them as any job does, with a write, to hold them alone."""
    token = send_jobs.new_claim_token() if born else ""
    if token:
        claimed = delivery_status.born_claim(token, in_seconds(run.settings.send_lease_seconds))
        for d in docs:
            if d["status"] == "queued":
                d.update(claimed)
    await _store(run.db, docs, failure_code)
    due = [d["_id"] for d in docs if d["status"] == "queued"]
    assert run.publisher is not None, "accepting publishes"
    try:
        await run.publisher.render(due, born=token)
    except PublishFailed as failed:
        error = not_queued(failed, failure_code)
        left = set(failed.unpublished)
        await _give_up(run.db, [d for d in docs if d["_id"] in left], "could not be queued for sending")
        error.unsent = len(left)
        raise error from failed


async def _store(db: AsyncDatabase, docs: list[dict], failure_code: str) -> None:
    try:
        await message_intake.insert_new(db, docs)
        return
    except PyMongoError as error:
        failure = error
    ids = [d["_id"] for d in docs]
    try:
        stored = await message_intake.stored_ids(db, ids)
        if len(stored) == len(ids):
            return  # the write landed; only its answer was lost
        await _give_up(db, [d for d in docs if d["_id"] in stored], "could not be stored completely")
    except ConnectionFailure as error:
        raise ServiceUnavailable(
            f"The service lost its database while storing {_naming(ids)}; whether it was accepted "
            "is unknown. Retry with the same Idempotency-Key to get the same message(s), sent once; "
            "without a key, GET /email/<id> tells once the service answers (a plain retry may send "
            "a second copy).",
            retry_after=UNAVAILABLE_RETRY_AFTER_SECONDS, outcome_unknown=True) from error
    if isinstance(failure, ConnectionFailure):
        raise ServiceUnavailable("The service cannot reach its database; nothing was stored and "
                                 "nothing will be sent. Retry after the Retry-After wait.",
                                 retry_after=UNAVAILABLE_RETRY_AFTER_SECONDS) from failure
    raise ServerError("The email could not be stored; nothing will be sent. Retry with backoff.",
                      code=failure_code) from failure


def _naming(ids: list[str]) -> str:
    return f"message {ids[0]}" if len(ids) == 1 else f"{len(ids)} messages ({ids[0]} … {ids[-1]})"


async def _give_up(db: AsyncDatabase, docs: list[dict], why: str) -> None:
    """Messages stored but never to be sent (the client is told so): final as `failed`."""
    live = [d for d in docs if d["status"] != "suppressed"]
    await message_store.apply(db, [delivery_status.fail(d["_id"], why) for d in live])
    await batch_store.record_finished(db, [(d, "failed") for d in live])


async def cancel(db: AsyncDatabase, workspace_id: str, message_id: str) -> None:
    """A scheduled email → `cancelled` (again: nothing changes); never sent, so its count
    goes back to the plan. 404 for no such message, 409 for one past `scheduled`."""
    cancelled = await message_store.apply_one(db, delivery_status.cancel(message_id, current="scheduled"),
                                              workspace_id=workspace_id)
    if cancelled is not None:
        if not cancelled.get("sandbox"):
            await refund_plan(db, cancelled["workspace_id"], 1, cancelled["created_at"])
        return
    doc = await message_store.get(db, workspace_id, message_id)
    if doc is None:
        raise NotFound("No such message in this workspace.")
    if doc["status"] != "cancelled":
        raise Conflict(f"The message is already {doc['status']}; only a scheduled message can be cancelled.")
