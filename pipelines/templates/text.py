"""Small text transformations with a reason to exist on their own."""

from __future__ import annotations

import dataclasses
import html
import re
from collections.abc import Callable

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

# --- the regexes above in linear time ------------------------------------------------
#
# Hostile or broken HTML made `re.sub` with _TAG, _SCRIPT_STYLE and _LINK quadratic (and
# _LINK cubic): each unclosed `<`, `<script`, `<a href="…">` scanned to the end of the text
# for a `>` or a closing tag that is not there, and each `href` inside an unclosed `<a`
# did it again. The substitutions below give exactly what `re.sub` with those patterns
# gives, but ask the regex engine for a match only where one is known to exist: where one
# starts is decided from the next `>`, quote and closing tag after a place, each found by a
# search that never goes back over text already searched (`_Next`). The engine still does
# the matching, so the groups are its own; a place found to have no match is skipped, as
# the engine would have skipped it after its long scan.

_GT = re.compile(">")
_QUOTE = re.compile("[\"']")
_LINK_OPEN = re.compile(r"(?i)<a\s")                       # how _LINK begins,
_HREF = re.compile(r"""(?is)\bhref\s*=\s*["']""")          # its attribute up to the quote
_LINK_CLOSE = re.compile(r"(?i)</a\s*>")                   # and its end
_SCRIPT_OPEN = re.compile(r"(?i)<(script|style|head)")     # how _SCRIPT_STYLE begins; its end
_SCRIPT_CLOSE = re.compile(r"</([^<>]{4,6})>")             # is one of these with the same name
# the same name as _SCRIPT_STYLE's `\1` compares it (case folded as the engine folds it)
_SAME_NAME = {n: re.compile(r"(?is)(.{%d})\1" % n) for n in (4, 5, 6)}
# html.unescape's own pattern (html._charref), for `_unescape`
_CHARREF = re.compile(r"&(#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[^\t\n\f <&#;]{1,32};?)")


class _Next:
    """The first match at or after a place (None: there is none) of `search(text, place)`,
    for places that do not go back: a new search is made only when the place has passed
    the last match found, so each stretch of the text is searched about once."""

    __slots__ = ("text", "search", "asked", "found")

    def __init__(self, text: str, search: Callable[[str, int], re.Match | None]) -> None:
        self.text, self.search, self.asked = text, search, -1
        self.found: re.Match | None = None

    def __call__(self, place: int) -> re.Match | None:
        if self.asked < 0 or place < self.asked or (self.found is not None and self.found.start() < place):
            self.asked, self.found = place, self.search(self.text, place)
        return self.found  # (None after an earlier place: None after this one)


def _strip_tags(text: str) -> str:
    """`_TAG.sub("", text)`: a `<` with no `>` after it starts no tag, so the regex only
    sees the text up to the last `>` (each `<` there finds its `>` at once)."""
    end = text.rfind(">") + 1
    return _TAG.sub("", text[:end]) + text[end:] if end else text


def _same_name(name: str, other: str) -> bool:
    return len(name) == len(other) and _SAME_NAME[len(name)].fullmatch(name + other) is not None


def _drop_script_style(text: str) -> str:
    """`_SCRIPT_STYLE.sub("", text)`: an element matches where its opening tag has a `>`
    and a closing tag of the same name follows that `>`."""
    openers = [(m.start(), m.group(1)) for m in _SCRIPT_OPEN.finditer(text)]
    if not openers:
        return text
    kinds: list[str] = []          # a name of each kind (the names the engine takes for the same)
    kind_of: dict[str, int] = {}
    for name in dict.fromkeys(name for _, name in openers):
        kind_of[name] = next((k for k, other in enumerate(kinds) if _same_name(other, name)), len(kinds))
        if kind_of[name] == len(kinds):
            kinds.append(name)
    closer_kind: dict[str, int] = {}

    def closing_finder(kind: int) -> _Next:
        def search(text: str, place: int) -> re.Match | None:
            while m := _SCRIPT_CLOSE.search(text, place):
                closing = m.group(1)
                if closing not in closer_kind:
                    closer_kind[closing] = next((k for k, name in enumerate(kinds) if _same_name(name, closing)), -1)
                if closer_kind[closing] == kind:
                    return m
                place = m.end()
            return None
        return _Next(text, search)

    next_gt = _Next(text, _GT.search)
    closings = [closing_finder(kind) for kind in range(len(kinds))]
    unclosed: set[int] = set()     # kinds with no closing tag after the last `>` asked about
    out: list[str] = []
    done = 0
    for at, name in openers:
        if at < done or kind_of[name] in unclosed:
            continue
        gt = next_gt(at + 1 + len(name))
        if gt is None:
            break  # no `>` after here: no opening tag ends
        if closings[kind_of[name]](gt.end()) is None:
            unclosed.add(kind_of[name])
            if len(unclosed) == len(kinds):
                break
            continue
        if (m := _SCRIPT_STYLE.match(text, at)) is None:
            continue
        out.append(text[done:at])
        done = m.end()
    out.append(text[done:])
    return "".join(out)


def _sub_links(text: str, replace: Callable[[re.Match], str]) -> str:
    """`_LINK.sub(replace, text)`: `<a` and a space start a link where the first `href="`
    after them comes before their tag's `>`, and after the quote that ends its address come
    a `>` and then `</a>`. (A later `href` in the same tag could not do better: its address
    ends no earlier, so neither does anything after it.)"""
    if "<" not in text:
        return text
    tag_end, href, quote, gt, closing = (_Next(text, p.search) for p in (_GT, _HREF, _QUOTE, _GT, _LINK_CLOSE))
    out: list[str] = []
    done = 0
    for opener in _LINK_OPEN.finditer(text):
        at = opener.start()
        if at < done:
            continue
        attribute = href(at + 3)
        if attribute is None:
            break  # no link after here has an address
        end = tag_end(at + 3)
        if end is not None and end.start() < attribute.start():
            continue  # the tag ends before its first href
        if (after := quote(attribute.end())) is None or (after := gt(after.end())) is None \
                or closing(after.end()) is None:
            break  # no later link can be complete either
        if (m := _LINK.match(text, at)) is None:
            continue
        out += (text[done:at], replace(m))
        done = m.end()
    out.append(text[done:])
    return "".join(out)


def _charref(m: re.Match) -> str:
    ref = m.group(1)
    if ref[0] == "#" and ref[1:2] not in ("x", "X"):
        digits = ref[1:].rstrip(";").lstrip("0")
        if len(digits) > 7:
            return "\ufffd"  # past U+10FFFF, as html.unescape has it (its int() has a limit on digits)
        return html.unescape(f"&#{digits or 0};")
    return html.unescape(m.group(0))


def _unescape(text: str) -> str:
    """`html.unescape`, which raises ValueError on a decimal reference of more than
    sys.get_int_max_str_digits() (4300) digits: such a number is past U+10FFFF, U+FFFD."""
    try:
        return html.unescape(text)
    except ValueError:
        return _CHARREF.sub(_charref, text)


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
    return header_text(_unescape(_strip_tags(subject)))


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
    return _unescape(match.group(1)).strip(), _unescape(_strip_tags(inner)).strip(), inner


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
    text = _sub_links(_drop_script_style(markup), _link_as_text)
    text = _BLOCK_END.sub("\n", text)
    return _fold_lines(_unescape(_strip_tags(text)))


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
    lt = gt = -1  # the last `<` and `>` before the value (each stretch searched once)
    searched = 0
    for match in _PLACEHOLDER.finditer(markup):
        at, end = match.start(), match.end()
        lt, gt = max(lt, markup.rfind("<", searched, at)), max(gt, markup.rfind(">", searched, at))
        searched = at
        if lt > gt:
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

    text = _sub_links(_drop_script_style(markup), link)
    text = _BLOCK_END.sub("\n", text)
    if _IN_TAG_NAME.search(text):
        return None
    text = _strip_tags(text)
    if _IN_ENTITY.search(text):
        return None
    parts = _PLACEHOLDER.split(_fold_lines(_unescape(text)))
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
    raw = [_unescape(e) if "&" in e else e for e in escaped]
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
