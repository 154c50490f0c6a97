"""The signup workflow behind a form's public endpoint (front/routes/form_pages.py): take a
submission, and confirm it.

    submit(form, raw, client)      rate limit, token, honeypot, answers; then
        double opt-in:  record the signup `pending` (form.submitted) and send the
                        confirmation email through the normal transactional path
                        (accept_email.py: message document, render and send jobs)
        single opt-in:  subscribe now, and record it `confirmed` (form.submitted, naming
                        the contact)
    confirm(token)                 the link from that email: subscribe, then `confirmed`

Subscribing goes through the store functions the API uses, so it records what the API
records: contact.created for a new address, list.member_added and contact.subscribed (with
the list) per list joined. A public form never overwrites what the workspace knows about
an existing contact: it fills in only names and attributes not set yet. Only a confirmed
signup (the mailbox owner clicked) subscribes an unsubscribed contact again.

Every answer depends on the form and the input only, never on whether the address is
already a contact, subscribed or suppressed. The confirmation email is transactional: a
marketing unsubscribe does not hold it back (so that person can come back), a bounce,
complaint or manual suppression does (the send path stores it as `suppressed`)."""

from __future__ import annotations

import dataclasses
import time

from pymongo.asynchronous.database import AsyncDatabase

from mongo import contacts as contact_store
from mongo import forms as form_store
from mongo import lists as list_store
from mongo import rate_windows
from mongo import workspaces as workspace_store
from pipelines.audience import forms
from pipelines.audience.contact_csv import MAX_ATTRIBUTES
from pipelines.core.clock import in_seconds, now_iso, parse_iso
from pipelines.core.documents import Workspace
from pipelines.core.errors import NotFound, RateLimited, ValidationFailed
from pipelines.core.settings import Settings
from pipelines.messages import links, mail_streams
from pipelines.workflows import accept_email, unsubscribe, update_contact
from pipelines.workflows.publisher import Publisher

SOURCE = "form"  # the `reason` of the subscription events a form causes


@dataclasses.dataclass(frozen=True)
class Submitted:
    status: str   # "pending" (a confirmation email is on its way) or "confirmed"


def form_token(settings: Settings, form: dict) -> str:
    return links.sign("form", forms.token_payload(form["workspace_id"], form["_id"]), settings.secret_key)


def _token_valid(settings: Settings, form: dict, token) -> bool:
    payload = links.verify("form", token, settings.secret_key) if isinstance(token, str) else None
    return payload == forms.token_payload(form["workspace_id"], form["_id"])


async def _check_rate(db: AsyncDatabase, settings: Settings, form: dict, client: str) -> None:
    limit = settings.form_submissions_per_minute
    state = await rate_windows.hit(db, "form", f"{form['_id']}:{client}", limit=limit)
    if not state.allowed:
        raise RateLimited("Too many sign-ups from your address; try again in a minute.",
                          retry_after=state.retry_after_seconds(time.time()))


async def submit(db: AsyncDatabase, settings: Settings, publisher: Publisher, form: dict, raw: dict,
                 client: str) -> Submitted:
    """One submission. Raises RateLimited, ValidationFailed (a bad token: path `token`),
    InvalidAnswers (every wrong answer, by field name) or a PostroomError of the send path."""
    await _check_rate(db, settings, form, client)
    if not _token_valid(settings, form, raw.get(forms.TOKEN_FIELD)):
        raise ValidationFailed("This form is out of date: reload the page and try again.", path=forms.TOKEN_FIELD)
    status = form_store.PENDING if forms.effective(form)["double_opt_in"] else form_store.CONFIRMED
    if str(raw.get(forms.HONEYPOT_FIELD) or "").strip():
        return Submitted(status)  # a bot: the usual answer, nothing recorded
    answer = forms.read_submission(form, raw)
    workspace = await workspace_store.get(db, form["workspace_id"])
    if workspace is None:
        raise NotFound("No such form.")
    now = now_iso()
    signup = {
        "_id": forms.signup_id(form["workspace_id"], form["_id"], answer.email),
        "workspace_id": form["workspace_id"], "form_id": form["_id"], "email": answer.email,
        "first_name": answer.first_name, "last_name": answer.last_name, "attributes": answer.attributes,
        "status": status, "client_address": client, "created_at": now, "submitted_at": now,
        "expires_at": in_seconds(forms.CONFIRMATION_TTL_SECONDS) if status == form_store.PENDING else "",
        "last_sent_at": "", "message_id": None, "confirmed_at": now if status == form_store.CONFIRMED else None,
    }
    if status == form_store.CONFIRMED:  # subscribed first: the event names the contact (automations start on it)
        contact = await subscribe(db, workspace, form, signup, confirmed=False)
        await form_store.record_submission(db, signup, form_store.submitted_event(form, signup, answer.fields,
                                                                                  contact))
        return Submitted(status)
    # a sender problem fails before recording
    message = await _confirmation_message(db, settings, workspace, form, signup)
    before = await form_store.record_submission(db, signup, form_store.submitted_event(form, signup, answer.fields))
    if _may_send(before):
        await accept_email.accept(db, settings, publisher, _on_behalf_of(workspace), [message])
        await form_store.mark_sent(db, signup["_id"], message["_id"])
    return Submitted(status)


def _may_send(before: dict | None) -> bool:
    """A confirmation email at most every RESEND_AFTER_SECONDS per form and address."""
    last = (before or {}).get("last_sent_at")
    return not last or (time.time() - parse_iso(last).timestamp()) >= forms.RESEND_AFTER_SECONDS


async def _confirmation_message(db: AsyncDatabase, settings: Settings, workspace: Workspace, form: dict,
                                signup: dict) -> dict:
    expires = int(parse_iso(signup["expires_at"]).timestamp())
    token = links.sign("form_confirm", forms.confirm_payload(workspace["_id"], signup["_id"], expires),
                       settings.secret_key)
    subject, html, text = forms.confirmation_email(form, links.form_confirm_url(settings.base_url, token))
    # A request for confirmation, sent because the person asked for it, to someone not
    # subscribed yet: there is nothing to unsubscribe from (not confirming is the way out, as
    # the email says), so it goes out transactional (no List-Unsubscribe headers) and without
    # the compliance footer, whose Unsubscribe link would only confuse.
    fields = {"to": signup["email"], "subject": subject, "html": html, "text": text,
              "from_name": form.get("from_name"), "stream": mail_streams.TRANSACTIONAL, "footer": False}
    return await accept_email.prepare(db, settings, _on_behalf_of(workspace), fields)


def _on_behalf_of(workspace: Workspace) -> accept_email.Identity:
    """Mail the service sends for the workspace without any API key: live, and counted
    against no key's email rate."""
    return accept_email.Identity(workspace, key_id=None)


@dataclasses.dataclass(frozen=True)
class Confirmation:
    outcome: str                 # "confirmed", "expired" or "invalid"
    form: dict | None = None
    workspace: Workspace | None = None


async def confirm(db: AsyncDatabase, settings: Settings, token: str) -> Confirmation:
    """The confirmation link: subscribe the signup's address (repeatable: a second click
    changes nothing and answers the same)."""
    payload = links.verify("form_confirm", token, settings.secret_key)
    if not payload or not isinstance(payload.get("s"), str) or not isinstance(payload.get("w"), str):
        return Confirmation("invalid")
    if not isinstance(payload.get("x"), int) or payload["x"] < time.time():
        return Confirmation("expired")
    signup = await form_store.get_signup(db, payload["w"], payload["s"])
    if signup is None:
        return Confirmation("expired")
    form = await form_store.get(db, signup["workspace_id"], signup["form_id"])
    workspace = await workspace_store.get(db, signup["workspace_id"])
    if form is None or workspace is None:
        return Confirmation("invalid")
    if signup["status"] == form_store.PENDING:
        if signup["expires_at"] < now_iso():
            return Confirmation("expired", form, workspace)
        await subscribe(db, workspace, form, signup, confirmed=True)  # repeatable: safe before the mark
        await form_store.mark_confirmed(db, signup["_id"])
    return Confirmation("confirmed", form, workspace)


async def subscribe(db: AsyncDatabase, workspace: Workspace, form: dict, signup: dict, *, confirmed: bool) -> dict:
    """The signup's address becomes a contact in the form's static lists (those still there)."""
    workspace_id = workspace["_id"]
    contact = await contact_store.find_by_email(db, workspace_id, signup["email"])
    if contact is None:
        doc = contact_store.new_document(workspace_id, email=signup["email"], first_name=signup.get("first_name"),
                                         last_name=signup.get("last_name"), attributes=signup.get("attributes"))
        if await contact_store.insert(db, doc):
            contact = doc
        else:  # created meanwhile (another tab, the API): from here on it is an existing contact
            contact = await contact_store.find_by_email(db, workspace_id, signup["email"])
    if contact is None:
        raise LookupError(f"contact {signup['email']} vanished while subscribing")
    contact = await _fill_missing(db, workspace_id, contact, signup)
    if confirmed and not contact["subscribed"]:
        await unsubscribe.resubscribe(db, workspace, contact, SOURCE)
    for list_doc in await list_store.get_many(db, workspace_id, form.get("list_ids") or []):
        if list_doc["type"] == "static":
            await list_store.add_members(db, list_doc, [contact["_id"]], reason=SOURCE)
    return contact


async def _fill_missing(db: AsyncDatabase, workspace_id: str, contact: dict, signup: dict) -> dict:
    fields = {k: signup[k] for k in ("first_name", "last_name") if signup.get(k) and not contact.get(k)}
    known = contact.get("attributes") or {}
    new_attributes = {k: v for k, v in (signup.get("attributes") or {}).items() if k not in known}
    if len(known) + len(new_attributes) > MAX_ATTRIBUTES:
        new_attributes = dict(list(new_attributes.items())[:max(0, MAX_ATTRIBUTES - len(known))])
    if not fields and not new_attributes:
        return contact
    try:
        updated = await update_contact.update(db, workspace_id, contact["_id"], fields=fields,
                                            attributes=new_attributes, max_attributes=MAX_ATTRIBUTES)
    except (LookupError, ValidationFailed):
        return contact  # deleted or filled meanwhile: what it knows stays
    return updated or contact
