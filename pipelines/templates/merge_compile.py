"""Merge-tag AST → Python source → a compiled render function, cached by content hash.

Every piece of user text is emitted as data: literal text and constants as Python
literals written by `repr`, keys likewise. Only the generated skeleton (list appends,
`if`, `for` over our loop helper) is code, so `{{7*7}}`, `{% for %}` or
`{{ ''.__class__ }}` in a template come out as the characters written. The function runs
with no builtins and can reach only the value functions of pipelines/templates/merge_values.py,
which read dict keys and list indexes, never attributes.

A render is one call building one list of pieces that is joined once, which costs less
than hand-written Jinja2 (bench/render measures both). Every value written, and every
loop and branch taken inside a loop, is charged to the message's RenderBudget
(pipelines/templates/render_budget.py)."""

from __future__ import annotations

import collections
import hashlib
import re
import threading

import markupsafe

from pipelines.templates import merge_tags as mt
from pipelines.templates.loop_cost import cost
from pipelines.templates.merge_values import compare, lookup, mt_compare, mt_loop, mt_out, mt_scoped, mt_truthy, truthy
from pipelines.templates.render_budget import RenderBudget

CACHE_SIZE = 512
COMPILED_MAX_DEPTH = 16  # deeper templates are interpreted (see CompiledTemplate)
_ROOT = "D"              # the data, in the generated Python
_BUDGET = "B"            # the message's RenderBudget, in the generated Python
_NEWLINE = re.compile(r"\r\n?")


class _Generator:
    """Python source for one template: a function `render(D, B)` returning the output as
    a list of pieces (literal text as it is, each value as written: escaped in HTML)."""

    def __init__(self, mode: str):
        self.escape = mode == "html"
        self.lines: list[str] = []
        self.run: list[str] = []            # pieces not yet written out, in order
        self.loops: list[int] = []          # numbers of the enclosing loops, innermost last
        self.depth = 1                      # indentation of the next line

    def operand(self, operand) -> str:
        if isinstance(operand, mt.Literal):
            return repr(operand.value)
        ref = operand
        if ref.kind == "loop":
            n = self.loops[-1]
            return {"index": f"_i{n}", "first": f"(_i{n} == 0)", "last": f"(_r{n} == 0)"}[ref.keys[0]]
        if ref.kind == "this":
            item = f"_item{self.loops[-1]}"
            return f"lookup({item}, {ref.keys!r})" if ref.keys else item
        if not self.loops:
            return f"{_ROOT}.get({ref.keys[0]!r})" if len(ref.keys) == 1 else f"lookup({_ROOT}, {ref.keys!r})"
        scopes = ", ".join([*(f"_item{n}" for n in reversed(self.loops)), _ROOT])
        return f"mt_scoped(({scopes},), *{ref.keys!r})"

    def condition(self, node: mt.If) -> str:
        """The test of an {{#if}}/{{#unless}}; inside a loop it charges the budget with what
        the branch it picks costs (outside loops each branch runs at most once)."""
        cond = node.condition
        when_true, when_false = cost(node.body, len(self.loops)), cost(node.otherwise, len(self.loops))
        if node.negate:
            when_true, when_false = when_false, when_true
        charged = self.loops and (any(when_true) or any(when_false))
        charge = f", {_BUDGET}, {when_true!r}, {when_false!r}" if charged else ""
        left = self.operand(cond.left)
        if cond.op is None:
            test = f"mt_truthy({left}{charge})" if charge else f"truthy({left})"
        else:
            test = f"{'mt_compare' if charge else 'compare'}({left}, {cond.op!r}, {self.operand(cond.right)}{charge})"
        return f"not {test}" if node.negate else test

    def flush(self) -> None:
        if self.run:
            self.lines.append("    " * self.depth + f"o += ({', '.join(self.run)},)")
            self.run = []

    def line(self, text: str) -> None:
        self.flush()
        self.lines.append("    " * self.depth + text)

    def emit(self, nodes: list) -> None:
        for node in nodes:
            if isinstance(node, mt.Text):
                if node.text:
                    self.run.append(repr(node.text))
            elif isinstance(node, mt.Var):
                value = f"mt_out({self.operand(node.ref)}, {node.fallback!r}, {node.format!r}, {_BUDGET})"
                self.run.append(f"escape({value})" if self.escape else value)
            elif isinstance(node, mt.If):
                self.line(f"if {self.condition(node)}:")
                self.block(node.body)
                if node.otherwise:
                    self.line("else:")
                    self.block(node.otherwise)
            elif isinstance(node, mt.Each):
                source = self.operand(node.ref)
                n = len(self.loops) + 1
                costs = f"{cost(node.body, n)!r}, {cost(node.otherwise, n - 1)!r}"
                self.line(f"_l{n} = mt_loop({source}, {_BUDGET}, {costs})")
                self.line(f"for _i{n}, _r{n}, _item{n} in _l{n}:")
                self.loops.append(n)
                self.block(node.body)
                self.loops.pop()
                if node.otherwise:
                    self.line(f"if not _l{n}:")
                    self.block(node.otherwise)

    def block(self, nodes: list) -> None:
        self.depth += 1
        written = len(self.lines)
        self.emit(nodes)
        self.flush()
        if len(self.lines) == written:   # a block that writes nothing
            self.lines.append("    " * self.depth + "pass")
        self.depth -= 1


def to_python(nodes: list, mode: str) -> str:
    """The Python source for a parsed template (public so it can be read when debugging)."""
    generator = _Generator(mode)
    generator.emit(nodes)
    generator.flush()
    return "\n".join([f"def render({_ROOT}, {_BUDGET}):", "    o = []", *generator.lines, "    return o"])


# What generated code can reach: these functions and nothing else (no builtins).
_NAMESPACE = {"__builtins__": {}, "escape": markupsafe.escape, "lookup": lookup, "mt_scoped": mt_scoped,
              "mt_loop": mt_loop, "mt_out": mt_out, "truthy": truthy, "compare": compare,
              "mt_truthy": mt_truthy, "mt_compare": mt_compare}


def _function(nodes: list, mode: str):
    namespace = dict(_NAMESPACE)
    exec(compile(to_python(nodes, mode), "<merge template>", "exec"), namespace)
    return namespace["render"]


def _normalise_newlines(nodes: list) -> None:
    """CRLF and CR in template text become LF (as templates have always rendered), so
    both engines write the same characters (and the budget counts what is written)."""
    for node in nodes:
        if isinstance(node, mt.Text):
            node.text = _NEWLINE.sub("\n", node.text)
        elif isinstance(node, (mt.If, mt.Each)):
            _normalise_newlines(node.body)
            _normalise_newlines(node.otherwise)


def _depth(nodes: list) -> int:
    """How deep blocks nest."""
    depth = 0
    for node in nodes:
        if isinstance(node, (mt.If, mt.Each)):
            depth = max(depth, 1 + _depth(node.body), 1 + _depth(node.otherwise))
    return depth


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

    Templates are compiled to a Python function, unless their blocks nest deeper than
    COMPILED_MAX_DEPTH (Python compiles at most 20 nested loops and 100 indentation
    levels): those are interpreted from the parsed tree (up to MAX_NESTING_DEPTH; the
    interpreter recurses once per level). The interpreter calls the same value functions
    (lookup, mt_out, truthy, compare, mt_loop) with the same escaping and the same budget
    charges as the generated code, so the output is the same."""

    __slots__ = ("mode", "nodes", "_function", "digest")

    def __init__(self, source: str, mode: str, digest: str = "", *, engine: str | None = None):
        """`engine` ("python" or "interpreter") overrides the choice, for tests comparing them."""
        self.mode = mode
        self.digest = digest
        self.nodes = mt.parse(source)
        _normalise_newlines(self.nodes)
        if engine is None:
            engine = "python" if _depth(self.nodes) <= COMPILED_MAX_DEPTH else "interpreter"
        self._function = _function(self.nodes, mode) if engine == "python" else None

    @property
    def interpreted(self) -> bool:
        return self._function is None

    def render_parts(self, data: dict, budget: RenderBudget | None = None) -> list[str]:
        """The output for `data` as the pieces it is joined from: literal text as `str`,
        each value written as what the mode makes of it (in HTML, escaped `Markup`)."""
        budget = RenderBudget() if budget is None else budget
        if self._function is not None and isinstance(data, dict):
            return self._function(data, budget)
        out: list = []
        _interpret(self.nodes, data, [], markupsafe.escape if self.mode == "html" else str, budget, out)
        return out

    def render(self, data: dict, budget: RenderBudget | None = None) -> str:
        """The output for `data`; raises RenderBudgetExceeded past a limit of `budget`
        (a fresh default budget when none is given)."""
        return "".join(self.render_parts(data, budget))

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
    if mode not in ("html", "text"):
        raise ValueError(f"unknown mode {mode!r}")
    return _CACHE.get(source, mode)
