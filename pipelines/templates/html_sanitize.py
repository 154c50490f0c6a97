"""Make user HTML (text and html blocks of json_structure) safe to put in an email: no
script, no event-handler attributes, no javascript:/vbscript:/data: links.

Re-emits what html.parser sees, so merge tags in text and attribute values pass through
unchanged. Comments stay: Outlook's conditional comments (`<!--[if mso]>`) live there."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser

# Elements dropped with everything inside them.
_DROP_WITH_CONTENT = {"script", "iframe", "object", "embed", "applet", "noscript"}
# Elements dropped, their content kept.
_DROP_TAG = {"base", "form", "frame", "frameset", "link"}
_URL_ATTRIBUTES = {"href", "src", "action", "formaction", "background", "poster", "xlink:href",
                   "lowsrc", "dynsrc", "data"}
_BAD_SCHEME = re.compile(r"^\s*(javascript|vbscript|data|livescript)\s*:", re.IGNORECASE)
_BAD_STYLE = re.compile(r"expression\s*\(|javascript\s*:|vbscript\s*:|behavior\s*:|-moz-binding",
                        re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x20]+")


def _url_is_dangerous(value: str) -> bool:
    # Browsers ignore control characters and entities inside a scheme ("jav&#x09;ascript:").
    decoded = _CONTROL.sub("", html.unescape(value))
    return bool(_BAD_SCHEME.match(decoded)) and not decoded.lower().startswith("data:image/")


class _Sanitizer(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=False)
        self.out: list[str] = []
        self.skipping: list[str] = []

    def _attributes(self, attrs) -> str:
        kept = []
        for name, value in attrs:
            if name.startswith("on") or name in ("srcdoc", "formaction"):
                continue
            if value is not None and name in _URL_ATTRIBUTES and _url_is_dangerous(value):
                continue
            if name == "style" and value and _BAD_STYLE.search(html.unescape(value)):
                continue
            kept.append(name if value is None else f'{name}="{html.escape(value, quote=True)}"')
        return "".join(" " + a for a in kept)

    def handle_starttag(self, tag, attrs):
        if tag in _DROP_WITH_CONTENT:
            self.skipping.append(tag)
            return
        if self.skipping or tag in _DROP_TAG:
            return
        self.out.append(f"<{tag}{self._attributes(attrs)}>")

    def handle_startendtag(self, tag, attrs):
        if self.skipping or tag in _DROP_WITH_CONTENT or tag in _DROP_TAG:
            return
        self.out.append(f"<{tag}{self._attributes(attrs)} />")

    def handle_endtag(self, tag):
        if self.skipping:
            if tag == self.skipping[-1]:
                self.skipping.pop()
            return
        if tag not in _DROP_WITH_CONTENT and tag not in _DROP_TAG:
            self.out.append(f"</{tag}>")

    def _text(self, text: str):
        if not self.skipping:
            self.out.append(text)

    def handle_data(self, data):
        self._text(data)

    def handle_entityref(self, name):
        self._text(f"&{name};")

    def handle_charref(self, name):
        self._text(f"&#{name};")

    def handle_comment(self, data):
        self._text(f"<!--{data}-->")

    def handle_decl(self, decl):
        self._text(f"<!{decl}>")


def sanitize_html(markup: str) -> str:
    parser = _Sanitizer()
    parser.feed(markup)
    parser.close()
    return "".join(parser.out)


def safe_url(value: str) -> str:
    """A URL for an href/src we generate: dangerous schemes become '#'."""
    return "#" if _url_is_dangerous(value) else value
