"""The bar of issue 11, kept: outside tests/support no test sleeps half a second or more.
A "nothing happened" check waits on a barrier (tests/support/barriers.py) and a wait for a
clock polls the condition it waits for (tests/support/polling.py). At most two sleeps may
stay, each with a `# bare sleep:` comment on its line saying why nothing else can serve.

Read from the AST: a call to `sleep` (time, asyncio or imported bare) whose argument
mentions a number of at least 0.5 s, written out or through a module-level constant,
except as a divisor (a rate); `wait_for_timeout` (Playwright) counts in milliseconds."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
HELPERS = TESTS / "support"
THRESHOLD_SECONDS = 0.5
ALLOWED_BARE = 2
MARK = "# bare sleep:"


def module_constants(tree: ast.Module) -> dict[str, float]:
    values = {}
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Constant):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name) and isinstance(node.value.value, (int, float)):
                    values[target.id] = float(node.value.value)
    return values


def numbers(node: ast.AST, constants: dict[str, float]):
    """Every number the expression is built from, leaving out divisors."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.FloorDiv)):
        yield from numbers(node.left, constants)
        return
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        yield float(node.value)
    elif isinstance(node, ast.Name) and node.id in constants:
        yield constants[node.id]
    for child in ast.iter_child_nodes(node):
        yield from numbers(child, constants)


def called_name(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    if isinstance(call.func, ast.Name):
        return call.func.id
    return None


def long_sleeps(path: Path):
    """(line number, source line) of each sleep of half a second or more in the file."""
    source = path.read_text()
    tree = ast.parse(source)
    constants = module_constants(tree)
    lines = source.splitlines()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        name = called_name(node)
        if name == "sleep":
            threshold = THRESHOLD_SECONDS
        elif name == "wait_for_timeout":
            threshold = THRESHOLD_SECONDS * 1000
        else:
            continue
        if any(n >= threshold for n in numbers(node.args[0], constants)):
            yield node.lineno, lines[node.lineno - 1].strip()


def test_no_sleep_of_half_a_second_or_more_outside_the_helpers():
    unmarked, marked = [], []
    for path in sorted(TESTS.rglob("*.py")):
        if HELPERS in path.parents:
            continue
        for lineno, line in long_sleeps(path):
            where = f"{path.relative_to(TESTS.parent)}:{lineno}: {line}"
            (marked if MARK in line else unmarked).append(where)
    assert unmarked == [], "sleeps to replace with a barrier or polling:\n" + "\n".join(unmarked)
    assert len(marked) <= ALLOWED_BARE, f"more than {ALLOWED_BARE} bare sleeps:\n" + "\n".join(marked)


def test_the_checker_sees_literal_constant_and_computed_sleeps(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import asyncio, time\nWAIT = 2\nRATE = 10\n"
        "time.sleep(1)\n"
        "time.sleep(WAIT)\n"
        "asyncio.sleep(max(0.0, WAIT - time.monotonic()))\n"
        "page.wait_for_timeout(800)\n"
        "time.sleep(0.2)\n"
        "time.sleep(max(0.0, i / RATE - time.monotonic()))\n"
        "page.wait_for_timeout(100)\n")
    assert [n for n, _ in long_sleeps(sample)] == [4, 5, 6, 7]
