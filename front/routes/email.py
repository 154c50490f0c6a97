"""Transactional email: send (now or scheduled), batch, status, cancel; and the activity
API: the workspace's messages (GET /email) and one message's timeline (GET /email/:id)."""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, StringConstraints, model_validator
from quart import Blueprint

from actors.runtime import publisher
from mongo import batches as batch_store
from mongo import bounces as bounce_store
from mongo import message_search
from mongo import messages as message_store
from pipelines import views
from pipelines.core.errors import ValidationFailed
from pipelines.messages import delivery_status, timeline
from pipelines.workflows import accept_email

from ..auth import count_emails, give_back_emails
from ..email_fields import Attachments, Headers, Metadata, Recipients, ReplyTo, Tags
from ..idempotency import idempotent, request_seed
from ..lookup import owned
from ..pagination import CursorPageQuery, encode_cursor, more_after, page
from ..responses import one
from ..runtime import caller, db, settings
from ..types import DisplayName, EmailAddress, JsonObject, Strict
from ..validation import body, query
from .bounces import Since, Until

bp = Blueprint("email", __name__, url_prefix="/api/v1")

MAX_RECIPIENTS = 50
MAX_BATCH_MESSAGES = 1000
MAX_TEMPLATE_DATA_BYTES = 256 * 1024


def _given(name: str) -> dict:
    return {"required": [name], "properties": {name: {"type": "string", "minLength": 1}}}


class EmailContent(Strict):
    """One email: who it goes to, from whom, and what it says."""
    # Said in the document too: some content (html, text or template_id: else 400
    # no_content), not both html and template_id, and no `footer: false` on marketing mail.
    model_config = ConfigDict(json_schema_extra={
        "anyOf": [_given("html"), _given("text"), _given("template_id")],
        "allOf": [{"not": {"required": ["stream", "footer"],
                           "properties": {"stream": {"const": "marketing"}, "footer": {"const": False}}}},
                  {"not": {"required": ["html", "template_id"], "properties": {
                      "html": {"type": "string"}, "template_id": {"type": "string", "minLength": 1}}}}]})
    to: EmailAddress | Annotated[list[EmailAddress], Field(min_length=1, max_length=MAX_RECIPIENTS)] = Field(
        description="One address, or a list of up to 50 addresses that all receive the same message. "
                    "to, cc and bcc together: at most 50 (else 400, path cc or bcc).")
    cc: Recipients | None = Field(None, description="One address or a list: shown in the Cc header, each a "
                                                    "recipient of the message (suppression, bounces, status).")
    bcc: Recipients | None = Field(None, description="One address or a list: recipients named in the SMTP "
                                                     "envelope only, never in a header.")
    subject: Annotated[str, StringConstraints(min_length=1, max_length=998)] = Field(
        description="HTML tags are stripped and line breaks folded.")
    html: str | None = Field(None, description="HTML body, at most 256 KB.")
    text: str | None = Field(None, description="Plain-text body (derived from html when absent).")
    template_id: str | None = Field(None, description="A template of this workspace to render.")
    template_data: JsonObject(MAX_TEMPLATE_DATA_BYTES) | None = Field(None, description=(
        "Keys become merge tags; at most 256 KB serialised. A list whose {{#each}} loops would take more "
        "than the render budget (100,000 steps per message; docs/templates.md, Render budget) is refused: "
        "validation_error, path template_data.<list>."))
    from_email: EmailAddress | None = Field(
        None, description="On a verified domain of the workspace: the From address; otherwise the "
                          "Reply-To of mail sent from the workspace's address on the shared domain.")
    from_name: DisplayName | None = Field(None, description="Display name of the sender (no control characters).")
    reply_to: ReplyTo | None = Field(None, description="Reply-To: one address or a list of up to 10 "
                                                       "(wins over from_email).")
    track_opens: bool = Field(False, description="Add an open-tracking pixel.")
    track_clicks: bool = Field(False, description="Rewrite links for click tracking.")
    stream: Literal["transactional", "marketing"] = Field(
        "transactional", description="`transactional` (default: receipts, password resets): a marketing "
                                     "unsubscribe does not hold it back. `marketing`: held back by unsubscribes, "
                                     "sent with List-Id and one-click List-Unsubscribe, always with the postal "
                                     "address.")
    footer: bool = Field(True, description="Rule 9's compliance footer (unsubscribe and preferences links, "
                                           "company name and address), appended unless the HTML places "
                                           "`{{unsubscribe_url}}`. `false` leaves it out: transactional mail only.")
    attachments: Attachments | None = Field(
        None, description="Up to 20 files, 10 MB decoded in all; inline ones (with content_id) go with the HTML "
                          "in multipart/related. Programs and scripts are refused (docs/email.md, Attachments).")
    headers: Headers | None = Field(
        None, description="Your own headers {name: value} (X-…, In-Reply-To, References, List-Help, …), at most 50, "
                          "values without line breaks (≤ 998 characters). The ones Postroom writes (From, To, Cc, "
                          "Subject, Date, Message-ID, Reply-To, Sender, DKIM-*, List-Unsubscribe, Feedback-ID, "
                          "MIME-Version, Content-*, …) are refused naming the header.")
    metadata: Metadata | None = Field(
        None, description="Up to 10 string pairs (keys ≤ 40 of [A-Za-z0-9_.-], values ≤ 500 characters): stored "
                          "with the message, returned by its status and carried in each of its webhook events.")
    tags: Tags | None = Field(None, description="Up to 5 names (≤ 50 of [A-Za-z0-9_-]), like metadata.")

    def fields(self) -> dict:
        """The validated fields for the accept workflow; attachments as the checked, decoded
        files (pipelines/messages/attachments.AttachmentFile)."""
        out = self.model_dump(exclude={"attachments"})
        out["attachments"] = [a.file for a in self.attachments or ()]
        return out


class SendEmail(EmailContent):
    send_at: dt.datetime | None = Field(
        None, description="ISO 8601; in the future and within 72 hours. Without a time zone: UTC.")


class SendBatch(Strict):
    messages: Annotated[list[EmailContent], Field(min_length=1, max_length=MAX_BATCH_MESSAGES)] = Field(
        description="1 to 1000 emails, each validated on its own (errors name `messages[i].field`).")


class _KeyWindow:
    """The calling key's email window (front/auth), for the accept workflow."""

    async def take(self, emails: int) -> None:
        await count_emails(caller(), emails)

    async def give_back(self, emails: int) -> None:
        await give_back_emails(emails)


def _identity() -> accept_email.Identity:
    who = caller()
    return accept_email.Identity(who.workspace, who.key_id, who.sandbox, request_seed())


@bp.post("/email/send")
@idempotent()
@body(SendEmail)
async def send(data: SendEmail):
    doc = await accept_email.send(db(), settings(), publisher(), _identity(), data.fields(),
                                  send_at=data.send_at, window=_KeyWindow())
    if doc["status"] == "scheduled":
        return one({"scheduled": True, "message_id": doc["_id"], "scheduled_at": doc["due_at"]}, 201)
    # queued now (202), or every recipient suppressed: stored, never enqueued (200)
    return one({"message_id": doc["_id"], "status": doc["status"], "to": doc["to"],
                "suppressed_recipients": doc["suppressed_recipients"], "sandbox": doc["sandbox"]},
               200 if doc["status"] == "suppressed" else 202)


@bp.post("/email/batch")
@idempotent()
@body(SendBatch)
async def send_batch(data: SendBatch):
    batch, docs = await accept_email.send_batch(db(), settings(), publisher(), _identity(),
                                                [m.fields() for m in data.messages], window=_KeyWindow())
    return one({"batch_id": batch["_id"], "status": views.batch_status(batch),
                "total": batch["total"], "message_ids": [d["_id"] for d in docs]}, 202)


@bp.get("/email/batch/<batch_id>")
async def batch_status(batch_id: str):
    doc = await owned(batch_store, batch_id, "batch")
    return one(views.batch(doc))


@bp.get("/email/<message:message_id>/status")
async def status(message_id: str):
    doc = await owned(message_store, message_id, "message")
    return one(views.message_status(doc))


@bp.delete("/email/<message:message_id>")
async def cancel(message_id: str):
    await accept_email.cancel(db(), caller().workspace_id, message_id)
    return one({"message_id": message_id, "status": "cancelled"})


# --- the activity API ----------------------------------------------------------------------

_METADATA_PARAM = re.compile(r"^metadata\[(.{1,40})\]$", re.DOTALL)
MAX_METADATA_FILTERS = 10
Name = Annotated[str, StringConstraints(min_length=1, max_length=100)]
MetadataValue = Annotated[str, StringConstraints(max_length=500)]


def _cursor(doc: dict) -> str:
    return encode_cursor(*message_search.after_cursor(doc))


class EmailQuery(CursorPageQuery):
    to: EmailAddress | None = Field(None, description="Only messages to this address: any recipient (to, cc "
                                                      "or bcc), any letter case.")
    status: Literal[tuple(sorted(delivery_status.ALL))] | None = Field(  # type: ignore[valid-type]
        None, description="Only messages in this status now.")
    tag: Name | None = Field(None, description="Only messages sent with this tag.")
    metadata: dict[str, MetadataValue] | None = Field(
        None, description="Written `metadata[key]=value` (up to 10): only messages whose metadata has each "
                          "of these pairs.", json_schema_extra={"style": "deepObject"})
    stream: Literal["transactional", "marketing"] | None = Field(
        None, description="Only this mail stream (campaign and automation mail is marketing).")
    campaign_id: Name | None = Field(None, description="Only this campaign's messages.")
    since: Since | None = Field(None, description="Created at or after this moment: an ISO 8601 date (start of "
                                                  "that day, UTC) or date-time (no offset means UTC).")
    until: Until | None = Field(None, description="Created before this moment: an ISO 8601 date-time, or a date "
                                                  "meaning the end of that day (UTC).")

    @model_validator(mode="before")
    @classmethod
    def _metadata_pairs(cls, raw: Any) -> Any:
        """`metadata[key]=value` parameters gathered into `metadata`."""
        if not isinstance(raw, dict):
            return raw
        pairs = {}
        for name in list(raw):
            if name.startswith("metadata["):
                found = _METADATA_PARAM.match(name)
                if found is None:
                    # raised as it is (not a ValueError): a before-validator's error has no path
                    raise ValidationFailed("metadata: write a filter as metadata[key]=value, the key 1 to 40 "
                                           "characters.", path="metadata")
                pairs[found.group(1)] = raw.pop(name)
        if len(pairs) > MAX_METADATA_FILTERS:
            raise ValidationFailed(f"metadata: at most {MAX_METADATA_FILTERS} metadata[key]=value filters.",
                                   path="metadata")
        return {**raw, "metadata": pairs} if pairs else raw

    def filters(self) -> message_search.Filters:
        since_ms, until_ms = self.window_ms()
        return message_search.Filters(
            to=self.to, status=self.status, tag=self.tag, metadata=tuple((self.metadata or {}).items()),
            stream=self.stream, campaign_id=self.campaign_id, since_ms=since_ms, until_ms=until_ms)


async def find_messages(workspace_id: str, params: EmailQuery) -> tuple[message_search.Page, str | None]:
    """A page of the workspace's messages for `params`, newest first, and the cursor of
    the next page (None on the last). GET /email and the console's messages page."""
    filters = params.filters()
    found = await message_search.list_page(db(), workspace_id, filters, limit=params.limit, offset=params.offset,
                                           after=params.after())
    items = found.items
    return found, _cursor(items[-1]) if items and more_after(items, found.total, params) else None


async def message_detail(message_id: str) -> dict:
    """The caller's message with its whole timeline, oldest first (404 when not theirs)."""
    doc = await owned(message_store, message_id, "message")
    return timeline.detail(doc, await bounce_store.of_message(db(), doc["workspace_id"], doc["_id"]))


@bp.get("/email")
@query(EmailQuery)
async def list_emails(params: EmailQuery):
    """The workspace's messages, newest first."""
    found, next_cursor = await find_messages(caller().workspace_id, params)
    answer = page([timeline.list_item(d) for d in found.items], total=found.total, limit=params.limit,
                  offset=params.offset)
    answer["pagination"].update(has_more=next_cursor is not None, next_cursor=next_cursor, total_exact=found.exact)
    return answer


@bp.get("/email/<message:message_id>")
async def get_email(message_id: str):
    """One message with its whole timeline, oldest first."""
    return one(await message_detail(message_id))
