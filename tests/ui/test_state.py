"""Every widget key is named in workbench/ui/state.py: no literal key strings in the UI."""

from __future__ import annotations

import ast
from pathlib import Path

from workbench.ui import state

UI = Path(state.__file__).resolve().parent
WIDGET_KEYWORDS = ("key", "widget_key")


def _literal_keys(path: Path) -> list[str]:
    """`key="..."` / `key=f"..."` arguments and `st.form("...")` keys in one file (sort keys are
    callables, not literals)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                literal = isinstance(kw.value, ast.JoinedStr) or (
                    isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str)
                )
                if kw.arg in WIDGET_KEYWORDS and literal:
                    found.append(f"{path.relative_to(UI)}:{node.lineno}")
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "form" and node.args:
            first = node.args[0]
            if isinstance(first, ast.JoinedStr | ast.Constant):
                found.append(f"{path.relative_to(UI)}:{node.lineno} (form)")
    return found


def test_no_widget_key_is_a_literal_outside_state() -> None:
    files = [p for p in sorted(UI.rglob("*.py")) if p.name != "state.py"]
    assert len(files) > 10  # the views are there
    literal = [where for p in files for where in _literal_keys(p)]
    assert literal == [], f"name these keys in workbench/ui/state.py: {literal}"


def test_widget_keys_are_distinct() -> None:
    names = {n: v for n, v in vars(state).items() if n.isupper() and isinstance(v, str)}
    values = list(names.values())
    dupes = sorted({v for v in values if values.count(v) > 1})
    assert dupes == [], dupes


def test_item_key_joins_the_prefix_and_the_parts() -> None:
    assert state.item_key(state.KB_OPEN, 2, 0) == "kb_open_2_0"
    assert state.item_key(state.EXPERIMENT_VALUE, "fusion.k") == "exp_value_fusion.k"
    assert state.item_key(state.GOLDEN_REMOVE, 3) == "golden_remove_3"
