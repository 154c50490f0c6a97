"""One stored message → the MIME bytes and envelope the `send` actor hands to SMTP.

Plain code: the actor gathers the documents it needs and passes them in."""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import logging
from collections.abc import Callable

from pipelines.audience.recipients import envelope, first_recipient, owed_recipients
from pipelines.core.clock import now_iso, parse_iso, utcnow
from pipelines.core.documents import Template, TemplateVersion
from pipelines.core.errors import PostroomError
from pipelines.core.settings import Settings
from pipelines.messages import tracking_rewrite, unsubscribe_headers
from pipelines.messages.attachments import store_key
from pipelines.messages.dkim import Signer, signer_key
from pipelines.messages.mail_streams import MARKETING, shared_headers, stream_of
from pipelines.messages.mime import compose, verp_return_path
from pipelines.templates.merge_compile import compile_template
from pipelines.templates.personalise import (
    ADDITIONS_MARGIN_BYTES,
    CompiledContent,
    compile_content,
    recipient_data,
    render_content,
    system_fields,
    template_data_of,
)
from pipelines.templates.preheader import with_preheader

_log = logging.getLogger(__name__)


@dataclasses.dataclass
class RenderContext:
    settings: Settings
    workspaces: dict[str, dict]
    # pipelines.messages.dkim.signer_key(message) → Signer; a message without one leaves unsigned
    signers: dict[str, Signer] = dataclasses.field(default_factory=dict)
    # (template id, version) → that template version (messages render what was current at send)
    templates: dict[tuple[str, int | None], TemplateVersion | Template] = dataclasses.field(default_factory=dict)
    # (workspace id, lower-cased address) → contact, for contact merge tags
    contacts: dict[tuple[str, str], dict] = dataclasses.field(default_factory=dict)
    # signer_key(message) → the verified return-path host of its custom domain; absent:
    # bounces come back to the shared bounce domain
    return_paths: dict[str, str] = dataclasses.field(default_factory=dict)
    # what message_content compiled for this job, by what it depends on: the messages of a
    # job mostly share one template, and hashing its source per message costs more than this
    compiled: dict[tuple, CompiledContent] = dataclasses.field(default_factory=dict)
    # attachments.store_key(workspace, sha256) → the file's bytes, for the messages with files
    files: dict[str, bytes] = dataclasses.field(default_factory=dict)

    def __getstate__(self) -> dict:
        """Sent to a render process without what was compiled here (code, not data)."""
        return {**self.__dict__, "compiled": {}}


@dataclasses.dataclass
class RenderResult:
    rendered: list[dict] = dataclasses.field(default_factory=list)
    failed: dict[str, str] = dataclasses.field(default_factory=dict)


def message_content(message: dict, ctx: RenderContext) -> CompiledContent:
    """The message's subject/html/text compiled (cached by content, so a batch or campaign
    on one template compiles once)."""
    html = message.get("html")
    if message.get("template_id"):
        template = ctx.templates.get((message["template_id"], message.get("template_version")))
        if template is None:
            raise ValueError(f"template {message['template_id']} version {message.get('template_version')} is gone")
        html = template["html"]
    options = {"footer": message.get("footer", True), "postal_address": stream_of(message) == MARKETING}
    key = (message["subject"], html, message.get("text"), *options.values())
    compiled = ctx.compiled.get(key)
    if compiled is None:
        compiled = ctx.compiled[key] = compile_content(message["subject"], html, message.get("text"), **options)
    return compiled


def message_data(message: dict, ctx: RenderContext) -> dict:
    """Merge-tag values for the message's first recipient (a message to several addresses
    is one email, personalised for the first). Its unsubscribe and preferences links,
    though, name no recipient when there are several: every recipient sees them, so they
    are bound to the message and the page asks which of its addresses is meant."""
    s, email = ctx.settings, first_recipient(message)
    contact = ctx.contacts.get((message["workspace_id"], email.lower()))
    shared = len(envelope(message)) > 1
    system = system_fields(workspace=ctx.workspaces.get(message["workspace_id"]) or {"_id": message["workspace_id"]},
                           contact_id=None if shared or contact is None else contact["_id"],
                           email=None if shared else email,
                           message_id=message["_id"], base_url=s.base_url, secret_key=s.secret_key, now=utcnow())
    return recipient_data(contact=contact, email=email, template_data=template_data_of(message), system=system)


def tracked_html(html: str, message: dict, s: Settings) -> str:
    """Tracking as asked, within the margin for our additions: click redirects that would
    grow the body past the client's limit plus the margin are left out (links stay as
    the client wrote them); the open pixel is always small enough."""
    tracked = tracking_rewrite.apply(html, message, base_url=s.base_url, secret_key=s.secret_key)
    if message.get("track_clicks") and len(tracked.encode()) > s.max_html_bytes + ADDITIONS_MARGIN_BYTES:
        tracked = tracking_rewrite.apply(html, {**message, "track_clicks": False},
                                         base_url=s.base_url, secret_key=s.secret_key)
    return tracked


def html_as_sent(message: dict, s: Settings) -> Callable[[list[str]], list[str]] | None:
    """What is added to the rendered HTML's pieces before it is sent, when its text
    alternative can be filled from the template's skeleton: nothing, or the open pixel.
    A preheader (per-message text) or click redirects (per-message URLs in the text):
    the text is derived from the final HTML, per message."""
    if message.get("preview_text") or message.get("track_clicks"):
        return None
    if message.get("track_opens"):
        return functools.partial(tracking_rewrite.open_pixel_parts, base_url=s.base_url)
    return list


def origination_date(message: dict) -> dt.datetime | None:
    """The Date header: when the message became due to send. Rendering again (a lost job,
    a retry held in the store) keeps the same Date, as it keeps the same Message-ID."""
    when = message.get("queued_at") or message.get("created_at")
    return parse_iso(when) if isinstance(when, str) and when else None


def rendered_parts(message: dict, ctx: RenderContext) -> tuple[str, str | None, str | None, dict]:
    """(subject, final HTML, text or None, merge fields) of one message."""
    s = ctx.settings
    fields = message_data(message, ctx)
    subject, html, text = render_content(message_content(message, ctx), fields, max_html_bytes=s.max_html_bytes,
                                         html_as_sent=html_as_sent(message, s))
    if html is not None and message.get("preview_text"):  # automation emails' previewText
        html = with_preheader(html, compile_template(message["preview_text"], "text").render(fields))
    if html is not None:  # open pixel and click redirects, as the message's track_* flags ask
        html = tracked_html(html, message, s)
    return subject, html, text, fields


def message_files(message: dict, ctx: RenderContext) -> list[tuple[dict, bytes]]:
    """The message's attachments with their bytes (ValueError when some are not loaded:
    the message fails with the reason rather than leave without them)."""
    files = []
    for ref in message.get("attachments") or ():
        data = ctx.files.get(store_key(message["workspace_id"], ref["sha256"]))
        if data is None:
            raise ValueError(f"the attachment {ref['filename']!r} is no longer stored")
        files.append((ref, data))
    return files


def render_one(message: dict, ctx: RenderContext) -> dict:
    s = ctx.settings
    subject, html, text, fields = rendered_parts(message, ctx)
    signing_domain = message.get("signing_domain") or s.shared_domain
    data = compose(
        message_id=message["_id"], from_address=message["from_address"],
        from_name=message.get("from_name"), to=message["to"], subject=subject,
        html=html, text=text, reply_to=message.get("reply_to"), id_domain=signing_domain,
        extra_headers=shared_headers(message, signing_domain),
        recipient_headers=unsubscribe_headers.headers(message, fields["unsubscribe_url"],
                                                      bounce_domain=s.bounce_domain),
        date=origination_date(message), cc=message.get("cc") or (), caller_headers=message.get("headers") or (),
        files=message_files(message, ctx))
    signer = ctx.signers.get(signer_key(message))
    if signer is not None:  # compose ends every line CRLF, so the signer need not check
        data = signer.sign(data, crlf_only=True, also=tuple(name for name, _ in message.get("headers") or ()))
    return {
        "_id": message["_id"],
        "mail_from": verp_return_path(message["_id"], ctx.return_paths.get(signer_key(message)) or s.bounce_domain),
        "recipients": owed_recipients(message),
        "data": data.decode("utf-8"),  # ASCII, but for a non-ASCII local part in To: (SMTPUTF8)
        # every line ends CRLF and the last too (pipelines/mime.compose): the transport
        # need not check before dot-stuffing (absent from jobs made before: checked)
        "crlf_only": True,
        "rendered_at": now_iso(),  # kept with the SMTP attempt it made (GET /email/:id's timeline)
    }


def failure_reason(error: BaseException) -> str:
    """The detail a failed message shows. Our own errors (a budget, a size, a malformed
    template) say what is wrong; anything else is a bug or a document we cannot read,
    named by its type so it can be found in the worker's log."""
    if isinstance(error, (ValueError, PostroomError)) and str(error):
        return str(error)
    return f"could not be rendered ({type(error).__name__}: {str(error)[:200]})"


def render_all(messages: list[dict], ctx: RenderContext) -> RenderResult:
    """Each message rendered on its own: whatever one raises (a budget, a malformed stored
    template, a bug) fails that message with the reason, and the others render on."""
    result = RenderResult()
    for message in messages:
        try:
            result.rendered.append(render_one(message, ctx))
        except Exception as error:
            if not isinstance(error, (ValueError, PostroomError)):
                _log.exception("message %s could not be rendered", message.get("_id"))
            result.failed[message["_id"]] = failure_reason(error)
    return result
