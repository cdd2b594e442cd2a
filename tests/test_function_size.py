"""No function in engine/ or workbench/ runs over 100 lines.

A reader loses the thread of a longer one; split it into named steps instead. Counted
with ``ast`` from the ``def`` line to the last line of the body (decorators, docstring
and comments inside included), nested functions counted on their own as well.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("engine", "workbench")
MAX_LINES = 100


def long_functions(root: Path, packages: tuple[str, ...], limit: int) -> list[str]:
    """``path:name (lines)`` for every function of ``packages`` longer than ``limit`` lines."""
    found = []
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines = (node.end_lineno or node.lineno) - node.lineno + 1
                    if lines > limit:
                        found.append(f"{path.relative_to(root)}:{node.name} ({lines})")
    return found


def test_no_function_of_the_engine_or_workbench_is_over_100_lines() -> None:
    found = long_functions(REPO, PACKAGES, MAX_LINES)
    assert found == [], "split these into named steps: " + ", ".join(found)


def test_a_long_method_and_a_long_nested_function_are_found(tmp_path: Path) -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(4))
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(
        "class C:\n    def short(self):\n        return 1\n\n"
        "    async def long(self):\n" + body.replace("    ", "        ") + "\n"
        "def outer():\n    def inner():\n"
        + body.replace("    ", "        ")
        + "    return inner\n",
        encoding="utf-8",
    )
    found = long_functions(tmp_path, ("pkg",), limit=4)
    assert sorted(found) == ["pkg/m.py:inner (5)", "pkg/m.py:long (5)", "pkg/m.py:outer (7)"]
