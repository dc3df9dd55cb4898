"""No import cycles inside the rvvkit package.

The graph is read from the source with ast (nothing is imported or executed): an edge a -> b for
every `import rvvkit.b`, `from rvvkit import b`, `from . import b` or `from ..x import y` (y a
module when it is one, else x), and edges to the packages above b, whose __init__ runs first
(but not to a's own packages, which are mid-import already).

Two graphs: the module-level one (imports inside functions, classes and `if TYPE_CHECKING:`
blocks left out: they run late, after both modules exist), which must have no cycle for the
package to import at all; and the graph of every import at any level, which must have none
either: a function-level or type-only import that closes a cycle is a layering fault hidden
from the interpreter (two modules each needing the other), so every module has a side below
it that never imports it back."""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Set

import rvvkit

PACKAGE = "rvvkit"
ROOT = Path(rvvkit.__file__).resolve().parent


def package_modules(root: Path = ROOT) -> Dict[str, Path]:
    """Dotted name -> source file of every module of the package (packages as __init__)."""
    mods = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        mods[".".join(parts)] = path
    return mods


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def module_level_imports(tree: ast.Module) -> Iterator[ast.stmt]:
    """Import statements that run when the module is imported: top level and inside top-level
    if/try/with blocks, not in functions, classes or `if TYPE_CHECKING:`."""
    todo: List[ast.stmt] = list(tree.body)
    while todo:
        stmt = todo.pop(0)
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            yield stmt
        elif isinstance(stmt, ast.If):
            todo += stmt.orelse if _is_type_checking(stmt.test) else stmt.body + stmt.orelse
        elif isinstance(stmt, ast.Try):
            todo += stmt.body + stmt.orelse + stmt.finalbody + \
                [s for h in stmt.handlers for s in h.body]
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            todo += stmt.body


def all_imports(tree: ast.Module) -> Iterator[ast.stmt]:
    """Every import statement of the module, at any level."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node


def _base(module: str, is_package: bool, node: ast.ImportFrom) -> Optional[str]:
    """The absolute module a `from X import ...` names (None: outside the package)."""
    if node.level == 0:
        return node.module
    parts = module.split(".") if is_package else module.split(".")[:-1]
    if node.level > 1:
        parts = parts[:len(parts) - (node.level - 1)]
    return ".".join(parts + ([node.module] if node.module else []))


def import_graph(mods: Dict[str, Path], imports: Callable[[ast.Module], Iterator[ast.stmt]] =
                 module_level_imports) -> Dict[str, Set[str]]:
    """module -> the package modules it imports: at module level, or by whichever statements
    `imports` picks."""
    def owner(name: Optional[str]) -> Optional[str]:
        while name and name not in mods:      # `import rvvkit.a.b.C`-style: nearest module
            name = name.rpartition(".")[0]
        return name or None

    graph: Dict[str, Set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        is_pkg = path.name == "__init__.py"
        for node in imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [owner(a.name) for a in node.names]
            else:
                base = _base(mod, is_pkg, node)
                targets = [owner(f"{base}.{a.name}") if f"{base}.{a.name}" in mods
                           else owner(base) for a in node.names]
            for t in targets:
                graph[mod] |= _with_parents(t, mod) if t else set()
    return graph


def _with_parents(target: str, importer: str) -> Set[str]:
    """`target` and the packages above it that importing it runs first (their __init__), less
    the importer's own packages, which are already being imported when it runs."""
    own = set(_ancestors(importer)) | {importer}
    return {m for m in [target, *_ancestors(target)] if m not in own}


def _ancestors(module: str) -> List[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def find_cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """One cycle per strongly connected component with more than one module (Tarjan)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    comps: List[List[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_cycle_in(graph, set(c)) for c in comps]


def _cycle_in(graph: Dict[str, Set[str]], comp: Set[str]) -> List[str]:
    """A concrete cycle a -> b -> ... -> a inside one strongly connected component (BFS from
    its smallest module back to itself)."""
    start = min(comp)
    prev: Dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & comp):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(prev[path[-1]])
                    return list(reversed(path)) + [start]
                if w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"no cycle in {sorted(comp)}")


def package_graph(graph: Dict[str, Set[str]]) -> Dict[str, Set[str]]:
    """The same edges between the package's parts: its subpackages (rvvkit.codegen stands for
    every module under it) and its top-level modules; `rvvkit` itself (the public facade) is
    left out, since every part sits under it."""
    def part(m: str) -> str:
        return ".".join(m.split(".")[:2])

    out: Dict[str, Set[str]] = {}
    for mod, targets in graph.items():
        if mod == PACKAGE:
            continue
        out.setdefault(part(mod), set()).update(
            part(t) for t in targets if t != PACKAGE and part(t) != part(mod))
    return out


def test_the_graph_sees_relative_and_absolute_imports():
    """The reader itself: a package's relative imports resolve to modules."""
    graph = import_graph(package_modules())
    assert "rvvkit.errors" in graph["rvvkit"]            # from .errors import ...
    assert any(graph[m] for m in graph if m.startswith("rvvkit.runtime."))


def test_find_cycles_reports_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycles(graph) == [["a", "b", "c", "a"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_level_import_cycles():
    cycles = find_cycles(import_graph(package_modules()))
    assert not cycles, "module-level import cycles in rvvkit:\n" + "\n".join(
        "  " + " -> ".join(c) for c in cycles)


def test_no_import_cycles_between_subpackages():
    """A layer may use the ones below it, never the other way round: a cycle between two
    subpackages (passes -> codegen -> passes) makes their __init__ order fragile even when no
    single module imports itself."""
    cycles = find_cycles(package_graph(import_graph(package_modules())))
    assert not cycles, "module-level import cycles between parts of rvvkit:\n" + "\n".join(
        "  " + " -> ".join(c) for c in cycles)


def test_no_two_modules_import_each_other_at_any_level():
    """Function-level and type-only imports included: of two modules that need each other,
    one is the lower layer and never imports the other."""
    graph = import_graph(package_modules(), all_imports)
    pairs = sorted({tuple(sorted((a, b))) for a in graph for b in graph[a] if a in graph[b]})
    assert not pairs, "modules of rvvkit that import each other:\n" + "\n".join(
        f"  {a} <-> {b}" for a, b in pairs)


def test_no_import_cycles_at_any_level():
    """No longer cycle either (a -> b -> c -> a through function-level imports)."""
    cycles = find_cycles(import_graph(package_modules(), all_imports))
    assert not cycles, "import cycles in rvvkit (any level):\n" + "\n".join(
        "  " + " -> ".join(c) for c in cycles)


def test_late_imports_are_read():
    """The any-level reader sees imports in functions and under TYPE_CHECKING, which the
    module-level one leaves out."""
    tree = ast.parse("import os\nif TYPE_CHECKING:\n    import a\ndef f():\n    import b\n")
    names = lambda stmts: [a.name for n in stmts for a in n.names]   # noqa: E731
    assert names(all_imports(tree)) == ["os", "a", "b"]
    assert names(module_level_imports(tree)) == ["os"]
