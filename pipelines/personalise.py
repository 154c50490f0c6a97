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
from .compliance_footer import (ADDRESS_HTML, HTML_FOOTER, add_html_address, add_html_footer,
                               add_text_address, add_text_footer)
from .merge_compile import CompiledTemplate, compile_template
from .merge_tags import MergeTagError, parse
from .merge_values import Lines
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


def _body(source: str, mode: str, path: str, *, footer: bool,
          postal_address: bool) -> tuple[CompiledTemplate, str | None]:
    """Rule 9's footer unless the body places `{{unsubscribe_url}}` itself (and `footer`
    asks for one); with `postal_address` (marketing mail) the postal address in any case,
    unless the body places `{{company_address}}` itself. Also returns the source we added
    (None when nothing was): ours, not the client's."""
    add_footer, add_address = (add_html_footer, add_html_address) if mode == "html" else (
        add_text_footer, add_text_address)
    compiled = _compile(source, mode, path)
    if footer and not compiled.mentions("unsubscribe_url"):
        return _compile(add_footer(source), mode, path), HTML_FOOTER  # the footer shows the address too
    if postal_address and not compiled.mentions("company_address"):
        return _compile(add_address(source), mode, path), ADDRESS_HTML
    return compiled, None


def compile_content(subject: str, html: str | None, text: str | None, *, path_prefix: str = "",
                    footer: bool = True, postal_address: bool = False) -> CompiledContent:
    """Raises MergeTagError naming `subject`, `html` or `text` (after `path_prefix`).
    `footer`: rule 9's compliance footer (off only for transactional mail that asks so);
    `postal_address`: marketing mail, which always shows the workspace's postal address."""
    options = {"footer": footer, "postal_address": postal_address}
    compiled_html = added = None
    if html is not None:
        compiled_html, added = _body(html, "html", f"{path_prefix}html", **options)
    compiled_text = None if text is None else _body(text, "text", f"{path_prefix}text", **options)[0]
    return CompiledContent(_compile(subject, "text", f"{path_prefix}subject"), compiled_html, compiled_text,
                           compile_template(added, "html") if added else None)


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
        "company_address": Lines(settings.get("company_address") or ""),
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
