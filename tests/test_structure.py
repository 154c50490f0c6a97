"""The layering and the registries, read from the source (AST, no services): what DESIGN.md
and issue 11 ask of the code's shape, kept from coming back."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
from radon.complexity import cc_rank, cc_visit

ROOT = Path(__file__).resolve().parent.parent
PRODUCTION = ("front", "actors", "pipelines", "mongo", "ops")
OURS = set(PRODUCTION) | {"tests"}

LOCAL_IMPORTS_PENDING: set[str] = set()
IMPORT_MODULE_PENDING: set[str] = set()
STALE_POINTERS_PENDING: set[tuple[str, str]] = set()
API_ERRORS_PENDING: set[str] = set()
ADAPTER_IMPORTS_PENDING: set[str] = set()

LOCAL_IMPORT_NOTE = "# local import:"


def _production_files() -> list[Path]:
    return sorted(p for top in PRODUCTION for p in (ROOT / top).rglob("*.py"))


@cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported_modules(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, absolute module, names) for every import in the file, relative ones resolved."""
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            names = [alias.name for alias in node.names]
            found.append((node.lineno, module, names))
            # `from pkg import submodule` imports pkg.submodule
            found.extend((node.lineno, f"{module}.{name}", []) for name in names)
    return found


def test_no_module_names_as_strings():
    offenders = [f"{_rel(p)}:{node.lineno}" for p in _production_files() if _rel(p) not in IMPORT_MODULE_PENDING
                 for node in ast.walk(_tree(p))
                 if isinstance(node, ast.Attribute) and node.attr == "import_module"
                 or isinstance(node, (ast.Import, ast.ImportFrom)) and any(
                     a.name == "import_module" for a in node.names)]
    assert offenders == [], "registries list imported objects, not module names: " + ", ".join(offenders)


def _says_why(lines: list[str], node: ast.stmt) -> bool:
    """The note is on the import's own lines or in the comment lines right above it."""
    first = node.lineno
    while first > 1 and lines[first - 2].strip().startswith("#"):
        first -= 1
    return any(LOCAL_IMPORT_NOTE in lines[n - 1] for n in range(first, node.end_lineno + 1))


def test_function_local_imports_say_why():
    offenders = []
    for path in _production_files():
        if _rel(path) in LOCAL_IMPORTS_PENDING:
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        for func in ast.walk(_tree(path)):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(func):
                if isinstance(node, (ast.Import, ast.ImportFrom)) and not _says_why(lines, node):
                    offenders.append(f"{_rel(path)}:{node.lineno}")
    assert offenders == [], ("import at the top, or say why not with a "
                             f"'{LOCAL_IMPORT_NOTE} <why>' comment: " + ", ".join(sorted(set(offenders))))


# a file name: `pipelines/messages/mime.py`, or relative to the folder it is written in (`classify.py`)
_PATH = re.compile(r"(?<![\w./-])(\w[\w./-]*\.(?:py|sh|toml|md))\b")


def _comment_and_docstring_text(path: Path) -> list[tuple[int, str]]:
    text = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if "#" in line:
            text.append((lineno, line[line.index("#"):]))
    for node in ast.walk(_tree(path)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                text.append((body[0].lineno, body[0].value.value))
    return text


def test_files_named_in_readme_and_comments_exist():
    missing = []
    sources = [(doc, list(enumerate(doc.read_text(encoding="utf-8").splitlines(), 1)))
               for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]]
    sources += [(p, _comment_and_docstring_text(p)) for p in _production_files()]
    for path, texts in sources:
        for lineno, text in texts:
            bases = [ROOT, path.parent, path.parent.parent, *(ROOT / top for top in PRODUCTION)]
            for named in _PATH.findall(text):
                if not any((base / named).exists() for base in bases) \
                        and (_rel(path), named) not in STALE_POINTERS_PENDING:
                    missing.append(f"{_rel(path)}:{lineno} names {named}")
    assert missing == [], "files named that do not exist: " + "; ".join(missing)


def _files_under(top: str) -> list[Path]:
    return sorted((ROOT / top).rglob("*.py"))


def test_store_layer_holds_no_workflow_and_raises_no_api_error():
    from pipelines.core import errors

    api_errors = {name for name, value in vars(errors).items()
                  if isinstance(value, type) and issubclass(value, errors.PostroomError)}
    offenders = []
    for path in _files_under("mongo"):
        for lineno, module, names in _imported_modules(path):
            if module == "pipelines.workflows" or module.startswith("pipelines.workflows."):
                offenders.append(f"{_rel(path)}:{lineno} imports {module}")
            if module == "pipelines.core.errors" and _rel(path) not in API_ERRORS_PENDING:
                offenders.extend(f"{_rel(path)}:{lineno} imports {name}" for name in names if name in api_errors)
    assert offenders == [], "mongo/ is queries and guarded writes only: " + ", ".join(offenders)


def test_pure_rules_import_only_pipelines():
    """Rules (pipelines/ outside workflows/ and adapters/) take values and return values:
    they import neither the store, the actors, a workflow nor an I/O adapter."""
    offenders = []
    for path in _files_under("pipelines"):
        area = path.relative_to(ROOT / "pipelines").parts[0]
        if area in ("workflows", "adapters"):
            continue
        for lineno, module, _names in _imported_modules(path):
            top = module.split(".")[0]
            if top in OURS - {"pipelines"} or module.startswith(("pipelines.workflows", "pipelines.adapters")) \
                    and _rel(path) not in ADAPTER_IMPORTS_PENDING:
                offenders.append(f"{_rel(path)}:{lineno} imports {module}")
    assert offenders == [], "pipelines/ outside workflows/ and adapters/ is pure: " + ", ".join(offenders)


def test_adapters_know_no_workflow_and_no_store():
    offenders = [f"{_rel(path)}:{lineno} imports {module}"
                 for path in _files_under("pipelines/adapters")
                 for lineno, module, _names in _imported_modules(path)
                 if module.split(".")[0] in OURS - {"pipelines"}
                 or module.startswith(("pipelines.workflows", "pipelines.adapters."))
                 and not module.startswith("pipelines.adapters." + path.stem)]
    assert offenders == [], "adapters do I/O for workflows and import only rules: " + ", ".join(offenders)


def _actor_names(path: Path) -> set[str]:
    """Names the file imports from an actors module (the actors it could call `.send` on)."""
    names = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("actors"):
            names.update(alias.asname or alias.name for alias in node.names)
    return names


def test_only_the_publisher_sends_to_the_broker():
    offenders = []
    for path in _production_files():
        if _rel(path) == "actors/publish.py":
            continue
        actors = _actor_names(path)
        for node in ast.walk(_tree(path)):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            target = node.func.value
            if node.func.attr == "send_with_options" or (
                    node.func.attr == "send" and isinstance(target, ast.Name) and target.id in actors):
                offenders.append(f"{_rel(path)}:{node.lineno}")
    assert offenders == [], "publish through actors/publish.py: " + ", ".join(offenders)


@pytest.mark.parametrize("check", [_imported_modules, _comment_and_docstring_text])
def test_the_checks_read_something(check):
    """Guards the guards: each reader finds what it looks for in a file known to have it."""
    assert check(ROOT / "ops" / "scheduler.py")


# mongo/ modules whose writes are a request's own bookkeeping, not a use case: the rate
# windows of front/auth.py, the Idempotency-Key records of front/idempotency.py, the front
# process's heartbeat in front/app.py
FRONT_BOOKKEEPING_STORES = {"mongo.rate_windows", "mongo.idempotency", "mongo.processes"}


def test_front_makes_no_store_writes():
    """Every store write a request causes goes through a workflow (pipelines/workflows/):
    front/ reads through mongo/ but neither calls nor hands on (`delete_route(…, store.delete)`)
    a mongo/ write, nor writes to a collection itself. A mongo/ function is a write when it
    calls a collection's insert_*/update_*/delete_*/find_one_and_*/bulk_write/replace_one,
    or another mongo/ write: read from the AST, so a new write is known without a list."""
    writes_directly = re.compile(r"^(insert_|update_|delete_|find_one_and_|bulk_write$|replace_one$)")

    def aliases(path: Path) -> dict[str, str]:
        """Local name → the dotted module or function it was imported as."""
        package = _module_name(path).split(".")[:None if path.name == "__init__.py" else -1]
        named = {}
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Import):
                named.update({alias.asname or alias.name: alias.name for alias in node.names})
            elif isinstance(node, ast.ImportFrom):
                base = package[:len(package) - node.level + 1] if node.level else []
                module = ".".join(base + ([node.module] if node.module else []))
                named.update({alias.asname or alias.name: f"{module}.{alias.name}" for alias in node.names})
        return named

    def dotted(node: ast.expr, named: dict[str, str], module: str, defined: set[str]) -> str | None:
        """What `node` names: `f` (imported, or defined in `module`), `x.f` or `mongo.x.f`."""
        if isinstance(node, ast.Name):
            return named.get(node.id) or (f"{module}.{node.id}" if node.id in defined else None)
        if isinstance(node, ast.Attribute):
            owner = dotted(node.value, named, module, set()) if not isinstance(node.value, ast.Name) \
                else named.get(node.value.id, node.value.id)
            return f"{owner}.{node.attr}" if owner else None
        return None

    calls: dict[str, set[str]] = {}
    writes = set()
    for path in _files_under("mongo"):
        module, named = _module_name(path), aliases(path)
        functions = [f for f in _tree(path).body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
        defined = {f.name for f in functions}
        for function in functions:
            name = f"{module}.{function.name}"
            called = [n.func for n in ast.walk(function) if isinstance(n, ast.Call)]
            if any(isinstance(f, ast.Attribute) and writes_directly.match(f.attr) for f in called):
                writes.add(name)
            calls[name] = {dotted(f, named, module, defined) for f in called} - {None}
    while grown := {name for name, called in calls.items() if name not in writes and called & writes}:
        writes |= grown
    assert {"mongo.tags.create", "mongo.lists.create"} <= writes and "mongo.tags.get" not in writes

    offenders = []
    for path in _files_under("front"):
        named = aliases(path)
        for node in ast.walk(_tree(path)):
            if not isinstance(node, (ast.Name, ast.Attribute)):
                continue
            target = dotted(node, named, _module_name(path), set()) or ""
            if target in writes and target.rsplit(".", 1)[0] not in FRONT_BOOKKEEPING_STORES:
                offenders.append(f"{_rel(path)}:{node.lineno} {target}")
            elif isinstance(node, ast.Attribute) and writes_directly.match(node.attr) \
                    and target.split(".")[0] not in OURS:  # a collection's own write: `db().x.insert_one`
                offenders.append(f"{_rel(path)}:{node.lineno} .{node.attr}")
    assert offenders == [], "front/ writes through pipelines/workflows/: " + ", ".join(sorted(set(offenders)))


def _complex_functions() -> dict[str, str]:
    """`file:function` → radon's cyclomatic grade, for every function and method of
    production code graded D (21+) or worse."""
    graded = {}
    for path in _production_files():
        for block in cc_visit(path.read_text(encoding="utf-8")):
            for function in getattr(block, "methods", [block]):  # a class: its methods
                rank = cc_rank(function.complexity)
                if rank >= "D":
                    graded[f"{_rel(path)}:{function.fullname}"] = f"{rank} ({function.complexity})"
    return graded


def test_no_function_is_graded_d_or_worse():
    """A decision with many outcomes is a classifier plus one small function per outcome
    (STYLE.md 21), not one function of 30 branches (radon's cyclomatic grade D starts at 21)."""
    assert _complex_functions() == {}


LINTED = ("front", "actors", "pipelines", "mongo", "ops", "tests", "bench")


def test_ruff_finds_nothing():
    """pyproject.toml's [tool.ruff] rules (pycodestyle, pyflakes, bugbear, isort, pyupgrade)
    hold over every folder of ours: a finding is fixed, or its rule is ignored with why."""
    ruff = Path(sys.executable).parent / "ruff"
    result = subprocess.run([str(ruff), "check", "--no-cache", *LINTED], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
