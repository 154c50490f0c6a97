"""What merge-tag values mean at render time: lookup, output text, fallback, formats,
truthiness and comparison. These are the only functions generated templates call; they
touch dict keys and list indexes, never attributes, so no Python object is reachable.
The ones that write output or start a loop charge the message's RenderBudget."""

from __future__ import annotations

import math

import markupsafe

from pipelines.templates.render_budget import RenderBudget

_MISSING = None
# Longer text is not a number or a boolean: no float() parse of a long string per comparison.
_MAX_NUMBER_CHARS = 64


class Lines(str):
    """Text whose line breaks mean something (a postal address): in an HTML body each
    line ends with `<br>`, in text it stays a line of its own."""

    def __new__(cls, text: str):
        return super().__new__(cls, "\n".join(text.splitlines()))

    def __html__(self) -> str:
        return markupsafe.Markup("<br>").join(markupsafe.escape(line) for line in str(self).split("\n"))


def lookup(value, keys: tuple) -> object:
    for key in keys:
        if isinstance(value, dict):
            value = value.get(key)
        elif isinstance(value, list) and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        else:
            return _MISSING
    return value


def mt_scoped(scopes: tuple, *keys):
    """A bare name inside {{#each}}: the innermost item that has it, else the root data
    (the root is the last scope), like Handlebars."""
    first = keys[0]
    for scope in scopes[:-1]:
        if isinstance(scope, dict) and first in scope:
            return lookup(scope, keys)
    return lookup(scopes[-1], keys)


def mt_loop(value, budget: RenderBudget, body: tuple[int, int], otherwise: tuple[int, int]):
    """A loop over `value` (a non-list iterates nothing) as (index, items left after this
    one, item), charged to the budget before it runs: per iteration one step plus the
    body's (steps, literal chars); or `otherwise`'s when the else branch renders instead."""
    if not isinstance(value, list) or not value:
        budget.spend(*otherwise)
        return ()
    count = len(value)
    budget.spend(count * (1 + body[0]), count * body[1])
    return zip(range(count), range(count - 1, -1, -1), value, strict=True)


def as_text(value) -> str:
    """JSON-ish text: true/false, integers without a trailing .0, lists joined by ', ',
    objects and missing values empty."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer():
            return str(int(value))
        return repr(value)
    if isinstance(value, list):
        return ", ".join(as_text(v) for v in value if not isinstance(v, (dict, list)))
    return ""


_FORMATS = {
    "text": lambda s: s,
    "uppercase": str.upper,
    "lowercase": str.lower,
    "capitalize": str.capitalize,
}


def _blank(text: str) -> bool:
    return not text or text.isspace()   # as `not text.strip()`, without copying long text


def mt_out(value, fallback: str, fmt: str, budget: RenderBudget) -> str:
    if isinstance(value, str):
        text = value
    else:
        if isinstance(value, list):   # joining it is work even when nothing comes out
            budget.spend(len(value), 0)
        text = as_text(value)
    if _blank(text):
        text = fallback
    budget.chars_left -= len(text)   # RenderBudget.spend's check, inlined: this runs for every value
    if budget.chars_left < 0:
        budget.too_large()
    if fmt == "text":
        return text
    formatted = _FORMATS[fmt](text)
    return Lines(formatted) if isinstance(text, Lines) else formatted


def truthy(value) -> bool:
    """Handlebars' rule: missing, null, false, 0, "" (also blank), [] and {} are false."""
    if isinstance(value, str):
        return not _blank(value)
    return bool(value)


def mt_truthy(value, budget: RenderBudget | None = None, if_true: tuple = (0, 0), if_false: tuple = (0, 0)) -> bool:
    """`truthy`; inside a loop it also charges the (steps, literal chars) of the branch it picks."""
    held = truthy(value)
    if budget is not None:
        budget.spend(*(if_true if held else if_false))
    return held


def _number(value) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and len(value) <= _MAX_NUMBER_CHARS:
        try:
            number = float(value.strip())
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def _boolean(value) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and len(value) <= _MAX_NUMBER_CHARS and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return None


def _ordered(op: str, a, b) -> bool:
    if op == "==":
        return a == b
    if op == "!=":
        return a != b
    if op == ">":
        return a > b
    if op == "<":
        return a < b
    if op == ">=":
        return a >= b
    return a <= b


def compare(left, op: str, right) -> bool:
    """Booleans compare as booleans ("true"/"false" strings count), numbers and numeric
    strings as numbers, two texts as text; a number against non-numeric text, or a
    missing/null side, is unequal and never ordered (null equals only null)."""
    if left is None or right is None:
        if op in ("==", "!="):
            return (left is None and right is None) == (op == "==")
        return False
    if isinstance(left, bool) or isinstance(right, bool):
        a, b = _boolean(left), _boolean(right)
        if a is None or b is None:
            return op == "!="
        return _ordered(op, a, b)
    x, y = _number(left), _number(right)
    if x is not None and y is not None:
        return _ordered(op, x, y)
    numeric = (int, float)
    if isinstance(left, (dict, list, *numeric)) or isinstance(right, (dict, list, *numeric)):
        return op == "!="       # a number against non-numeric text, or a list/object: unrelated
    return _ordered(op, as_text(left), as_text(right))


def mt_compare(left, op: str, right, budget: RenderBudget | None = None, if_true: tuple = (0, 0),
               if_false: tuple = (0, 0)) -> bool:
    """`compare`; inside a loop it also charges the (steps, literal chars) of the branch it picks."""
    held = compare(left, op, right)
    if budget is not None:
        budget.spend(*(if_true if held else if_false))
    return held
