"""The source of ``odradek/`` as a reader meets it: layers import downward, no cycles, no outside citations.

Read from the source with ``ast``, deferred (function-level) imports and
``if TYPE_CHECKING:`` blocks included: a cycle hidden inside a function or
behind a type hint is still a cycle a reader must untangle.
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
    "registry": {"protocol", "storage"},
    "shares": {"protocol", "storage"},
    "broker": {"protocol", "storage", "offsets", "transactions", "registry", "shares"},
    "web": {"protocol", "storage", "offsets", "transactions", "registry", "shares", "broker"},
    "pipeline": {"protocol", "storage", "offsets", "transactions", "shares"},
    "testing": {"protocol", "storage", "offsets", "transactions", "registry", "shares", "broker", "web"},
}


# where things are wired: BrokerApp and its CLI (in broker/ but above every layer they wire,
# web included) and the testing package; only these import BrokerApp
WIRING = ("odradek.broker.app", "odradek.broker.cli", "odradek.testing")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, modules: set[str], name: str | None = None) -> set[str]:
    """The odradek modules ``path`` (module ``name``) imports: at import time, in a function or for type checking."""
    name = name or module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
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
    """Module -> the modules it imports, each with the package ``__init__`` the import runs first
    (importing ``a.b.c`` from outside ``a.b`` runs ``a/b/__init__.py``)."""
    paths = sorted(ROOT.rglob("*.py"))
    modules = {module_name(p) for p in paths}
    edges = {}
    for path in paths:
        name = module_name(path)
        own = set(_ancestors(name)) | {name}
        targets = imports_of(path, modules)
        edges[name] = targets | {a for t in targets for a in _ancestors(t) if a not in own and a in modules}
    return edges


def _ancestors(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in ALLOWED else None


def test_layers_only_import_downward():
    """Every layer imports only those below it; the wiring (``WIRING``) sits above all it wires."""
    wrong = []
    for module, imports in graph().items():
        own = layer(module)
        if own is None or module.startswith(WIRING):
            continue
        for target in imports:
            other = layer(target)
            if other is not None and other != own and other not in ALLOWED[own]:
                wrong.append(f"{module} -> {target}")
    assert wrong == []


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every set of modules that import each other in a loop (Tarjan's strongly connected components).

    A package and its own modules are no loop (``__init__`` importing a submodule).
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def targets(module: str) -> list[str]:
        return sorted(t for t in edges[module]
                      if t != module.rpartition(".")[0] and module != t.rpartition(".")[0])

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in targets(module):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return found


def test_no_import_circles():
    """No modules import each other in a loop, however the import is written."""
    assert circles(graph()) == []


def test_circles_are_found_behind_type_hints_and_in_functions(tmp_path):
    edges = {"a.x": {"a.y"}, "a.y": {"a.z"}, "a.z": {"a.x"}, "a": {"a.x"}, "a.w": set()}
    assert circles(edges) == [["a.x", "a.y", "a.z"]]
    source = tmp_path / "m.py"
    source.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from odradek.q import A\n"
                      "def f():\n    import odradek.r\n")
    assert imports_of(source, {"odradek.q", "odradek.r"}, "odradek.m") == {"odradek.q", "odradek.r"}


def test_comments_cite_nothing_outside_the_repository():
    """Comments cite Kafka's classes and methods or our docs/, never sections of an outside document."""
    # the reference material beside a checkout: design page, fact sheets, client notes, spec copies
    outside = re.compile(r"§|[a-z]+-facts\b|client-needs|record-batch-v2|DESIGN\.md|shared/|kafka-spec")
    found = [f"{path.relative_to(ROOT.parent)}:{number}"
             for path in sorted(ROOT.rglob("*.py"))
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if outside.search(line)]
    assert found == []


# --- what a module uses of the running broker: named in its signature, wired by BrokerApp ---------


def services_protocols() -> dict[str, dict[str, type]]:
    """{module: {name: class}} of every ``...Services`` protocol: what a module uses of the broker."""
    import importlib
    from typing import Protocol

    found: dict[str, dict[str, type]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = [n.name for n in tree.body if isinstance(n, ast.ClassDef) and n.name.endswith("Services")]
        if names:
            module = importlib.import_module(module_name(path))
            classes = {n: getattr(module, n) for n in names}
            assert all(Protocol in c.__mro__ for c in classes.values()), module.__name__
            found[module.__name__] = classes
    return found


def members(protocol: type) -> set[str]:
    names: set[str] = set()
    for cls in protocol.__mro__:
        if cls.__name__.endswith("Services"):
            names |= set(cls.__dict__.get("__annotations__", {}))
            names |= {n for n, v in vars(cls).items()
                      if not n.startswith("__") and (callable(v) or isinstance(v, property))}
    return names


def _annotation_name(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return node.id if isinstance(node, ast.Name) else None


def _uses(tree: ast.AST, protocols: dict[str, set[str]]) -> list[tuple[str, str, int]]:
    """(protocol, attribute, line) for every ``param.attr`` (or ``self.x.attr`` where ``self.x = param``)
    read or written through a parameter annotated with one of ``protocols``."""
    found = []
    classes = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    held: dict[tuple[int, str], str] = {}  # (class node id, self attribute) -> protocol
    for cls in classes:
        for fn in (n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
            params = {a.arg: _annotation_name(a.annotation) for a in fn.args.args + fn.args.kwonlyargs}
            for node in ast.walk(fn):
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) \
                        and params.get(node.value.id) in protocols:
                    for target in node.targets:
                        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                                and target.value.id == "self":
                            held[(id(cls), target.attr)] = params[node.value.id]
    for fn in functions:
        params = {a.arg: _annotation_name(a.annotation) for a in fn.args.args + fn.args.kwonlyargs}
        typed = {name: p for name, p in params.items() if p in protocols}
        owner = next((c for c in classes if fn in c.body), None)
        for node in ast.walk(fn):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in (
                    "getattr", "hasattr", "setattr") and len(node.args) > 1 \
                    and isinstance(node.args[0], ast.Name) and node.args[0].id in typed \
                    and isinstance(node.args[1], ast.Constant):
                found.append((typed[node.args[0].id], node.args[1].value, node.lineno))
            if not isinstance(node, ast.Attribute):
                continue
            base = node.value
            if isinstance(base, ast.Name) and base.id in typed:
                found.append((typed[base.id], node.attr, node.lineno))
            elif owner is not None and isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name) \
                    and base.value.id == "self" and (id(owner), base.attr) in held:
                found.append((held[(id(owner), base.attr)], node.attr, node.lineno))
            # a local alias (``app = self.app``) is followed too
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                    and isinstance(node.value, ast.Attribute) and isinstance(node.value.value, ast.Name) \
                    and node.value.value.id == "self" and owner is not None \
                    and (id(owner), node.value.attr) in held:
                alias, protocol = node.targets[0].id, held[(id(owner), node.value.attr)]
                found += [(protocol, n.attr, n.lineno) for n in ast.walk(fn)
                          if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == alias]
    return found


def _parsed(module: str) -> ast.AST:
    path = ROOT.parent / (module.replace(".", "/") + ".py")
    if not path.exists():
        path = ROOT.parent / module.replace(".", "/") / "__init__.py"
    return ast.parse(path.read_text(encoding="utf-8"))


def _outside_the_wiring() -> list[tuple[str, ast.AST]]:
    """(module, parsed source) of every module but the wiring's."""
    return [(module_name(path), ast.parse(path.read_text(encoding="utf-8"))) for path in sorted(ROOT.rglob("*.py"))
            if not module_name(path).startswith(WIRING)]


def test_only_the_wiring_imports_broker_app():
    """``BrokerApp`` is where things are wired, not a service modules import: they name what they use."""
    importers = [name for name, tree in _outside_the_wiring() for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and any(a.name == "BrokerApp" for a in node.names)]
    assert importers == []


def test_a_module_touches_only_what_its_signature_names():
    """Every attribute a module reads or sets through a ``...Services`` parameter is a member of that
    protocol, so the signature says what the code touches."""
    outside = []
    for module, classes in services_protocols().items():
        protocols = {name: members(cls) for name, cls in classes.items()}
        outside += [f"{module}:{line} {protocol}.{attr}"
                    for protocol, attr, line in _uses(_parsed(module), protocols)
                    if attr not in protocols[protocol]]
    assert outside == []


def test_a_protocol_names_only_what_its_module_uses():
    """A ``...Services`` protocol's own members are each used by its module: the signature does not
    claim more than the code touches (a protocol may extend another it hands its parameter on to)."""
    unused = []
    for module, classes in services_protocols().items():
        uses = _uses(_parsed(module), {n: members(c) for n, c in classes.items()})
        for name, cls in classes.items():
            own = set(cls.__dict__.get("__annotations__", {})) | {
                n for n, v in vars(cls).items() if not n.startswith("__") and callable(v)}
            # used through this protocol, or through one that extends it in the same module
            users = {n for n, c in classes.items() if cls in c.__mro__}
            used = {attr for protocol, attr, _line in uses if protocol in users}
            unused += [f"{module}.{name}.{member}" for member in sorted(own - used)]
    assert unused == []


def test_broker_app_provides_every_service(tmp_path):
    from odradek.broker.app import BrokerApp
    from odradek.broker.config import Config

    app = BrokerApp(Config.load(None, environ={}, overrides={"log.dirs": str(tmp_path)}))
    missing = [f"{module}.{name}.{member}" for module, classes in services_protocols().items()
               for name, cls in classes.items() for member in sorted(members(cls)) if not hasattr(app, member)]
    assert missing == []


def test_every_app_parameter_names_its_services():
    """Outside the wiring, a parameter holding the broker (``app``) is typed by a ``...Services``
    protocol, so no function takes the whole broker unnamed."""
    untyped = []
    for name, tree in _outside_the_wiring():
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                untyped += [f"{name}.{fn.name}" for a in fn.args.args + fn.args.kwonlyargs
                            if a.arg == "app" and not (_annotation_name(a.annotation) or "").endswith("Services")]
    assert untyped == []
