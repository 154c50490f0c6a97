"""What a template's loops cost in RenderBudget steps (pipelines/templates/render_budget.py): the
charge both render engines make as they run, and the part of it that is certain before
rendering, from the request's template_data alone, so a send that could only fail is
refused at the API instead."""

from __future__ import annotations

from pipelines.templates import merge_tags as mt
from pipelines.templates.merge_values import lookup


def cost(nodes: list, loop_depth: int) -> tuple[int, int]:
    """What `nodes` themselves cost each time they run, as RenderBudget.spend takes it
    (blocks among them charge their own bodies): (steps: one per tag, plus one per
    enclosing loop item a bare name is looked up through; literal characters)."""
    steps = chars = 0
    for node in nodes:
        if isinstance(node, mt.Text):
            chars += len(node.text)
            continue
        refs = (node.condition.left, node.condition.right) if isinstance(node, mt.If) else (node.ref,)
        steps += 1 + sum(loop_depth for ref in refs if isinstance(ref, mt.Ref) and ref.kind == "root")
    return steps, chars


class _Certain:
    """Walks the loops that run whatever the contact and the conditions are: `{{#each}}`
    over a list the request gives (a root name in `known`), not inside an `{{#if}}` and
    not shadowed by a field of an enclosing loop's items (which would be read instead)."""

    def __init__(self, known: dict, limit: int):
        self.known, self.limit, self.steps = known, limit, 0
        self.culprit: tuple[str, ...] | None = None

    def shadowed(self, key: str, enclosing: list[list]) -> bool:
        return any(isinstance(item, dict) and key in item for items in enclosing for item in items)

    def walk(self, nodes: list, enclosing: list[list], runs: int) -> None:
        """`nodes` run `runs` times inside the `enclosing` loops' lists."""
        for node in nodes:
            if self.steps > self.limit or not isinstance(node, mt.Each):
                continue
            ref = node.ref
            if ref.kind != "root" or ref.keys[0] not in self.known or self.shadowed(ref.keys[0], enclosing):
                continue
            items = lookup(self.known, ref.keys)
            if not isinstance(items, list) or not items:
                continue
            body_steps, _ = cost(node.body, len(enclosing) + 1)
            self.steps += runs * len(items) * (1 + body_steps)
            if self.steps > self.limit:
                self.culprit = ref.keys
                return
            self.walk(node.body, [*enclosing, items], runs * len(items))


def certain_steps(parts: list[list], known: dict, limit: int) -> tuple[int, tuple[str, ...] | None]:
    """(steps the loops of the parsed `parts` of one message take whatever the contact and
    the conditions, counted until past `limit`; the path in `known` of the list that took
    them past it, or None). The steps are a lower bound of what rendering charges, so what
    goes past the limit here could only fail later."""
    certain = _Certain(known, limit)
    for nodes in parts:
        certain.walk(nodes, [], 1)
    return certain.steps, certain.culprit


def certain_overrun(parts: list[list], known: dict, limit: int) -> tuple[str, ...] | None:
    """The path of the list that certainly takes the loops past `limit` steps, or None."""
    return certain_steps(parts, known, limit)[1]
