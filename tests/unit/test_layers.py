"""The source of ``odradek/`` as a reader meets it: layers import downward, no cycles, no outside citations.

Read from the source with ``ast``, deferred (function-level) imports included
and ``if TYPE_CHECKING:`` blocks left out: a cycle hidden inside a function is
still a cycle a reader must untangle.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import odradek

ROOT = Path(odradek.__file__).parent

# what each layer may import (besides itself), per docs/ARCHITECTURE.md
ALLOWED = {
    "protocol": set(),
    "storage": {"protocol"},
    "offsets": {"protocol", "storage"},
    "transactions": {"protocol", "storage", "offsets"},
    "broker": {"protocol", "storage", "offsets", "transactions"},
    "pipeline": {"protocol", "storage", "offsets"},
    "testing": {"protocol", "storage", "offsets", "transactions", "broker"},
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def runtime_imports(path: Path, modules: set[str]) -> set[str]:
    """The odradek modules ``path`` imports when it runs (at import time or in a function)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in modules else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return {m for m in found if m in modules and m != name}


def graph() -> dict[str, set[str]]:
    paths = sorted(ROOT.rglob("*.py"))
    modules = {module_name(p) for p in paths}
    return {module_name(p): runtime_imports(p, modules) for p in paths}


def layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in ALLOWED else None


def test_layers_only_import_downward():
    wrong = []
    for module, imports in graph().items():
        own = layer(module)
        if own is None:
            continue
        for target in imports:
            other = layer(target)
            if other is not None and other != own and other not in ALLOWED[own]:
                wrong.append(f"{module} -> {target}")
    assert wrong == []


def test_no_import_cycles():
    edges = graph()
    cycles = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def walk(module: str) -> None:
        state[module] = 1
        path.append(module)
        for target in sorted(edges[module]):
            if target == module.rpartition(".")[0] or module == target.rpartition(".")[0]:
                continue  # a package and its own modules (``__init__`` importing a submodule)
            if state.get(target) == 1:
                cycles.append(" -> ".join(path[path.index(target):] + [target]))
            elif target not in state:
                walk(target)
        path.pop()
        state[module] = 2

    for module in sorted(edges):
        if module not in state:
            walk(module)
    assert cycles == []


def test_comments_cite_nothing_outside_the_repository():
    """Comments cite Kafka's classes and methods or our docs/, never sections of an outside document."""
    # the reference material beside a checkout: design page, fact sheets, client notes, spec copies
    outside = re.compile(r"§|[a-z]+-facts\b|client-needs|record-batch-v2|DESIGN\.md|shared/|kafka-spec")
    found = [f"{path.relative_to(ROOT.parent)}:{number}"
             for path in sorted(ROOT.rglob("*.py"))
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if outside.search(line)]
    assert found == []
