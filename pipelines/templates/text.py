"""Small text transformations with a reason to exist on their own."""

from __future__ import annotations

import dataclasses
import html
import re

import markupsafe

_TAG = re.compile(r"<[^>]*>")
_WS = re.compile(r"\s+")
_WS_IN_LINE = re.compile(r"[^\S\n]+")
_BLOCK_END = re.compile(r"(?i)</(p|div|h[1-6]|li|tr|table)>|<br\s*/?>")
_SCRIPT_STYLE = re.compile(r"(?is)<(script|style|head)[^>]*>.*?</\1>")
_LINK = re.compile(r"""(?is)<a\s[^>]*?\bhref\s*=\s*["']([^"']*)["'][^>]*>(.*?)</a\s*>""")
# Control characters that are not whitespace (NUL, ESC, DEL, C1 such as CSI): never
# part of a header. (The whitespace ones, CR/LF among them, are folded by _WS.)
CONTROL = re.compile(r"[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def header_text(text: str) -> str:
    """What of caller text may stand in a header: every run of white space — CR, LF, TAB,
    VT, FF, NEL, U+2028, U+2029 and the other Unicode spaces — becomes one space (the
    words stay apart), other control characters (NUL, ESC, DEL, C1) are dropped, a lone
    surrogate (not encodable) becomes U+FFFD, and the ends are trimmed."""
    text = _SURROGATE.sub("\ufffd", CONTROL.sub("", text))
    return _WS.sub(" ", text).strip()


def clean_subject(subject: str) -> str:
    """Rule 7: HTML tags stripped; then as any header text (`header_text`): CR/LF folded
    so nothing can inject a header, other control characters dropped."""
    return header_text(html.unescape(_TAG.sub("", subject)))


def _link_form(url: str, label: str) -> str:
    """How `<a href="url">label</a>` reads in plain text: `inner` (just the link's
    contents: the label already is the address, or an in-page anchor), `both` (`label
    (url)`) or `url` (a link without words)."""
    if not url or url.startswith("#") or label in (url, url.removeprefix("mailto:")):
        return "inner"
    return "both" if label else "url"


def _link_parts(match: re.Match) -> tuple[str, str, str]:
    """(url, label, inner) of a link match: url and label as text, inner as markup."""
    inner = match.group(2)
    return html.unescape(match.group(1)).strip(), html.unescape(_TAG.sub("", inner)).strip(), inner


def _link_text(url: str, inner: str, form: str) -> str:
    return {"inner": inner, "both": f"{inner} ({url})", "url": url}[form]


def _link_as_text(match: re.Match) -> str:
    """`<a href="U">label</a>` → `label (U)`, so a reader of the plain part can follow it;
    just the label when it already is the address, or for in-page anchors."""
    url, label, inner = _link_parts(match)
    return _link_text(url, inner, _link_form(url, label))


def _fold_lines(text: str) -> str:
    """Every line break splitlines knows becomes "\n", then the rest of the whitespace is
    folded in one pass over the whole text (a regex call per line cost more); lines are
    trimmed and runs of empty lines kept to one."""
    text = _WS_IN_LINE.sub(" ", "\n".join(text.splitlines()))
    lines = [line.strip() for line in text.split("\n")]
    out: list[str] = []
    for line in lines:
        if line or (out and out[-1]):
            out.append(line)
    return "\n".join(out).strip() + "\n"


def html_to_text(markup: str) -> str:
    """A readable plain-text alternative for an HTML-only message: blocks become lines,
    links keep their address, markup goes."""
    text = _SCRIPT_STYLE.sub("", markup)
    text = _LINK.sub(_link_as_text, text)
    text = _BLOCK_END.sub("\n", text)
    return _fold_lines(html.unescape(_TAG.sub("", text)))


# --- the same text from a template's pieces ---------------------------------------------
#
# A message's HTML is the template's literal pieces with escaped values between them
# (CompiledTemplate.render_parts). Its text is `html_to_text` of the whole, which costs
# more than rendering it; but for one arrangement of literal pieces (a template, and the
# branches and loop lengths a recipient takes) the text is the same but for the values.
# So `html_to_text` runs once per arrangement on the HTML with a placeholder in place of
# each value, and each recipient's text is that skeleton with their values put in.
#
# That is exactly `html_to_text` of the recipient's HTML when no value can change how the
# markup around it parses. A placeholder is two private-use characters: no regex here
# treats them specially, so the skeleton is right for values that are just as inert:
# - value by value (`_inert`): no whitespace but single spaces inside (folding and
#   trimming treat it as one word), and nothing of ours (a private-use character). Its
#   escaped form holds no `<`, `>` or bare `&`: it cannot open a tag or an entity.
# - by place, once per arrangement (`_risky_places`): right after `<` or `</` and letters
#   (it would be part of a tag name: script, br, a …), or after an unfinished entity
#   (`&amp` + `;`), or inside a tag with a letter or another value beside it (it could
#   spell `href`). Any of these and the arrangement keeps the old path.
# - per recipient: inside a tag a value must not hold `href`; inside a link's href it must
#   need no escaping (the address is unescaped twice); and a link whose text the value is
#   part of must read the same way (`_link_form`: is the label the address?).
# Everything else (a value with line breaks or runs of spaces, markup such a template
# cannot hold) falls back to `html_to_text` of the whole HTML, per message.

_PLACEHOLDER = re.compile("\ue000(.)", re.DOTALL)
_OURS = re.compile("[\ue000-\uf8ff]")
_NOT_INERT = re.compile(r"^\s|\s$|\s\s|[^\S ]|[\ue000-\uf8ff]")
_IN_TAG_NAME = re.compile("</?[A-Za-z]*\ue000")
_IN_ENTITY = re.compile("&(?:#[xX]?[0-9a-fA-F]*|[^\t\n\f <&#;]{0,31})\ue000")
_MAX_VALUES = 0x1800
_SKELETONS_KEPT = 256


@dataclasses.dataclass(frozen=True)
class _Skeleton:
    pieces: tuple[str, ...]                 # text, value, text, value, …, text (values as indexes)
    values: tuple[int, ...]
    in_tag: tuple[int, ...]                 # values inside a tag
    in_href: tuple[int, ...]                # values inside a link's address
    links: tuple[tuple[str, str, str], ...]  # (url, label, form) of links holding values


_SKELETONS: dict[tuple, _Skeleton | None] = {}


def _placeholder(index: int) -> str:
    return "\ue000" + chr(0xe001 + index)


def _risky_places(markup: str) -> tuple[int, ...] | None:
    """The values inside a tag, or None when a value stands where it could change how the
    markup parses (see above)."""
    if _IN_TAG_NAME.search(markup) or _IN_ENTITY.search(markup):
        return None
    in_tag = []
    for match in _PLACEHOLDER.finditer(markup):
        at, end = match.start(), match.end()
        if markup.rfind("<", 0, at) > markup.rfind(">", 0, at):
            before, after = markup[at - 1:at], markup[end:end + 1]
            if any(c == "_" or c.isalnum() or _OURS.match(c) for c in before + after):
                return None
            in_tag.append(ord(match.group(1)) - 0xe001)
    return tuple(in_tag)


def _skeleton(key: tuple) -> _Skeleton | None:
    """The text of one arrangement of pieces (None in a literal piece, a value), or None
    when it cannot be made from a skeleton."""
    count = key.count(None)
    if count > _MAX_VALUES or any(_OURS.search(p) for p in key if p is not None):
        return None
    numbers = iter(range(count))
    markup = "".join(_placeholder(next(numbers)) if p is None else p for p in key)
    in_tag = _risky_places(markup)
    if in_tag is None:
        return None
    links: list[tuple[str, str, str]] = []
    in_href: list[int] = []

    def link(match: re.Match) -> str:
        url, label, inner = _link_parts(match)
        form = _link_form(url, label)
        if "\ue000" in match.group(0):
            links.append((url, label, form))
            in_href.extend(ord(m.group(1)) - 0xe001 for m in _PLACEHOLDER.finditer(match.group(1)))
        return _link_text(url, inner, form)

    text = _LINK.sub(link, _SCRIPT_STYLE.sub("", markup))
    text = _BLOCK_END.sub("\n", text)
    if _IN_TAG_NAME.search(text):
        return None
    text = _TAG.sub("", text)
    if _IN_ENTITY.search(text):
        return None
    parts = _PLACEHOLDER.split(_fold_lines(html.unescape(text)))
    values = tuple(ord(c) - 0xe001 for c in parts[1::2])
    pieces = tuple(parts[0::2])
    return _Skeleton(pieces, values, in_tag, tuple(in_href), tuple(links))


def _fill(template: str, values: list[str]) -> str:
    return _PLACEHOLDER.sub(lambda m: values[ord(m.group(1)) - 0xe001], template)


def text_from_parts(parts: list[str]) -> str:
    """`html_to_text("".join(parts))` for the pieces of a rendered HTML template (literal
    text as `str`, escaped values as `Markup`), from the skeleton of their arrangement
    when the values allow it (see above)."""
    key, escaped = _arrangement(parts)
    skeleton = _skeleton_of(key)
    if skeleton is None or any(_NOT_INERT.search(e) for e in escaped):
        return html_to_text("".join(parts))
    raw = [html.unescape(e) if "&" in e else e for e in escaped]
    if not _fills_alike(skeleton, escaped, raw):
        return html_to_text("".join(parts))
    out = [skeleton.pieces[0]]
    for index, piece in zip(skeleton.values, skeleton.pieces[1:], strict=True):
        out += (raw[index], piece)
    return "".join(out)


def _arrangement(parts: list[str]) -> tuple[tuple[str | None, ...], list[str]]:
    """The literal pieces with None for each escaped value, and the values."""
    key: list[str | None] = []
    escaped: list[str] = []
    for part in parts:
        if not isinstance(part, markupsafe.Markup):
            key.append(part)
            continue
        # a postal address (merge_values.Lines) is lines joined by <br>: markup of ours
        for number, line in enumerate(part.split("<br>") if "<br>" in part else (part,)):
            if number:
                key.append("<br>")
            if line:
                key.append(None)
                escaped.append(line)
    return tuple(key), escaped


def _skeleton_of(key: tuple[str | None, ...]) -> _Skeleton | None:
    """The skeleton of an arrangement, kept (None: none can be made)."""
    skeleton = _SKELETONS.get(key, False)
    if isinstance(skeleton, bool):  # False: not made yet (a skeleton or None is kept)
        if len(_SKELETONS) >= _SKELETONS_KEPT:
            _SKELETONS.clear()
        skeleton = _SKELETONS[key] = _skeleton(key)
    return skeleton


def _fills_alike(skeleton: _Skeleton, escaped: list[str], raw: list[str]) -> bool:
    """The values change nothing the skeleton decided: no `href` inside a tag, no entity
    in a link's address, every link shown as the whole HTML would show it."""
    return not (any("href" in raw[i].lower() for i in skeleton.in_tag)
                or any("&" in escaped[i] for i in skeleton.in_href)
                or any(_link_form(_fill(url, raw), _fill(label, raw)) != form for url, label, form in skeleton.links))
