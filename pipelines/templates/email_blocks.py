"""`json_structure`: the visual editor's document, validated field by field.

    { blocks: [ {id, type, content} ], settings: {fontFamily, contentWidth, backgroundColor,
                                                   contentBackgroundColor, defaultTextColor} }

Known fields are checked (type, enum, range, colour and URL syntax) and reported with a
path like `json_structure.blocks[3].content.level`; unknown fields are kept and ignored,
because an editor stores its own UI state beside the content. Blocks that hold blocks
(columns, conditional, dropshadow) are validated recursively. The HTML comes from
pipelines/templates/email_blocks_html.py."""

from __future__ import annotations

import re
from collections.abc import Callable

from pipelines.core.errors import ValidationFailed
from pipelines.templates.merge_tags import MergeTagError, parse, parse_condition, parse_ref

BLOCK_TYPES = ("header", "text", "button", "image", "divider", "spacer", "columns", "social",
               "dynamic", "conditional", "hero", "profile", "html", "dropshadow")
ALIGNMENTS = ("left", "center", "right")
SOCIAL_NETWORKS = ("facebook", "x", "twitter", "instagram", "linkedin", "youtube", "tiktok",
                   "pinterest", "github", "discord", "whatsapp", "telegram", "website", "email")
MAX_BLOCKS = 500
MAX_DEPTH = 4
MAX_TEXT_CHARS = 100_000
MAX_HTML_CHARS = 256 * 1024

_COLOR = re.compile(r"#(?:[0-9a-fA-F]{3}|[0-9a-fA-F]{4}|[0-9a-fA-F]{6}|[0-9a-fA-F]{8})|[a-zA-Z]{3,20}")
_URL = re.compile(r"(?:https?://|mailto:|tel:|\{\{|#)\S*|", re.IGNORECASE)
_FONT = re.compile(r"[A-Za-z0-9 ,'\"\-]{1,200}")
_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*(?:\.[A-Za-z_][A-Za-z0-9_\-]*)*")

Check = Callable[[object, str], None]


def _fail(path: str, message: str):
    raise ValidationFailed(f"{path}: {message}", path=path)


def text(max_chars: int = 2000) -> Check:
    def check(value, path):
        if not isinstance(value, str):
            _fail(path, "must be a string")
        if len(value) > max_chars:
            _fail(path, f"must be at most {max_chars} characters")
    return check


def one_of(*allowed) -> Check:
    def check(value, path):
        if isinstance(value, bool) or value not in allowed:
            _fail(path, "must be one of " + ", ".join(str(a) for a in allowed))
    return check


def number(low: float, high: float) -> Check:
    def check(value, path):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            _fail(path, "must be a number")
        if not low <= value <= high:
            _fail(path, f"must be between {low:g} and {high:g}")
    return check


def boolean(value, path):
    if not isinstance(value, bool):
        _fail(path, "must be a boolean")


def color(value, path):
    if not isinstance(value, str) or not _COLOR.fullmatch(value):
        _fail(path, "must be a colour like #1a2b3c or a colour name")


def url(value, path):
    if not isinstance(value, str) or len(value) > 2000 or not _URL.fullmatch(value.strip()):
        _fail(path, "must be an http(s), mailto: or tel: URL, or a merge tag")


def field_name(value, path):
    if not isinstance(value, str) or not _FIELD.fullmatch(value):
        _fail(path, "must be a field name like price or product.title")


def image_width(value, path):
    if value in ("auto", "full"):
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 1 <= value <= 2000:
        _fail(path, "must be auto, full, or a number of pixels from 1 to 2000")


def source_list(value, path):
    if not isinstance(value, str) or (ref := parse_ref(value.strip())) is None or ref.kind != "root":
        _fail(path, "must name a list in template_data, like products")


def condition(value, path):
    if not isinstance(value, str) or not value.strip() or "{{" in value or "}}" in value:
        _fail(path, "must be a condition like plan == 'pro' (without braces)")
    try:
        cond = parse_condition(value)
    except ValueError as error:
        _fail(path, f"is not a valid condition: {error}")
    if any(getattr(o, "kind", "root") != "root" for o in (cond.left, cond.right) if o is not None):
        _fail(path, "can only use data and contact fields (no this or @ variables)")


def blocks(value, path):
    """Marks a field holding nested blocks; _Walker validates those (it counts and limits depth)."""


def _list_of(item: dict[str, Check], low: int, high: int) -> Check:
    def check(value, path):
        if not isinstance(value, list):
            _fail(path, "must be an array")
        if not low <= len(value) <= high:
            _fail(path, f"must have from {low} to {high} items")
        for i, entry in enumerate(value):
            _check_object(entry, item, f"{path}[{i}]")
    return check


COLUMN = {"width": number(1, 100), "blocks": blocks}
NETWORK = {"network": one_of(*SOCIAL_NETWORKS), "url": url, "label": text(100), "iconUrl": url}

CONTENT: dict[str, dict[str, Check]] = {
    "header": {"text": text(), "level": one_of(1, 2, 3), "alignment": one_of(*ALIGNMENTS), "color": color},
    "text": {"html": text(MAX_TEXT_CHARS), "alignment": one_of(*ALIGNMENTS), "color": color},
    "button": {"text": text(200), "url": url, "alignment": one_of(*ALIGNMENTS), "backgroundColor": color,
               "textColor": color, "borderRadius": number(0, 100), "fullWidth": boolean},
    "image": {"src": url, "alt": text(500), "width": image_width, "alignment": one_of(*ALIGNMENTS), "url": url},
    "divider": {"color": color, "thickness": number(1, 20), "style": one_of("solid", "dashed", "dotted"),
                "width": number(1, 100)},
    "spacer": {"height": number(0, 500)},
    "columns": {"columns": _list_of(COLUMN, 1, 4), "gap": number(0, 100)},
    "social": {"networks": _list_of(NETWORK, 0, 20), "alignment": one_of(*ALIGNMENTS),
               "iconSize": number(12, 96), "color": color},
    "dynamic": {"source": source_list, "titleField": field_name, "imageField": field_name,
                "urlField": field_name, "descriptionField": field_name, "priceField": field_name,
                "buttonText": text(200), "emptyText": text(), "alignment": one_of(*ALIGNMENTS)},
    "conditional": {"condition": condition, "blocks": blocks, "elseBlocks": blocks},
    "hero": {"title": text(), "subtitle": text(), "backgroundImage": url, "backgroundColor": color,
             "textColor": color, "buttonText": text(200), "buttonUrl": url,
             "buttonColor": color, "buttonTextColor": color, "alignment": one_of(*ALIGNMENTS),
             "height": number(0, 1000)},
    "profile": {"name": text(200), "role": text(200), "imageUrl": url, "bio": text(), "url": url,
                "alignment": one_of(*ALIGNMENTS)},
    "html": {"html": text(MAX_HTML_CHARS)},
    "dropshadow": {"blocks": blocks, "backgroundColor": color, "shadowColor": color, "blur": number(0, 50),
                   "offsetX": number(-50, 50), "offsetY": number(-50, 50), "borderRadius": number(0, 50),
                   "padding": number(0, 100), "borderColor": color},
}
REQUIRED = {"dynamic": ("source",), "conditional": ("condition",)}

def font_family(value, path):
    if not isinstance(value, str) or not _FONT.fullmatch(value):
        _fail(path, "must be a font list like Arial, Helvetica, sans-serif (letters, digits, spaces, , ' \" -)")


SETTINGS = {"fontFamily": font_family, "contentWidth": number(200, 1200), "backgroundColor": color,
            "contentBackgroundColor": color, "defaultTextColor": color}


class _Walker:
    def __init__(self):
        self.count = 0

    def blocks(self, value, path: str, depth: int) -> None:
        if not isinstance(value, list):
            _fail(path, "must be an array")
        if depth > MAX_DEPTH:
            _fail(path, f"blocks nest at most {MAX_DEPTH} levels deep")
        for i, block in enumerate(value):
            self.block(block, f"{path}[{i}]", depth)

    def block(self, block, path: str, depth: int) -> None:
        self.count += 1
        if self.count > MAX_BLOCKS:
            _fail(path, f"a template has at most {MAX_BLOCKS} blocks")
        if not isinstance(block, dict):
            _fail(path, "must be an object with id, type and content")
        if "id" not in block:
            _fail(f"{path}.id", "is required")
        text(100)(block["id"], f"{path}.id")
        if "type" not in block:
            _fail(f"{path}.type", "is required")
        one_of(*BLOCK_TYPES)(block["type"], f"{path}.type")
        content = block.get("content", {})
        kind = block["type"]
        _check_object(content, CONTENT[kind], f"{path}.content", self, depth)
        for name in REQUIRED.get(kind, ()):
            if name not in content:
                _fail(f"{path}.content.{name}", "is required")


def _check_object(value, fields: dict[str, Check], path: str, walker: _Walker | None = None,
                  depth: int = 0) -> None:
    if not isinstance(value, dict):
        _fail(path, "must be an object")
    for name, check in fields.items():
        if name not in value:
            continue
        if check is blocks:
            (walker or _Walker()).blocks(value[name], f"{path}.{name}", depth + 1)
        elif name == "columns" and walker is not None:
            _list_of_columns(value[name], f"{path}.{name}", walker, depth)
        else:
            check(value[name], f"{path}.{name}")


def _list_of_columns(value, path: str, walker: _Walker, depth: int) -> None:
    _list_of({}, 1, 4)(value, path)
    for i, column in enumerate(value):
        _check_object(column, COLUMN, f"{path}[{i}]", walker, depth)


def validate_structure(value, path: str = "json_structure") -> dict:
    """Return `value` unchanged if it is a valid json_structure; else raise ValidationFailed."""
    if not isinstance(value, dict):
        _fail(path, "must be an object with blocks and settings")
    if "blocks" not in value:
        _fail(f"{path}.blocks", "is required")
    _Walker().blocks(value["blocks"], f"{path}.blocks", 1)
    if "settings" in value:
        _check_object(value["settings"], SETTINGS, f"{path}.settings")
    return value


def merge_tag_error_in(structure, path: str = "json_structure") -> MergeTagError | None:
    """The first string of a structure that is malformed merge-tag syntax on its own, as an
    error naming its path (`json_structure.blocks[2].content.html`) with the line and
    column inside that string; None when every string parses alone (a tag opened in one
    block and closed in another is only wrong as a whole)."""
    if isinstance(structure, str):
        try:
            parse(structure)
        except MergeTagError as error:
            return error.at(path)
        return None
    items = structure.items() if isinstance(structure, dict) else \
        ((f"[{i}]", v) for i, v in enumerate(structure)) if isinstance(structure, list) else ()
    for key, value in items:
        found = merge_tag_error_in(value, f"{path}{key}" if key.startswith("[") else f"{path}.{key}")
        if found is not None:
            return found
    return None
