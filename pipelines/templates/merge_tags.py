"""The merge-tag language: user text → an AST. Nothing here evaluates anything.

Grammar (one tag is `{{ … }}`; everything else is literal text):

    {{path}}  {{path|fallback}}  {{path|fallback|format}}  {{path||format}}
    {{#if cond}} … {{else}} … {{/if}}        {{#unless cond}} … {{/unless}}
    {{#each path}} … {{else}} … {{/each}}    (the else branch renders for an empty list)
    cond   := operand [ (== | != | > | < | >= | <=) operand ]
    operand:= path | 'text' | "text" | number | true | false | null
    path   := name(.name)* | this(.name)* | @index | @first | @last

A `{{…}}` whose head is not a path (`{{7*7}}`, `{{ ''.__class__ }}`, `{{}}`) is literal
text: users paste all kinds of brace syntax and we must neither run it nor refuse it.
Block tags (`{{#…}}`, `{{/…}}`, `{{else}}`) and formats are strict: a typo there would
silently change what the email says, so it is an error with a line and column. Blocks
nest at most MAX_NESTING_DEPTH deep (pipelines/templates/render_budget.py).
pipelines/templates/merge_compile.py turns the AST into a Python render function."""

from __future__ import annotations

import dataclasses
import re
from typing import NoReturn

from pipelines.core.errors import ValidationFailed
from pipelines.templates.render_budget import MAX_NESTING_DEPTH

FORMATS = ("text", "uppercase", "lowercase", "capitalize")
OPERATORS = ("==", "!=", ">=", "<=", ">", "<")

_NAME = r"[A-Za-z_][A-Za-z0-9_\-]*|[0-9]+"
_PATH = re.compile(rf"(?:this|{_NAME})(?:\.(?:{_NAME}))*|@index|@first|@last")
_COND_TOKEN = re.compile(r"""\s*(?:
    (?P<op>==|!=|>=|<=|>|<)
  | '(?P<sq>[^']*)' | "(?P<dq>[^"]*)"
  | (?P<num>-?[0-9]+(?:\.[0-9]+)?)(?![A-Za-z_.])
  | (?P<path>@?[A-Za-z0-9_.\-]+)
  | (?P<bad>\S))""", re.VERBOSE)


class MergeTagError(ValidationFailed):
    """A malformed tag. `line` and `column` are 1-based and point at the tag's `{{`."""

    def __init__(self, message: str, line: int, column: int, *, path: str | None = None):
        super().__init__(f"{message} (line {line}, column {column})", path=path)
        self.reason, self.line, self.column = message, line, column

    def at(self, path: str) -> MergeTagError:
        """The same error, naming the request field it came from."""
        return MergeTagError(self.reason, self.line, self.column, path=path)


# --- the AST ---------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Ref:
    """A value looked up at render time. kind: `root` (data and contact fields, or the
    current loop item's fields first when inside a loop), `this` (the innermost loop
    item), `loop` (@index/@first/@last)."""
    kind: str
    keys: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Literal:
    value: str | int | float | bool | None


Operand = Ref | Literal


@dataclasses.dataclass(frozen=True)
class Condition:
    left: Operand
    op: str | None = None          # None: truthiness of `left`
    right: Operand | None = None


@dataclasses.dataclass
class Text:
    text: str


@dataclasses.dataclass
class Var:
    ref: Ref
    fallback: str
    format: str


@dataclasses.dataclass
class If:
    condition: Condition
    negate: bool                   # {{#unless}}
    body: list
    otherwise: list


@dataclasses.dataclass
class Each:
    ref: Ref
    body: list
    otherwise: list


Node = Text | Var | If | Each


# --- parsing ---------------------------------------------------------------------------

def _position(source: str, offset: int) -> tuple[int, int]:
    line = source.count("\n", 0, offset) + 1
    return line, offset - (source.rfind("\n", 0, offset) + 1) + 1


def parse_ref(text: str) -> Ref | None:
    if not _PATH.fullmatch(text):
        return None
    if text.startswith("@"):
        return Ref("loop", (text[1:],))
    keys = tuple(text.split("."))
    if keys[0] == "this":
        return Ref("this", keys[1:])
    if "this" in keys:
        return None
    return Ref("root", keys)


def _parse_operand(match: re.Match) -> Operand | str:
    """An operand, or a message saying why the token is not one."""
    if match["sq"] is not None or match["dq"] is not None:
        return Literal(match["sq"] if match["sq"] is not None else match["dq"])
    if match["num"] is not None:
        text = match["num"]
        return Literal(float(text) if "." in text else int(text))
    if match["path"] is not None:
        word = match["path"]
        if word in ("true", "false"):
            return Literal(word == "true")
        if word == "null":
            return Literal(None)
        return parse_ref(word) or f"'{word}' is not a field name"
    if match["op"] is not None:
        return f"expected a value, found '{match['op']}'"
    return f"unexpected '{match['bad']}'"


def parse_condition(text: str) -> Condition:
    """Raises ValueError with a reason; the caller adds the position."""
    tokens, pos = [], 0
    text = text.strip()
    while pos < len(text):
        match = _COND_TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            break
        tokens.append(match)
        pos = match.end()
    if not tokens:
        raise ValueError("the condition is empty")
    left = _parse_operand(tokens[0])
    if isinstance(left, str):
        raise ValueError(left)
    if len(tokens) == 1:
        return Condition(left)
    if tokens[1]["op"] is None:
        raise ValueError("expected one of " + ", ".join(OPERATORS) + " after the first value")
    if len(tokens) == 2:
        raise ValueError(f"expected a value after '{tokens[1]['op']}'")
    right = _parse_operand(tokens[2])
    if isinstance(right, str):
        raise ValueError(right)
    if len(tokens) > 3:
        raise ValueError("a condition compares two values; found more after them")
    return Condition(left, tokens[1]["op"], right)


@dataclasses.dataclass
class _Open:
    kind: str                      # if | unless | each
    node: If | Each
    offset: int
    in_else: bool = False


class _Parser:
    def __init__(self, source: str):
        self.source = source
        self.root: list = []
        self.stack: list[_Open] = []

    def fail(self, message: str, offset: int) -> NoReturn:
        raise MergeTagError(message, *_position(self.source, offset))

    @property
    def target(self) -> list:
        if not self.stack:
            return self.root
        top = self.stack[-1]
        return top.node.otherwise if top.in_else else top.node.body

    def loop_depth(self) -> int:
        return sum(1 for o in self.stack if o.kind == "each" and not o.in_else)

    def text(self, chunk: str) -> None:
        if not chunk:
            return
        target = self.target
        if target and isinstance(target[-1], Text):
            target[-1].text += chunk
        else:
            target.append(Text(chunk))

    def ref_in_scope(self, ref: Ref, offset: int) -> Ref:
        if ref.kind != "root" and self.loop_depth() == 0:
            shown = "this" if ref.kind == "this" else "@" + ref.keys[0]
            self.fail(f"{{{{{shown}}}}} is only available inside {{{{#each}}}}", offset)
        return ref

    def parse(self) -> list:
        source, pos = self.source, 0
        while True:
            start = source.find("{{", pos)
            if start < 0:
                self.text(source[pos:])
                break
            end = source.find("}}", start + 2)
            inner = source[start + 2:end] if end >= 0 else source[start + 2:]
            stripped = inner.strip()
            if end < 0:
                if stripped[:1] in ("#", "/"):
                    self.fail("this tag is never closed with '}}'", start)
                self.text(source[pos:])
                break
            self.text(source[pos:start])
            if not self.tag(stripped, start):
                self.text(source[start:end + 2])
            pos = end + 2
        if self.stack:
            top = self.stack[-1]
            self.fail(f"{{{{#{top.kind}}}}} is never closed with {{{{/{top.kind}}}}}", top.offset)
        return self.root

    def tag(self, inner: str, offset: int) -> bool:
        """Handle one tag; False means it is literal text."""
        if inner.startswith("#"):
            self.open_block(inner[1:], offset)
        elif inner.startswith("/"):
            self.close_block(inner[1:].strip(), offset)
        elif inner == "else":
            if not self.stack:
                self.fail("{{else}} outside {{#if}}, {{#unless}} or {{#each}}", offset)
            if self.stack[-1].in_else:
                self.fail(f"a second {{{{else}}}} in one {{{{#{self.stack[-1].kind}}}}}", offset)
            self.stack[-1].in_else = True
        else:
            return self.variable(inner, offset)
        return True

    def open_block(self, inner: str, offset: int) -> None:
        if len(self.stack) >= MAX_NESTING_DEPTH:
            self.fail(f"blocks ({{{{#if}}}}, {{{{#unless}}}}, {{{{#each}}}}) nest more than "
                      f"{MAX_NESTING_DEPTH} levels deep", offset)
        kind, _, rest = inner.partition(" ")
        kind = kind.strip()
        if kind in ("if", "unless"):
            try:
                condition = parse_condition(rest)
            except ValueError as error:
                self.fail(f"bad condition in {{{{#{kind}}}}}: {error}", offset)
            for operand in (condition.left, condition.right):
                if isinstance(operand, Ref):
                    self.ref_in_scope(operand, offset)
            node: If | Each = If(condition, kind == "unless", [], [])
        elif kind == "each":
            ref = parse_ref(rest.strip())
            if ref is None or ref.kind == "loop":
                self.fail("{{#each}} needs the name of a list, e.g. {{#each items}}", offset)
            node = Each(self.ref_in_scope(ref, offset), [], [])
        else:
            self.fail(f"unknown block '#{kind}'; use #if, #unless or #each", offset)
        self.target.append(node)
        self.stack.append(_Open(kind, node, offset))

    def close_block(self, kind: str, offset: int) -> None:
        if not self.stack:
            self.fail(f"{{{{/{kind}}}}} without a matching {{{{#{kind}}}}}", offset)
        top = self.stack[-1]
        if top.kind != kind:
            line, column = _position(self.source, top.offset)
            self.fail(f"{{{{/{kind}}}}} found where {{{{/{top.kind}}}}} was expected "
                      f"(for the {{{{#{top.kind}}}}} at line {line}, column {column})", offset)
        self.stack.pop()

    def variable(self, inner: str, offset: int) -> bool:
        parts = inner.split("|")
        ref = parse_ref(parts[0].strip())
        if ref is None:
            return False
        if len(parts) > 3:
            self.fail("a tag takes at most a fallback and a format: {{field|fallback|format}}", offset)
        fallback = parts[1].strip() if len(parts) > 1 else ""
        fmt = parts[2].strip() if len(parts) > 2 else ""
        fmt = fmt or "text"
        if fmt not in FORMATS:
            self.fail(f"unknown format '{fmt}'; use one of " + ", ".join(FORMATS), offset)
        self.target.append(Var(self.ref_in_scope(ref, offset), fallback, fmt))
        return True


def parse(source: str) -> list[Node]:
    """The AST of `source`; raises MergeTagError (a 400 validation_error) if malformed."""
    return _Parser(source).parse()


def mentions(nodes: list[Node], keys: tuple[str, ...]) -> bool:
    """Whether any tag outputs the root field `keys` (e.g. ('unsubscribe_url',))."""
    for node in nodes:
        if isinstance(node, Var) and node.ref == Ref("root", keys):
            return True
        if isinstance(node, (If, Each)) and (mentions(node.body, keys) or mentions(node.otherwise, keys)):
            return True
    return False
