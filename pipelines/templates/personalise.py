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
import functools
import json
from collections.abc import Callable
from typing import Any

from pipelines.core import json_text
from pipelines.core.errors import ValidationFailed
from pipelines.messages import links
from pipelines.messages.compliance_footer import (
    ADDRESS_HTML,
    HTML_FOOTER,
    add_html_address,
    add_html_footer,
    add_text_address,
    add_text_footer,
)
from pipelines.templates.loop_cost import certain_overrun
from pipelines.templates.merge_compile import CompiledTemplate, compile_template
from pipelines.templates.merge_tags import MergeTagError, parse
from pipelines.templates.merge_values import Lines
from pipelines.templates.render_budget import DEFAULT_MAX_OUTPUT_BYTES, MAX_LOOP_STEPS, RenderBudget, RenderedTooLarge
from pipelines.templates.text import clean_subject, text_from_parts

# What our additions to a client's HTML (compliance footer or postal address, open pixel,
# click redirects) may add on top of rule 8's 256 KB, which is the client's part alone.
ADDITIONS_MARGIN_BYTES = 64 * 1024
# Filled by system_fields, over template_data keys of the same name.
SYSTEM_FIELDS = frozenset({"unsubscribe_url", "preferences_url", "company_name", "company_address",
                           "current_year", "current_month", "current_date"})
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December")


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


@functools.lru_cache(maxsize=32)
def _parsed_template(source: str) -> list:
    """A stored template, parsed once for the sends that name it (a batch names it up to
    1000 times)."""
    return parse(source)


def check_merge_tags(subject: str, html: str | None, text: str | None, *, path_prefix: str = "",
                     template_html: str | None = None, template_data: dict | None = None) -> None:
    """What a send can be refused for before anything renders. Parses without compiling
    (cheap enough for every item of a 1000-message batch): malformed tags raise
    MergeTagError naming the field. With `template_data` holding lists, loops over them
    that take more than the render budget's steps whatever the contact (pipelines/
    loop_cost.py) are refused, naming the list (`template_data.items`): that message
    could only fail. `template_html` is the stored template the send names (already
    checked when saved)."""
    parts = []
    for field, source in (("subject", subject), ("html", html), ("text", text)):
        if source is not None:
            try:
                parts.append(parse(source))
            except MergeTagError as error:
                raise error.at(f"{path_prefix}{field}") from None
    known = {k: v for k, v in (template_data or {}).items() if k not in SYSTEM_FIELDS}
    if not any(isinstance(v, (list, dict)) for v in known.values()):
        return
    if template_html is not None:
        try:
            parts.append(_parsed_template(template_html))
        except MergeTagError as error:   # saved before a rule it breaks existed
            raise error.at(f"{path_prefix}template_id") from None
    culprit = certain_overrun(parts, known, MAX_LOOP_STEPS)
    if culprit is not None:
        path = f"{path_prefix}template_data." + ".".join(culprit)
        raise ValidationFailed(f"{path}: the template's loops over this list would take more than "
                               f"{MAX_LOOP_STEPS:,} steps to render (the limit per message).", path=path)


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


# A message stores its template data as JSON text, under this field. Nothing queries inside
# it and only the render reads it, whole; as one string it is one value for the store to
# copy, encode and parse instead of a tree of them (the embedded store walks every value of
# a document several times per write: a 5-item order's data cost it ~0.1 ms of CPU at each
# insert and ~0.03 ms at each read and outcome write).
TEMPLATE_DATA_FIELD = "template_data_json"


def stored_template_data(template_data: dict | None) -> dict[str, str]:
    """The message field holding `template_data` (compact JSON, as its size was checked).
    What JSON cannot carry (a date in an automation's trigger data read from the store) is
    kept as its text rather than failing the store."""
    return {TEMPLATE_DATA_FIELD: json_text.compact(template_data or {})}


def template_data_of(message: dict) -> Any:
    """The template data a stored message carries (None: it carries none)."""
    text = message.get(TEMPLATE_DATA_FIELD)
    return json.loads(text) if text is not None else None


def _render_html(compiled: CompiledContent, data: dict, budget: RenderBudget, limit: int) -> tuple[str, list[str]]:
    """Rule 8's limit is on the client's part: the footer or postal address we added
    renders to bytes that do not count. The budget lets the body run up to our margin
    over the limit (stopping runaway output early); only a body that ends up over the
    limit itself pays for measuring our part exactly. Also returns the pieces the HTML
    is joined from (for its plain-text alternative)."""
    html = compiled.html
    assert html is not None, "rendered for a message with HTML"
    if compiled.html_footer is None:
        return _render_pieces(html, data, budget, "HTML body", limit)
    try:
        out, pieces = _render_pieces(html, data, budget, "HTML body", limit + ADDITIONS_MARGIN_BYTES)
        if len(out) * 4 > limit and len(out.encode()) - len(compiled.html_footer.render(data).encode()) > limit:
            budget.too_large()
    except RenderedTooLarge:
        raise RenderedTooLarge(f"the rendered HTML body is larger than {limit // 1024} KB once its merge tags "
                               "are filled (our footer and tracking not counted)") from None
    return out, pieces


def _render_pieces(template: CompiledTemplate, data: dict, budget: RenderBudget, part: str,
                   max_bytes: int) -> tuple[str, list[str]]:
    """One part within `max_bytes`: stopped as it grows past the limit, then checked
    exactly; and the pieces it is joined from."""
    pieces = template.render_parts(data, budget.start(part, max_bytes))
    out = "".join(pieces)
    if len(out) * 4 > max_bytes and len(out.encode()) > max_bytes:   # encoding only when it could be over
        budget.too_large()
    return out, pieces


def _render_part(template: CompiledTemplate, data: dict, budget: RenderBudget, part: str, max_bytes: int) -> str:
    return _render_pieces(template, data, budget, part, max_bytes)[0]


def render_content(compiled: CompiledContent, data: dict, *, max_html_bytes: int | None = None,
                   budget: RenderBudget | None = None,
                   html_as_sent: Callable[[list[str]], list[str]] | None = None) -> tuple[str, str | None, str | None]:
    """(subject, html, text) for one recipient, within one RenderBudget (pipelines/
    render_budget.py: loop iterations for the whole message, and each part at most
    `max_html_bytes`, rule 8's 256 KB by default). The subject is plain text: values are
    not escaped, tags are stripped and CR/LF folded so nothing can inject a header.
    `html_as_sent`: the HTML's pieces → the pieces of the HTML the caller sends (what it
    adds, e.g. an open pixel); given it, a message with HTML and no text gets the text
    alternative `html_to_text` makes of the HTML sent, filled from the template's
    skeleton (pipelines/templates/text.py)."""
    limit = DEFAULT_MAX_OUTPUT_BYTES if max_html_bytes is None else max_html_bytes
    budget = RenderBudget() if budget is None else budget
    subject = clean_subject(_render_part(compiled.subject, data, budget, "subject", limit))
    html, pieces = (None, None) if compiled.html is None else _render_html(compiled, data, budget, limit)
    text = None if compiled.text is None else _render_part(compiled.text, data, budget, "text body", limit)
    # (an empty HTML body has an empty text part)
    if text is None and html and pieces is not None and html_as_sent is not None:
        text = text_from_parts(html_as_sent(pieces))
    return subject, html, text
