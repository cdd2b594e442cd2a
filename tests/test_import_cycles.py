"""No import cycles among the modules of engine/ and workbench/.

Read from the source with ``ast``: every import, including those inside functions and
under ``TYPE_CHECKING`` (an import deferred to break a cycle is still one), relative
imports resolved, and ``from pkg import name`` an edge to ``pkg.name`` when that is a
module.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("engine", "workbench")


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module an ``from ... import`` names (``from .x import y`` included)."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    # In a package's __init__ one dot is the package itself; elsewhere, the parent.
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def import_graph(root: Path, packages: tuple[str, ...]) -> dict[str, set[str]]:
    """Module -> the modules of ``packages`` it imports (anywhere in its source)."""
    paths = {
        _module_name(root, p): p for pkg in packages for p in sorted((root / pkg).rglob("*.py"))
    }
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        is_package = path.name == "__init__.py"
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                target = _resolve(module, is_package, node)
                names = [target] + [f"{target}.{a.name}" for a in node.names]
            else:
                continue
            for name in names:
                # `import a.b.c` runs a, a.b and a.b.c; the deepest of ours is the edge
                while name and name not in paths:
                    name = name.rpartition(".")[0]
                if name and name != module:
                    edges.add(name)
        graph[module] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def test_no_module_of_the_engine_or_workbench_is_part_of_an_import_cycle() -> None:
    found = cycles(import_graph(REPO, PACKAGES))
    assert found == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_a_cycle_through_an_import_inside_a_function_is_found(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from pkg.b import f\n",
            "pkg/b.py": "def f():\n    from pkg import a  # deferred, still a cycle\n",
            "pkg/c.py": "import pkg.a\n",
        },
    )
    assert cycles(import_graph(tmp_path, ("pkg",))) == [["pkg.a", "pkg.b"]]


def test_relative_and_type_checking_imports_are_edges(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "from .sub import x\n",
            "pkg/sub/__init__.py": "",
            "pkg/sub/x.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from .. import y\n",
            "pkg/y.py": "from .sub.x import z\n",
        },
    )
    graph = import_graph(tmp_path, ("pkg",))
    assert graph["pkg"] == {"pkg.sub", "pkg.sub.x"}
    assert graph["pkg.sub.x"] == {"pkg", "pkg.y"}
    assert cycles(graph) == [["pkg", "pkg.sub.x", "pkg.y"]]


def test_a_package_importing_its_own_modules_is_no_cycle(tmp_path: Path) -> None:
    _write(tmp_path, {"pkg/__init__.py": "from pkg import a\n", "pkg/a.py": "import os\n"})
    assert cycles(import_graph(tmp_path, ("pkg",))) == []
