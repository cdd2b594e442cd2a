"""List the UI strings (``t("...")`` literals) that have no Chinese translation yet."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

UI = Path(__file__).resolve().parent


def ui_strings(root: Path = UI) -> dict[str, list[str]]:
    """Every literal first argument of a ``t(...)`` call under ``root`` -> where it occurs."""
    found: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "t"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                found.setdefault(node.args[0].value, []).append(f"{path.name}:{node.lineno}")
    return found


def missing(lang: str = "zh") -> dict[str, list[str]]:
    from workbench.ui.i18n import catalog

    cat = catalog(lang)
    return {s: where for s, where in ui_strings().items() if s not in cat}


if __name__ == "__main__":
    gaps = missing()
    for s, where in gaps.items():
        sys.stdout.write(f"{', '.join(where)}\t{s}\n")
    sys.exit(1 if gaps else 0)
