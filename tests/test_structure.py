"""The source tree's shape (issue #22): no module in the packages over 700 lines, no
import cycle between the packages' modules, and the prover's layers (issue #39) imported
only downwards.

Imports are read with ``ast`` (nothing is imported): every import statement, lazy ones
inside functions included (only ``if TYPE_CHECKING:`` blocks are skipped), resolved to the
modules of ``steadfast.*`` they name (``from X import Y`` is an edge to ``X.Y`` when that
is a module, else to ``X``).  A cycle among those edges is two concepts that each need the
other -- a lazy import only hides it from the interpreter, not from a reader.
"""
from __future__ import annotations

import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# folder -> import name (pyproject's package-dir)
PACKAGES = {"steadfast": "steadfast", "air": "steadfast.air", "kernels": "steadfast.kernels",
            "prover": "steadfast.prover", "verifier": "steadfast.verifier",
            "rv32": "steadfast.rv32"}
MAX_LINES = 700


def _modules() -> dict[str, str]:
    """import name -> path, for every .py of the packages (subpackages included)."""
    out = {}
    for folder, name in PACKAGES.items():
        base = os.path.join(ROOT, folder)
        if not os.path.isdir(base):
            continue
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            rel = os.path.relpath(dirpath, base)
            pkg = name if rel == "." else name + "." + rel.replace(os.sep, ".")
            for f in sorted(filenames):
                if not f.endswith(".py"):
                    continue
                mod = pkg if f == "__init__.py" else pkg + "." + f[:-3]
                out[mod] = os.path.join(dirpath, f)
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(body):
    """Every import statement of a module -- at module level, in class bodies and in
    function bodies alike (a lazy import inside a function is still a dependency: a cycle
    through one is a circle the design has not resolved) -- except ``if TYPE_CHECKING:``
    blocks, which never run."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _import_nodes(node.orelse)
        else:
            yield from _import_nodes(ast.iter_child_nodes(node))


def _edges(mods: dict[str, str]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read(), path)
        is_pkg = path.endswith("__init__.py")
        for node in _import_nodes(tree.body):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                if node.level:
                    parts = mod.split(".")
                    base = parts if is_pkg else parts[:-1]
                    base = base[:len(base) - (node.level - 1)]
                    src = ".".join(base + ([node.module] if node.module else []))
                else:
                    src = node.module or ""
                for a in node.names:
                    targets.append(f"{src}.{a.name}" if f"{src}.{a.name}" in mods else src)
            for t in targets:
                # the longest known module prefix of t
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                if t and t != mod:
                    graph[mod].add(t)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def test_no_module_over_700_lines():
    long = []
    for mod, path in _modules().items():
        with open(path, encoding="utf-8") as fh:
            n = sum(1 for _ in fh)
        if n > MAX_LINES:
            long.append(f"{os.path.relpath(path, ROOT)}: {n} lines")
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_no_import_cycle():
    cycles = _cycles(_edges(_modules()))
    assert not cycles, f"import cycles between modules: {cycles}"


def test_the_cycle_finder_finds_cycles():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_edges_resolve_relative_and_absolute_imports(tmp_path):
    mods = _modules()
    graph = _edges(mods)
    # a known edge either way it is written
    assert "steadfast.air.builder" in graph
    assert any(t.startswith("steadfast.air") for t in graph["steadfast.rv32.tables"])


SUBPACKAGES = {"air", "kernels", "prover", "verifier", "rv32"}


def test_imports_between_the_packages_resolve_by_path():
    """Inside the packages, imports of ``steadfast.<package>`` are relative, so that the
    source tree resolves as it reads (an editor, a type checker or a static import graph
    on a fresh clone finds ``..kernels`` next to ``prover/`` -- there is no
    ``steadfast/kernels`` folder); the absolute names are the installed, public ones.
    ``steadfast`` itself (``steadfast.errors``, ``__version__``) is a real folder and may
    be named absolutely."""
    absolute, unresolved = [], []
    for mod, path in _modules().items():
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read(), path)
        here = os.path.dirname(path)
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for name in names:
                parts = name.split(".")
                if len(parts) > 1 and parts[0] == "steadfast" and parts[1] in SUBPACKAGES:
                    absolute.append(f"{os.path.relpath(path, ROOT)}:{node.lineno}: {name}")
                    break
            if isinstance(node, ast.ImportFrom) and node.level:
                base = here
                for _ in range(node.level - 1):
                    base = os.path.dirname(base)
                target = os.path.join(base, *(node.module or "").split("."))
                found = (os.path.isfile(target + ".py")
                         or os.path.isfile(os.path.join(target, "__init__.py")))
                if node.module is None:      # from .. import name: each name by path
                    found = all(os.path.isfile(os.path.join(base, a.name + ".py"))
                                or os.path.isdir(os.path.join(base, a.name))
                                or os.path.isfile(os.path.join(base, "__init__.py"))
                                for a in node.names)
                if not found:
                    unresolved.append(f"{os.path.relpath(path, ROOT)}:{node.lineno}")
    assert not absolute, f"absolute imports of steadfast.<package> inside the packages: {absolute}"
    assert not unresolved, f"relative imports that do not resolve by path: {unresolved}"


# The prover's layers (issue #39), bottom first: a module imports only from its own layer
# and the layers below (lazy imports included).  docs/design.md "The prover's layers".
PROVER_LAYERS = (("common",), ("core",), ("device",), ("engine",), ("programs",),
                 ("blocks",), ("api", "service"), ("cluster",), ("cli",), ("__main__",))


def _prover_layer(mod: str) -> int | None:
    """The layer index of a steadfast.prover module (the package's __init__ above all),
    None when no layer names it."""
    if mod == "steadfast.prover":
        return len(PROVER_LAYERS)
    top = mod.split(".")[2]
    return next((i for i, names in enumerate(PROVER_LAYERS) if top in names), None)


def _upward(graph: dict[str, set[str]]) -> tuple[list[str], list[str]]:
    """(the prover modules in no layer, the imports that point to a higher layer)."""
    unplaced, up = [], []
    for m in sorted(graph):
        if not (m == "steadfast.prover" or m.startswith("steadfast.prover.")):
            continue
        lm = _prover_layer(m)
        if lm is None:
            unplaced.append(m)
            continue
        for t in sorted(graph[m]):
            if t.startswith("steadfast.prover.") or t == "steadfast.prover":
                lt = _prover_layer(t)
                if lt is not None and lt > lm:
                    up.append(f"{m} -> {t}")
    return unplaced, up


def test_the_prover_layers_import_only_downwards():
    unplaced, up = _upward(_edges(_modules()))
    assert not unplaced, f"prover modules in no layer (add them to PROVER_LAYERS): {unplaced}"
    assert not up, "imports of a higher layer:\n" + "\n".join(up)


def test_the_layer_check_sees_an_upward_import():
    graph = {"steadfast.prover.core.rounds": {"steadfast.prover.device.pipeline"},
             "steadfast.prover.device.pipeline": {"steadfast.prover.core.rounds"},
             "steadfast.prover.misc": set()}
    unplaced, up = _upward(graph)
    assert unplaced == ["steadfast.prover.misc"]
    assert up == ["steadfast.prover.core.rounds -> steadfast.prover.device.pipeline"]


# The protocol core (issue #24): the AIR language, the kernels, the verifier and the
# prover's protocol modules prove and check any AIRs; only the block- and program-level
# API and the CLI know a machine.
CORE_PROVER = ("common", "core", "device", "engine")      # packages of the prover, whole


def _core(mods: dict[str, str]) -> list[str]:
    out = [m for m in mods if m.split(".")[1:2] in (["air"], ["kernels"], ["verifier"])]
    prover = [m for m in mods if m.split(".")[1:2] == ["prover"] and m.split(".")[2:3]
              and m.split(".")[2] in CORE_PROVER]
    return sorted(out) + sorted(prover)


MACHINES = ("rv32",)


def _machine(mod: str) -> bool:
    return mod.split(".")[1:2] in ([m] for m in MACHINES)


def test_the_protocol_core_imports_no_machine():
    """air/, kernels/, verifier/ and the prover's protocol modules do not import the
    machine (steadfast.rv32) -- lazily (inside a function) included, and not through any
    module they import (the path is named)."""
    mods = _modules()
    graph = _edges(mods)
    core = _core(mods)
    missing = [p for p in CORE_PROVER if f"steadfast.prover.{p}" not in mods]
    assert not missing, f"protocol packages not found (renamed? update CORE_PROVER): {missing}"
    assert len(core) > 40, core                  # air, kernels and verifier were found
    found = []
    for m in core:
        parent, stack = {m: None}, [m]
        while stack:
            v = stack.pop()
            for w in sorted(graph[v]):
                if w not in parent:
                    parent[w] = v
                    stack.append(w)
        for w in sorted(t for t in parent if _machine(t)):
            path = [w]
            while parent[path[-1]] is not None:
                path.append(parent[path[-1]])
            found.append(" -> ".join(reversed(path)))
            break
    assert not found, "the protocol core imports a machine:\n" + "\n".join(found)


def test_the_machine_import_check_sees_lazy_imports(tmp_path):
    """The walk above counts an import inside a function body as an edge."""
    src = "def f():\n    from ..rv32.tables import table_airs\n    return table_airs\n"
    path = tmp_path / "m.py"
    path.write_text(src)
    graph = _edges({"steadfast.kernels.m": str(path), "steadfast.rv32.tables": str(path)})
    assert graph["steadfast.kernels.m"] == {"steadfast.rv32.tables"}
    assert _machine("steadfast.rv32.tables") and _machine("steadfast.rv32")
    assert not _machine("steadfast.verifier.rv32x") and not _machine("steadfast.prover.engine.prover_core")


def test_one_machine():
    """The field-element VM is retired (issue #24): no vm package, nothing imports
    steadfast.vm, and pyproject installs none."""
    assert not os.path.exists(os.path.join(ROOT, "vm"))
    with open(os.path.join(ROOT, "pyproject.toml")) as fh:
        assert "steadfast.vm" not in fh.read()
    graph = _edges(_modules())
    bad = sorted(m for m, targets in graph.items() for t in targets
                 if t == "steadfast.vm" or t.startswith("steadfast.vm."))
    assert not bad, f"modules importing steadfast.vm: {bad}"
