"""Every name is imported from the module that defines it: no module lists in ``__all__`` a
name it does not define, and no import takes a name through a module that only imports it
(the re-export lists left behind by splits). No package ``__init__`` re-exports anything."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("engine", "workbench")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for pkg in PACKAGES for p in sorted((REPO / pkg).rglob("*.py"))}


def _targets(node: ast.expr) -> list[str]:
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Tuple | ast.List):
        return [n for e in node.elts for n in _targets(e)]
    return []


@cache
def defined(module: str) -> frozenset[str]:
    """Top-level functions, classes and assigned names of a module (imports excluded)."""
    out: set[str] = set()
    for node in ast.parse(MODULES[module].read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.add(node.name)
        elif isinstance(node, ast.Assign):
            out.update(n for t in node.targets for n in _targets(t))
        elif isinstance(node, ast.AnnAssign):
            out.update(_targets(node.target))
    return frozenset(out)


def _all(module: str) -> list[str]:
    for node in ast.parse(MODULES[module].read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and "__all__" in _targets(node.targets[0]):
            return [e.value for e in node.value.elts if isinstance(e, ast.Constant)]  # type: ignore[attr-defined]
    return []


def through_other_modules(path: Path) -> list[str]:
    """``from M import x`` where M is ours, x is not a submodule and M does not define x."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in MODULES:
            for a in node.names:
                if a.name not in defined(node.module) and f"{node.module}.{a.name}" not in MODULES:
                    out.append(f"{path.relative_to(REPO)}:{node.lineno} {node.module}.{a.name}")
    return out


def test_no_module_lists_in_all_a_name_it_does_not_define() -> None:
    bad = {m: [n for n in _all(m) if n not in defined(m)] for m in MODULES}
    assert not {m: v for m, v in bad.items() if v}


def test_every_import_names_the_module_that_defines_the_name() -> None:
    files = [
        p for d in ("engine", "workbench", "tests", "benchmarks") for p in (REPO / d).rglob("*.py")
    ]
    found = [hit for p in sorted(files) for hit in through_other_modules(p)]
    assert not found, f"imported through a module that does not define them: {found}"


def test_the_check_sees_an_import_through_a_re_exporting_module() -> None:
    # engine.search imports EngineConfig from engine.config; taking it from search is caught
    probe = REPO / "tests" / "_probe_owner.py"
    try:
        probe.write_text("from engine.search import EngineConfig\n", encoding="utf-8")
        assert through_other_modules(probe) == [
            "tests/_probe_owner.py:1 engine.search.EngineConfig"
        ]
    finally:
        probe.unlink()
