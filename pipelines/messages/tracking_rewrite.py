"""Open and click tracking put into a rendered HTML body.

- Opens: a 1×1 GIF `<img>` just before `</body>` (appended when there is none).
- Clicks: every `<a href>` whose URL is http(s) is pointed at the click redirect, with a
  signed token carrying the original URL, so the redirect can only go where the sender
  linked (never an open redirect). Left alone: `mailto:`, `tel:`, `#anchors`, relative
  links, and our own unsubscribe / preferences pages (those must keep working as they
  are, and a tracked unsubscribe would count as a click).

Runs after the merge tags are rendered, so it sees the final URLs."""

from __future__ import annotations

import html as html_lib
import re
from collections.abc import Callable

from pipelines.messages import links

_ANCHOR_TAG = re.compile(r"(?is)<a\b[^>]*>")
_HREF = re.compile(r"""(?is)(\bhref\s*=\s*)("([^"]*)"|'([^']*)'|([^\s"'>]+))""")
_BODY_END = re.compile(r"(?i)</body\s*>")
_TRACKABLE = re.compile(r"(?i)^https?://")


def pixel_tag(url: str) -> str:
    return (f'<img src="{html_lib.escape(url)}" width="1" height="1" alt="" '
            'style="display:block;width:1px;height:1px;border:0" />')


def add_open_pixel(markup: str, pixel_url: str) -> str:
    tag = pixel_tag(pixel_url)
    ends = list(_BODY_END.finditer(markup))
    if not ends:
        return markup + tag
    at = ends[-1].start()
    return markup[:at] + tag + markup[at:]


def open_pixel_parts(parts: list[str], base_url: str) -> list[str]:
    """The pieces of `add_open_pixel("".join(parts), url)` for the plain-text skeleton
    (pipelines/templates/text.py), with a stand-in for the pixel's URL: what tells one recipient's
    pixel from another's is a token of URL-safe base64 inside the `<img>`'s quoted src,
    which no step of `html_to_text` can read or be moved by, so every recipient's pixel
    reads the same in text."""
    pixel = pixel_tag(links.open_pixel_url(base_url, "token"))
    ends = list(_BODY_END.finditer("".join(parts)))
    if not ends:
        return [*parts, pixel]
    at, index = ends[-1].start(), 0
    while at > len(parts[index]):
        at -= len(parts[index])
        index += 1
    # `</body>` starts with `<`, never inside an escaped value: this splits literal text
    return [*parts[:index], parts[index][:at], pixel, parts[index][at:], *parts[index + 1:]]


def rewrite_links(markup: str, redirect: Callable[[str], str], keep_prefixes: tuple[str, ...] = ()) -> str:
    """Point each trackable `<a href>` at `redirect(original_url)`."""
    def one_href(match: re.Match) -> str:
        raw = next(g for g in (match.group(3), match.group(4), match.group(5)) if g is not None)
        url = html_lib.unescape(raw).strip()
        if not _TRACKABLE.match(url) or url.startswith(keep_prefixes):
            return match.group(0)
        return f'{match.group(1)}"{html_lib.escape(redirect(url))}"'

    def one_tag(match: re.Match) -> str:
        return _HREF.sub(one_href, match.group(0), count=1)

    return _ANCHOR_TAG.sub(one_tag, markup)


def recipient_page_prefixes(base_url: str) -> tuple[str, ...]:
    """URL prefixes of the unsubscribe and preferences pages, never rewritten."""
    return (links.unsubscribe_url(base_url, ""), links.preferences_url(base_url, ""))


def apply(markup: str, message: dict, *, base_url: str, secret_key: str) -> str:
    """Tracking for one message as its flags ask (`track_opens`, `track_clicks`)."""
    workspace_id, message_id = message["workspace_id"], message["_id"]
    if message.get("track_clicks"):
        def redirect(url: str) -> str:
            token = links.sign("click", {"w": workspace_id, "m": message_id, "u": url}, secret_key)
            return links.click_url(base_url, token)
        markup = rewrite_links(markup, redirect, recipient_page_prefixes(base_url))
    if message.get("track_opens"):
        token = links.sign("open", {"w": workspace_id, "m": message_id}, secret_key)
        markup = add_open_pixel(markup, links.open_pixel_url(base_url, token))
    return markup
