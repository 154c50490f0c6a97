"""Per-recipient content: compile a message's subject/html/text once, then fill them for
each recipient from the contact, the request's template_data and the system fields.

    content = compile_content(subject, html, text)            # once per template content
    data = recipient_data(contact=..., email=..., ...)         # once per recipient
    subject, html, text = render_content(content, data)        # cheap

Precedence when names collide: system fields > template_data > contact fields. The
request is more specific than the stored contact, and links that unsubscribe or identify
the sender are ours to fill, never the caller's."""

from __future__ import annotations

import dataclasses
import datetime as dt

from . import links
from .compliance_footer import HTML_FOOTER, add_html_footer, add_text_footer
from .merge_compile import CompiledTemplate, compile_template
from .merge_tags import MergeTagError, parse
from .text import clean_subject

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December")


class RenderedTooLarge(ValueError):
    """Rule 8 applies to the client's part of what is sent: a body that grows past the
    limit once its merge tags are filled fails. Our own additions (the compliance footer,
    tracking) do not count against it."""


@dataclasses.dataclass(frozen=True)
class CompiledContent:
    subject: CompiledTemplate
    html: CompiledTemplate | None
    text: CompiledTemplate | None
    # The footer we added to html, compiled alone: what it renders to is not the client's.
    html_footer: CompiledTemplate | None = None


def _compile(source: str, mode: str, path: str) -> CompiledTemplate:
    try:
        return compile_template(source, mode)
    except MergeTagError as error:
        raise error.at(path) from None


def compile_content(subject: str, html: str | None, text: str | None, *,
                    path_prefix: str = "") -> CompiledContent:
    """Raises MergeTagError naming `subject`, `html` or `text` (after `path_prefix`)."""
    compiled_html = footer = None
    if html is not None:
        compiled_html = _compile(html, "html", f"{path_prefix}html")
        if not compiled_html.mentions("unsubscribe_url"):
            compiled_html = _compile(add_html_footer(html), "html", f"{path_prefix}html")
            footer = compile_template(HTML_FOOTER, "html")
    compiled_text = None
    if text is not None:
        compiled_text = _compile(text, "text", f"{path_prefix}text")
        if not compiled_text.mentions("unsubscribe_url"):
            compiled_text = _compile(add_text_footer(text), "text", f"{path_prefix}text")
    return CompiledContent(_compile(subject, "text", f"{path_prefix}subject"), compiled_html, compiled_text,
                           footer)


def check_merge_tags(subject: str, html: str | None, text: str | None, *, path_prefix: str = "") -> None:
    """Parse without compiling (cheap enough for every item of a 1000-message batch);
    raises MergeTagError naming the field."""
    for field, source in (("subject", subject), ("html", html), ("text", text)):
        if source is not None:
            try:
                parse(source)
            except MergeTagError as error:
                raise error.at(f"{path_prefix}{field}") from None


def contact_fields(contact: dict | None, email: str) -> dict:
    contact = contact or {}
    attributes = contact.get("attributes") or {}
    first, last = contact.get("first_name") or "", contact.get("last_name") or ""
    return {
        "first_name": first, "firstName": first,
        "last_name": last, "lastName": last,
        "email": contact.get("email") or email,
        "company": attributes.get("company"),
        "attributes": attributes,
    }


def system_fields(*, workspace: dict, contact_id: str | None, email: str | None, message_id: str | None,
                  base_url: str, secret_key: str, now: dt.datetime) -> dict:
    settings = workspace.get("settings") or {}
    payload = links.recipient_payload(workspace["_id"], contact_id, email, message_id)
    return {
        "unsubscribe_url": links.unsubscribe_url(base_url, links.sign("unsubscribe", payload, secret_key)),
        "preferences_url": links.preferences_url(base_url, links.sign("preferences", payload, secret_key)),
        "company_name": settings.get("company_name") or "",
        "company_address": settings.get("company_address") or "",
        "current_year": str(now.year),
        "current_month": MONTHS[now.month - 1],
        "current_date": now.date().isoformat(),
    }


def recipient_data(*, contact: dict | None, email: str, template_data: dict | None, system: dict) -> dict:
    return {**contact_fields(contact, email), **(template_data or {}), **system}


def render_content(compiled: CompiledContent, data: dict, *,
                   max_html_bytes: int | None = None) -> tuple[str, str | None, str | None]:
    """(subject, html, text) for one recipient. The subject is plain text: values are not
    escaped, tags are stripped and CR/LF folded so nothing can inject a header."""
    subject = clean_subject(compiled.subject.render(data))
    html = compiled.html.render(data) if compiled.html is not None else None
    if html is not None and max_html_bytes is not None and len(html.encode()) > max_html_bytes:
        ours = len(compiled.html_footer.render(data).encode()) if compiled.html_footer is not None else 0
        if len(html.encode()) - ours > max_html_bytes:
            raise RenderedTooLarge(f"the rendered HTML body is larger than {max_html_bytes // 1024} KB "
                                   "once its merge tags are filled (our footer and tracking not counted)")
    text = compiled.text.render(data) if compiled.text is not None else None
    return subject, html, text
