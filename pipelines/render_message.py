"""One stored message → the MIME bytes and envelope the `send` actor hands to SMTP.

Plain code: the actor gathers the documents it needs and passes them in."""

from __future__ import annotations

import dataclasses

from .clock import utcnow
from .dkim import Signer, signer_key
from .errors import PostroomError
from .merge_compile import compile_template
from .mime import compose, verp_return_path
from .personalise import CompiledContent, compile_content, recipient_data, render_content, system_fields
from .recipients import owed_recipients
from .settings import Settings
from . import tracking_rewrite, unsubscribe_headers
from .preheader import with_preheader


@dataclasses.dataclass
class RenderContext:
    settings: Settings
    workspaces: dict[str, dict]
    # pipelines.dkim.signer_key(message) → Signer; a message without one leaves unsigned
    signers: dict[str, Signer] = dataclasses.field(default_factory=dict)
    # (template id, version) → that template version (messages render what was current at send)
    templates: dict[tuple[str, int], dict] = dataclasses.field(default_factory=dict)
    # (workspace id, lower-cased address) → contact, for contact merge tags
    contacts: dict[tuple[str, str], dict] = dataclasses.field(default_factory=dict)


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
    return compile_content(message["subject"], html, message.get("text"))


def message_data(message: dict, ctx: RenderContext) -> dict:
    """Merge-tag values for the message's first recipient (a message to several addresses
    is one email, personalised for the first). Its unsubscribe and preferences links,
    though, name no recipient when there are several: every recipient sees them, so they
    are bound to the message and the page asks which of its addresses is meant."""
    s, email = ctx.settings, message["to"][0]
    contact = ctx.contacts.get((message["workspace_id"], email.lower()))
    shared = len(message["to"]) > 1
    system = system_fields(workspace=ctx.workspaces.get(message["workspace_id"]) or {"_id": message["workspace_id"]},
                           contact_id=None if shared or contact is None else contact["_id"],
                           email=None if shared else email,
                           message_id=message["_id"], base_url=s.base_url, secret_key=s.secret_key, now=utcnow())
    return recipient_data(contact=contact, email=email, template_data=message.get("template_data"), system=system)


def render_one(message: dict, ctx: RenderContext) -> dict:
    s = ctx.settings
    fields = message_data(message, ctx)
    subject, html, text = render_content(message_content(message, ctx), fields, max_html_bytes=s.max_html_bytes)
    if html is not None and message.get("preview_text"):  # automation emails' previewText
        html = with_preheader(html, compile_template(message["preview_text"], "text").render(fields))
    if html is not None:  # open pixel and click redirects, as the message's track_* flags ask
        html = tracking_rewrite.apply(html, message, base_url=s.base_url, secret_key=s.secret_key)
    data = compose(
        message_id=message["_id"], from_address=message["from_address"],
        from_name=message.get("from_name"), to=message["to"], subject=subject,
        html=html, text=text, reply_to=message.get("reply_to"),
        id_domain=message.get("signing_domain") or s.shared_domain,
        recipient_headers=unsubscribe_headers.headers(message, fields["unsubscribe_url"],
                                                      bounce_domain=s.bounce_domain))
    signer = ctx.signers.get(signer_key(message))
    if signer is not None:
        data = signer.sign(data)
    return {
        "_id": message["_id"],
        "mail_from": verp_return_path(message["_id"], s.bounce_domain),
        "recipients": owed_recipients(message),
        "data": data.decode("ascii"),
    }


def render_all(messages: list[dict], ctx: RenderContext) -> RenderResult:
    result = RenderResult()
    for message in messages:
        try:
            result.rendered.append(render_one(message, ctx))
        except (ValueError, PostroomError) as error:  # a message that cannot be rendered fails alone
            result.failed[message["_id"]] = str(error)
    return result
