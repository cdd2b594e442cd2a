"""Imports of the project's own modules sit at module top unless a start-up cost says why.

An import inside a function must carry ``# deferred: <why>`` on its line (what it would
load, e.g. lancedb's ~2 s); the CLI's handlers are the one module-wide exception, stated
once in workbench/commands/__init__.py.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OURS = ("engine", "workbench")
CLI_HANDLERS = REPO / "workbench" / "commands"


def _own_module(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] in OURS
    return any(a.name.split(".")[0] in OURS for a in node.names)


def unexplained_imports(path: Path, root: Path = REPO) -> list[str]:
    """``path:line`` of each in-function import of our modules without a deferred reason."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    found = []
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Import | ast.ImportFrom) and _own_module(node):
                text = " ".join(lines[node.lineno - 1 : node.end_lineno])
                if "# deferred:" not in text:
                    found.append(f"{path.relative_to(root)}:{node.lineno}")
    return sorted(set(found))


def test_in_function_imports_of_our_modules_say_why() -> None:
    offenders = [
        hit
        for pkg in OURS
        for path in sorted((REPO / pkg).rglob("*.py"))
        if CLI_HANDLERS not in path.parents
        for hit in unexplained_imports(path)
    ]
    assert not offenders, "move to module top or add '# deferred: <cost>': " + ", ".join(offenders)


def test_the_cli_handlers_exception_is_stated() -> None:
    doc = ast.get_docstring(ast.parse((CLI_HANDLERS / "__init__.py").read_text()))
    assert doc and "import their work inside the function" in doc


def test_an_unexplained_import_is_reported(tmp_path: Path) -> None:
    bad = tmp_path / "probe.py"
    bad.write_text("def f():\n    from engine import config\n    return config\n")
    assert unexplained_imports(bad, tmp_path) == ["probe.py:2"]
    bad.write_text(
        "def f():\n    from engine import config  # deferred: probe\n    return config\n"
    )
    assert unexplained_imports(bad, tmp_path) == []
