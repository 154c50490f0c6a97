"""A received message's HTML made safe to show in a page (the console, a customer's app):
nh3 (Ammonia's allow-list sanitiser, maintained, MIT) keeps the layout tags and attributes
mail uses and drops everything that runs or submits — script, style sheets, event handlers,
forms, frames, javascript: links. pipelines/templates/html_sanitize.py, written for our own
customers' template HTML (merge tags and Outlook comments kept), is a deny-list: right for
text we send, not for hostile mail we show."""

from __future__ import annotations

import nh3

_TAGS = set(nh3.ALLOWED_TAGS) | {"center", "font", "span", "div", "table", "thead", "tbody", "tfoot", "tr", "td",
                                 "th", "caption", "col", "colgroup", "img", "u", "s", "hr", "br"}
_LAYOUT = {"align", "valign", "width", "height", "bgcolor", "border", "cellpadding", "cellspacing", "colspan",
           "rowspan", "dir", "lang", "title", "color", "face", "size"}
_ATTRIBUTES = {tag: set(attrs) | _LAYOUT for tag, attrs in nh3.ALLOWED_ATTRIBUTES.items()}
for _tag in _TAGS:
    _ATTRIBUTES.setdefault(_tag, set(_LAYOUT))
_ATTRIBUTES["img"] |= {"src", "alt"}
_ATTRIBUTES["a"] = {"href", "title"}
# cid: the message's own inline images (attachments' content_id)
_URL_SCHEMES = {"http", "https", "mailto", "cid", "tel"}


def safe_html(html: str | None) -> str | None:
    if html is None:
        return None
    return nh3.clean(html, tags=_TAGS, attributes=_ATTRIBUTES, url_schemes=_URL_SCHEMES,
                     clean_content_tags={"script", "style"}, link_rel="noopener noreferrer nofollow")
