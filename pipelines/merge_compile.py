"""Merge-tag AST → Jinja2 source → a compiled, sandboxed template, cached by content hash.

Every piece of user text is emitted as data: literal text inside `{% raw %}` blocks (split
around any `{%` so a user's `{% endraw %}` cannot close them early) and constants as
escaped string literals. Only the generated skeleton is Jinja syntax, so `{{7*7}}`,
`{% for %}` or `{{ ''.__class__ }}` in a template come out as the characters written.
Values are fetched by our own filters (dict keys and list indexes only, never attributes)
inside an ImmutableSandboxedEnvironment, which is the second wall, not the first.

Filters and tests are bound once when Jinja compiles the module, so a render costs about
what hand-written Jinja2 costs (bench/render measures it). Loops iterate a plain
(index, items left, item) tuple instead of Jinja's `loop` object, whose attributes would
go through the sandbox's checks. Every value written, and every loop and branch taken
inside a loop, is charged to the message's RenderBudget (pipelines/render_budget.py)."""

from __future__ import annotations

import collections
import hashlib
import json
import re
import threading

import markupsafe
from jinja2.sandbox import ImmutableSandboxedEnvironment

from . import merge_tags as mt
from .loop_cost import cost
from .merge_values import FILTERS, TESTS, compare, lookup, mt_loop, mt_out, mt_scoped, truthy
from .render_budget import RenderBudget

CACHE_SIZE = 512
JINJA_MAX_DEPTH = 16     # deeper templates are interpreted (see CompiledTemplate)
_ROOT = "D"              # the data, in the generated Jinja2
_BUDGET = "B"            # the message's RenderBudget, in the generated Jinja2
_NEWLINE = re.compile(r"\r\n?")


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
        self.loops: list[int] = []          # numbers of the enclosing loops, innermost last

    def operand(self, operand) -> str:
        if isinstance(operand, mt.Literal):
            return _const(operand.value)
        ref = operand
        keys = ", ".join(_const(k) for k in ref.keys)
        if ref.kind == "loop":
            n = self.loops[-1]
            return {"index": f"_i{n}", "first": f"(_i{n} == 0)", "last": f"(_r{n} == 0)"}[ref.keys[0]]
        if ref.kind == "this":
            item = f"_item{self.loops[-1]}"
            return f"{item}|mt_get({keys})" if ref.keys else item
        if not self.loops:
            return f"{_ROOT}|mt_get({keys})"
        scopes = ", ".join([*(f"_item{n}" for n in reversed(self.loops)), _ROOT])
        return f"({scopes},)|mt_scoped({keys})"

    def condition(self, node: mt.If) -> str:
        """The test of an {{#if}}/{{#unless}}; inside a loop it charges the budget with what
        the branch it picks costs (outside loops each branch runs at most once)."""
        cond = node.condition
        args = [] if cond.op is None else [_const(cond.op), self.operand(cond.right)]
        when_true, when_false = cost(node.body, len(self.loops)), cost(node.otherwise, len(self.loops))
        if node.negate:
            when_true, when_false = when_false, when_true
        if self.loops and (any(when_true) or any(when_false)):
            args += [_BUDGET, repr(when_true), repr(when_false)]
        test = f"{self.operand(cond.left)} is " + ("mt_truthy" if cond.op is None else "mt_compare")
        if args:
            test += f"({', '.join(args)})"
        return f"not ({test})" if node.negate else test

    def emit(self, nodes: list) -> None:
        for node in nodes:
            if isinstance(node, mt.Text):
                self.out.append(_raw(node.text))
            elif isinstance(node, mt.Var):
                self.out.append("{{ %s|mt_out(%s, %s, %s) }}" % (
                    self.operand(node.ref), _const(node.fallback), _const(node.format), _BUDGET))
            elif isinstance(node, mt.If):
                self.out.append("{%% if %s %%}" % self.condition(node))
                self.emit(node.body)
                if node.otherwise:
                    self.out.append("{% else %}")
                    self.emit(node.otherwise)
                self.out.append("{% endif %}")
            elif isinstance(node, mt.Each):
                source = self.operand(node.ref)
                n = len(self.loops) + 1
                self.out.append("{%% for _i%d, _r%d, _item%d in %s|mt_loop(%s, %r, %r) %%}" % (
                    n, n, n, source, _BUDGET, cost(node.body, n), cost(node.otherwise, n - 1)))
                self.loops.append(n)
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


def _normalise_newlines(nodes: list) -> None:
    """CRLF and CR in template text become LF, as Jinja2 does, so both engines write the
    same characters (and the budget counts what is written)."""
    for node in nodes:
        if isinstance(node, mt.Text):
            node.text = _NEWLINE.sub("\n", node.text)
        elif isinstance(node, (mt.If, mt.Each)):
            _normalise_newlines(node.body)
            _normalise_newlines(node.otherwise)


def _shape(nodes: list) -> tuple[int, bool]:
    """(how deep blocks nest, whether there is a loop)."""
    depth, loops = 0, False
    for node in nodes:
        if isinstance(node, (mt.If, mt.Each)):
            body = _shape(node.body)
            otherwise = _shape(node.otherwise)
            depth = max(depth, 1 + body[0], 1 + otherwise[0])
            loops = loops or isinstance(node, mt.Each) or body[1] or otherwise[1]
    return depth, loops


# --- the interpreter -------------------------------------------------------------------

def _value(ref, data: dict, loops: list):
    """`ref`'s value; `loops` holds (item, index, items left after it), innermost last."""
    if isinstance(ref, mt.Literal):
        return ref.value
    if ref.kind == "root":
        if not loops:
            return lookup(data, ref.keys)
        return mt_scoped((*(frame[0] for frame in reversed(loops)), data), *ref.keys)
    item, index, left = loops[-1]
    if ref.kind == "this":
        return lookup(item, ref.keys)
    return {"index": index, "first": index == 0, "last": left == 0}[ref.keys[0]]


def _interpret(nodes: list, data: dict, loops: list, escape, budget: RenderBudget, out: list) -> None:
    for node in nodes:
        if isinstance(node, mt.Text):
            out.append(node.text)
        elif isinstance(node, mt.Var):
            out.append(escape(mt_out(_value(node.ref, data, loops), node.fallback, node.format, budget)))
        elif isinstance(node, mt.If):
            cond = node.condition
            left = _value(cond.left, data, loops)
            held = truthy(left) if cond.op is None else compare(left, cond.op, _value(cond.right, data, loops))
            branch = node.body if held != node.negate else node.otherwise
            if loops:
                budget.spend(*cost(branch, len(loops)))
            _interpret(branch, data, loops, escape, budget, out)
        else:
            items = _value(node.ref, data, loops)
            depth = len(loops)
            for frame in mt_loop(items, budget, cost(node.body, depth + 1), cost(node.otherwise, depth)):
                loops.append((frame[2], frame[0], frame[1]))
                _interpret(node.body, data, loops, escape, budget, out)
                loops.pop()
            if not (isinstance(items, list) and items):
                _interpret(node.otherwise, data, loops, escape, budget, out)


class CompiledTemplate:
    """One template's compiled form: render it once per recipient.

    Templates with loops are compiled to Jinja2, unless their blocks nest deeper than
    JINJA_MAX_DEPTH: Python compiles at most 20 nested loops and 100 indentation levels,
    and Jinja2's parser recurses per level. The others are interpreted from the parsed
    tree: templates without loops (compiling costs milliseconds, and a transactional body
    is often rendered once) and deep ones (up to MAX_NESTING_DEPTH; the interpreter
    recurses once per level). The interpreter calls the same value functions (lookup,
    mt_out, truthy, compare, mt_loop) with the same escaping and the same budget charges
    as the generated Jinja2, so the output is the same."""

    __slots__ = ("mode", "nodes", "_template", "digest")

    def __init__(self, source: str, mode: str, digest: str = "", *, engine: str | None = None):
        """`engine` ("jinja" or "interpreter") overrides the choice, for tests comparing them."""
        self.mode = mode
        self.digest = digest
        self.nodes = mt.parse(source)
        _normalise_newlines(self.nodes)
        if engine is None:
            depth, loops = _shape(self.nodes)
            engine = "jinja" if loops and depth <= JINJA_MAX_DEPTH else "interpreter"
        self._template = (_ENVIRONMENTS[mode].from_string(to_jinja(self.nodes)) if engine == "jinja" else None)

    @property
    def jinja_source(self) -> str:
        """The generated Jinja2 source (for reading while debugging)."""
        return to_jinja(self.nodes)

    @property
    def interpreted(self) -> bool:
        return self._template is None

    def render(self, data: dict, budget: RenderBudget | None = None) -> str:
        """The output for `data`; raises RenderBudgetExceeded past a limit of `budget`
        (a fresh default budget when none is given)."""
        budget = RenderBudget() if budget is None else budget
        template = self._template
        if template is not None:
            return "".join(template.root_render_func(template.new_context({_ROOT: data, _BUDGET: budget})))
        out: list = []
        _interpret(self.nodes, data, [], markupsafe.escape if self.mode == "html" else str, budget, out)
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
