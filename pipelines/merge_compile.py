"""Merge-tag AST → Jinja2 source → a compiled, sandboxed template, cached by content hash.

Every piece of user text is emitted as data: literal text inside `{% raw %}` blocks (split
around any `{%` so a user's `{% endraw %}` cannot close them early) and constants as
escaped string literals. Only the generated skeleton is Jinja syntax, so `{{7*7}}`,
`{% for %}` or `{{ ''.__class__ }}` in a template come out as the characters written.
Values are fetched by our own filters (dict keys and list indexes only, never attributes)
inside an ImmutableSandboxedEnvironment, which is the second wall, not the first.

Filters and tests are bound once when Jinja compiles the module, so a render costs about
what hand-written Jinja2 costs (bench/render measures it)."""

from __future__ import annotations

import collections
import hashlib
import json
import threading

import markupsafe
from jinja2.sandbox import ImmutableSandboxedEnvironment

from . import merge_tags as mt
from .merge_values import FILTERS, TESTS, compare, lookup, mt_out, truthy

CACHE_SIZE = 512
_ROOT = "D"


def _const(value) -> str:
    """A Jinja literal for `value` that contains no delimiter characters."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    text = json.dumps(value, ensure_ascii=False)  # JSON escapes are ones Jinja decodes too
    for char in "{}%#'":
        text = text.replace(char, f"\\u{ord(char):04x}")
    return text


def _raw(text: str) -> str:
    pieces = text.split("{%")
    out = "{% raw %}" + "{% endraw %}{{ '\\u007b%' }}{% raw %}".join(pieces) + "{% endraw %}"
    return out.replace("{% raw %}{% endraw %}", "")


class _Generator:
    def __init__(self):
        self.out: list[str] = []
        self.loops: list[str] = []          # Jinja names of the enclosing loop items

    def operand(self, operand) -> str:
        if isinstance(operand, mt.Literal):
            return _const(operand.value)
        ref = operand
        keys = ", ".join(_const(k) for k in ref.keys)
        if ref.kind == "loop":
            return {"index": "loop.index0", "first": "loop.first", "last": "loop.last"}[ref.keys[0]]
        if ref.kind == "this":
            item = self.loops[-1]
            return f"{item}|mt_get({keys})" if ref.keys else item
        if not self.loops:
            return f"{_ROOT}|mt_get({keys})"
        scopes = ", ".join([*reversed(self.loops), _ROOT])
        return f"({scopes},)|mt_scoped({keys})"

    def condition(self, cond: mt.Condition, negate: bool) -> str:
        left = self.operand(cond.left)
        if cond.op is None:
            test = f"{left} is mt_truthy"
        else:
            test = f"{left} is mt_compare({_const(cond.op)}, {self.operand(cond.right)})"
        return f"not ({test})" if negate else test

    def emit(self, nodes: list) -> None:
        for node in nodes:
            if isinstance(node, mt.Text):
                self.out.append(_raw(node.text))
            elif isinstance(node, mt.Var):
                self.out.append("{{ %s|mt_out(%s, %s) }}" % (
                    self.operand(node.ref), _const(node.fallback), _const(node.format)))
            elif isinstance(node, mt.If):
                self.out.append("{%% if %s %%}" % self.condition(node.condition, node.negate))
                self.emit(node.body)
                if node.otherwise:
                    self.out.append("{% else %}")
                    self.emit(node.otherwise)
                self.out.append("{% endif %}")
            elif isinstance(node, mt.Each):
                source = self.operand(node.ref)
                item = f"_item{len(self.loops) + 1}"
                self.out.append("{%% for %s in %s|mt_list %%}" % (item, source))
                self.loops.append(item)
                self.emit(node.body)
                self.loops.pop()
                if node.otherwise:
                    self.out.append("{% else %}")
                    self.emit(node.otherwise)
                self.out.append("{% endfor %}")


def to_jinja(nodes: list) -> str:
    """The Jinja2 source for a parsed template (public so it can be read when debugging)."""
    generator = _Generator()
    generator.emit(nodes)
    return "".join(generator.out)


def _environment(autoescape: bool) -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(autoescape=autoescape, keep_trailing_newline=True,
                                        auto_reload=False, cache_size=0)
    env.filters.update(FILTERS)
    env.tests.update(TESTS)
    return env


# Bodies are HTML (values escaped); subjects and text parts are not HTML (values as-is).
_ENVIRONMENTS = {"html": _environment(True), "text": _environment(False)}


def _interpretable(nodes: list) -> bool:
    """Text, top-level `{{field|fallback|format}}` and `{{#if}}`/`{{#unless}}` on top-level
    fields — most transactional bodies and every compliance footer. Loops need Jinja2."""
    for node in nodes:
        if isinstance(node, mt.Var):
            if node.ref.kind != "root":
                return False
        elif isinstance(node, mt.If):
            operands = (node.condition.left, node.condition.right)
            if any(isinstance(o, mt.Ref) and o.kind != "root" for o in operands):
                return False
            if not (_interpretable(node.body) and _interpretable(node.otherwise)):
                return False
        elif not isinstance(node, mt.Text):
            return False
    return True


def _operand(operand, data: dict):
    return operand.value if isinstance(operand, mt.Literal) else lookup(data, operand.keys)


def _interpret(nodes: list, data: dict, escape, out: list) -> None:
    for node in nodes:
        if isinstance(node, mt.Text):
            out.append(node.text)
        elif isinstance(node, mt.Var):
            out.append(escape(mt_out(lookup(data, node.ref.keys), node.fallback, node.format)))
        else:
            cond = node.condition
            left = _operand(cond.left, data)
            held = truthy(left) if cond.op is None else compare(left, cond.op, _operand(cond.right, data))
            _interpret(node.body if held != node.negate else node.otherwise, data, escape, out)


class CompiledTemplate:
    """One template's compiled form: render it once per recipient.

    Templates without loops skip Jinja2 altogether (compiling costs milliseconds, and a
    transactional body is often rendered once): they are interpreted from the parsed
    tree through the same value functions (lookup, mt_out, truthy, compare) and the same
    escaping the generated Jinja2 calls, so the output is the same."""

    __slots__ = ("mode", "nodes", "_template", "digest")

    def __init__(self, source: str, mode: str, digest: str):
        self.mode = mode
        self.digest = digest
        self.nodes = mt.parse(source)
        self._template = (None if _interpretable(self.nodes)
                          else _ENVIRONMENTS[mode].from_string(to_jinja(self.nodes)))

    @property
    def jinja_source(self) -> str:
        """The generated Jinja2 source (for reading while debugging)."""
        return to_jinja(self.nodes)

    @property
    def interpreted(self) -> bool:
        return self._template is None

    def render(self, data: dict) -> str:
        if self._template is not None:
            return self._template.render({_ROOT: data})
        out: list = []
        _interpret(self.nodes, data, markupsafe.escape if self.mode == "html" else str, out)
        return "".join(out)

    def mentions(self, *keys: str) -> bool:
        return mt.mentions(self.nodes, keys)


class _Cache:
    """A bounded LRU of compiled templates keyed by (mode, SHA-256 of the source)."""

    def __init__(self, size: int):
        self.size = size
        self.items: collections.OrderedDict[str, CompiledTemplate] = collections.OrderedDict()
        self.lock = threading.Lock()

    def get(self, source: str, mode: str) -> CompiledTemplate:
        digest = hashlib.sha256(f"{mode}\x00{source}".encode("utf-8", "surrogatepass")).hexdigest()
        with self.lock:
            found = self.items.get(digest)
            if found is not None:
                self.items.move_to_end(digest)
                return found
        compiled = CompiledTemplate(source, mode, digest)   # raises MergeTagError if malformed
        with self.lock:
            self.items[digest] = compiled
            while len(self.items) > self.size:
                self.items.popitem(last=False)
        return compiled


_CACHE = _Cache(CACHE_SIZE)


def compile_template(source: str, mode: str = "html") -> CompiledTemplate:
    """Compile (or fetch from the cache) `source`. mode: `html` escapes values, `text` does not."""
    if mode not in _ENVIRONMENTS:
        raise ValueError(f"unknown mode {mode!r}")
    return _CACHE.get(source, mode)
