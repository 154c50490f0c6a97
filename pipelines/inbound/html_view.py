"""A received message's HTML made safe to show in a page (the console, a customer's app),
and read as text for reply extraction.

nh3 (Ammonia's allow-list sanitiser, maintained, MIT) keeps the layout tags and attributes
mail uses and drops everything that runs or submits — script, style sheets, event handlers,
forms, frames, javascript: links. pipelines/templates/html_sanitize.py, written for our own
customers' template HTML (merge tags and Outlook comments kept), is a deny-list: right for
text we send, not for hostile mail we show.

Budget: an HTML5 tree builder spends time quadratic in the nesting depth (measured: 20,000
nested <ul> in 100 KB take nh3 about 2 s; 300 KB, about 17 s). Depth is estimated first in
one linear pass; past MAX_HTML_NESTING the HTML is not handed to nh3 at all and is shown as
escaped text instead. (The text for replies is made here from nh3's well-formed output:
pipelines/templates/text.py `html_to_text` was quadratic on unclosed tags then; it is
linear now.)"""

from __future__ import annotations

import html
import re

import nh3

MAX_HTML_NESTING = 400  # estimated element depth; real mail stays under 60
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

# one linear pass: `<[^<>]*>` never scans past the next `<`
_TAG = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9:-]*)[^<>]*?(/?)>")
_ANY_TAG = re.compile(r"<[^<>]*>")
# elements that hold no content, or that the parser closes by itself: they add no depth
_FLAT = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr",
         "p", "li", "dt", "dd", "tr", "td", "th", "option", "optgroup", "rb", "rt", "rp", "thead", "tbody",
         "tfoot", "colgroup", "caption", "html", "head", "body"}
_BLOCKS = {"p", "br", "div", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "table", "ul", "ol", "pre", "hr"}
_BLOCK_END = re.compile(r"</(p|div|li|tr|h[1-6]|table|ul|ol|pre)>|<br\s*/?>|<hr\s*/?>")
_BLANK_LINES = re.compile(r"\n[ \t]*(\n[ \t]*)+")


def nesting_depth(markup: str) -> int:
    """The deepest element nesting the markup asks for, estimated in one pass (an
    over-estimate where end tags are left out)."""
    depth = deepest = 0
    for match in _TAG.finditer(markup):
        closing, name, self_closing = match.group(1), match.group(2).lower(), match.group(3)
        if name in _FLAT or self_closing:
            continue
        depth = max(0, depth - 1) if closing else depth + 1
        deepest = max(deepest, depth)
    return deepest


def too_deep(markup: str | None) -> bool:
    return markup is not None and nesting_depth(markup) > MAX_HTML_NESTING


def _as_text(markup: str) -> str:
    """Markup read as text in linear time, for HTML too deep to build a tree of."""
    return html.unescape(_ANY_TAG.sub(" ", markup))


def safe_html(markup: str | None) -> str | None:
    if markup is None:
        return None
    if too_deep(markup):
        return "<pre>" + html.escape(_as_text(markup)) + "</pre>"
    return nh3.clean(markup, tags=_TAGS, attributes=_ATTRIBUTES, url_schemes=_URL_SCHEMES,
                     clean_content_tags={"script", "style"}, link_rel="noopener noreferrer nofollow")


def text_of(markup: str) -> str:
    """The text of the HTML, blocks as lines; quoted mail (<blockquote>) left out, as
    Gmail, Apple Mail and Thunderbird put the thread there."""
    if too_deep(markup):
        return _as_text(markup)
    blocks = nh3.clean(markup, tags=_BLOCKS, attributes={}, clean_content_tags={"script", "style", "blockquote"})
    text = html.unescape(_ANY_TAG.sub("", _BLOCK_END.sub("\n", blocks)))
    return _BLANK_LINES.sub("\n\n", text).strip()
