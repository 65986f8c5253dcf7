"""The import graph of qrlib: no cycles between modules, no private names imported across
modules, and the workbook package strictly layered (read from the source with ``ast``,
so every import counts: deferred ones inside functions too, relative ones resolved)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

QRLIB = Path(__file__).resolve().parents[1] / "qrlib"

# Import cycles that exist today and are to be removed. This set may only SHRINK: a new
# cycle fails the test, and so does a listed one that no longer exists (delete it here).
# Each entry is the set of modules of one strongly connected component of the graph.
KNOWN_CYCLES: set[frozenset[str]] = set()

# Private names (``_x``) imported from another module, today. May only SHRINK, like above:
# make the name public (or move it) instead of adding a line.
KNOWN_PRIVATE_IMPORTS: set[tuple[str, str]] = set()

# qrlib.workbook, bottom layer first: a module imports only the ones before it
WORKBOOK_LAYERS = ["preload", "pushsize", "profiles", "extras", "noise", "freshness", "carry", "publish", "park", "scoreboard",
                   "resultsdoc", "trained_sections", "results", "runner"]


# --------------------------------------------------------------------------- the graph
def _modules() -> dict[str, Path]:
    """Every qrlib module name -> its file (``pkg/__init__.py`` is ``pkg``)."""
    out = {}
    for path in sorted(QRLIB.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        parts = list(path.relative_to(QRLIB.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _is_package(mod: str) -> bool:
    return MODULES[mod].name == "__init__.py"


def _from_base(node: ast.ImportFrom, current: str) -> str:
    """The absolute module of ``from <base> import ...`` inside module ``current``."""
    if not node.level:
        return node.module or ""
    parts = current.split(".")
    base = parts if _is_package(current) else parts[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(mod: str) -> list[tuple[ast.stmt, str, str | None, bool]]:
    """Each import in ``mod``: (node, qrlib module imported, the name taken from it if it is
    not a module, deferred: inside a function or class)."""
    tree = ast.parse(MODULES[mod].read_text(encoding="utf-8"), filename=str(MODULES[mod]))
    out: list[tuple[ast.stmt, str, str | None, bool]] = []

    def visit(node: ast.AST, deferred: bool) -> None:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name in MODULES:
                    out.append((node, a.name, None, deferred))
        elif isinstance(node, ast.ImportFrom):
            base = _from_base(node, mod)
            for a in node.names:
                if f"{base}.{a.name}" in MODULES:          # from pkg import submodule
                    out.append((node, f"{base}.{a.name}", None, deferred))
                elif base in MODULES:
                    out.append((node, base, a.name, deferred))
        inner = deferred or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                              ast.ClassDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(tree, False)
    return out


GRAPH: dict[str, set[str]] = {m: {t for _, t, _, _ in _imports(m) if t != m} for m in MODULES}


def _components(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components (Tarjan), each as a sorted list."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def _cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    return {frozenset(c) for c in _components(graph) if len(c) > 1}


def _a_cycle(comp: frozenset[str], graph: dict[str, set[str]]) -> str:
    """One import cycle through a component, as ``a -> b -> a``."""
    start = min(comp)
    path, seen = [start], {start}
    while True:  # every node of a component has a successor inside it
        nxt = sorted(graph[path[-1]] & comp)
        back = [n for n in nxt if n in seen]
        if back:
            return " -> ".join(path[path.index(back[0]):] + [back[0]])
        path.append(nxt[0])
        seen.add(nxt[0])


# --------------------------------------------------------------------------- tests
def test_the_import_graph_sees_the_package():
    assert {"qrlib", "qrlib.workbook", "qrlib.workbook.runner", "qrlib.core.io"} <= set(MODULES)
    assert "qrlib.workbook.freshness" in GRAPH["qrlib.workbook.runner"]
    assert "qrlib.retrieval.base" in GRAPH["qrlib.retrieval.lucene"]
    assert "qrlib.data.datasets" in GRAPH["qrlib.workbook.profiles"]  # a deferred import counts


def test_no_import_cycles_beyond_the_known_ones():
    found = _cycles(GRAPH)
    new = [f"{_a_cycle(c, GRAPH)}  (all of: {', '.join(sorted(c))})"
           for c in sorted(found - KNOWN_CYCLES, key=sorted)]
    gone = [sorted(c) for c in KNOWN_CYCLES - found]
    assert not new, "import cycle(s) between qrlib modules:\n  " + "\n  ".join(new)
    assert not gone, f"no longer cycles: remove {gone} from KNOWN_CYCLES"


def test_the_cycle_finder_finds_cycles():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _cycles(graph) == {frozenset("abc")}
    assert _a_cycle(frozenset("abc"), graph) == "a -> b -> c -> a"


def test_no_private_names_imported_from_another_module():
    found = {(m, f"{target}.{name}") for m in MODULES for _, target, name, _ in _imports(m)
             if name and name.startswith("_") and not name.startswith("__") and target != m}
    new, gone = sorted(found - KNOWN_PRIVATE_IMPORTS), sorted(KNOWN_PRIVATE_IMPORTS - found)
    assert not new, f"private names imported from another module (make them public): {new}"
    assert not gone, f"no longer imported: remove {gone} from KNOWN_PRIVATE_IMPORTS"


WORKBOOK = sorted(m for m in MODULES if m == "qrlib.workbook" or m.startswith("qrlib.workbook."))


@pytest.mark.parametrize("mod", WORKBOOK)
def test_workbook_modules_import_each_other_only_at_top_level(mod):
    deferred = sorted({f"line {node.lineno}: {target}" for node, target, _, later in _imports(mod)
                       if later and (target == "qrlib.workbook"
                                     or target.startswith("qrlib.workbook."))})
    assert not deferred, f"{mod} imports workbook modules inside a function: {deferred}"


@pytest.mark.parametrize("mod", [f"qrlib.workbook.{m}" for m in WORKBOOK_LAYERS])
def test_workbook_layers_import_only_the_layers_below(mod):
    layer = WORKBOOK_LAYERS.index(mod.rsplit(".", 1)[1])
    below = {f"qrlib.workbook.{m}" for m in WORKBOOK_LAYERS[:layer]}
    inside = {t for t in GRAPH[mod] if t == "qrlib.workbook" or t.startswith("qrlib.workbook.")}
    assert inside <= below, f"{mod} imports {sorted(inside - below)}, not below it"
    assert set(WORKBOOK) - {"qrlib.workbook", "qrlib.workbook.__main__"} == {
        f"qrlib.workbook.{m}" for m in WORKBOOK_LAYERS}, "a new workbook module needs a layer"
