"""Adding a measure to the workbench is one entry in ``measures.SHOWN``: the rule may decide
on it, decisions compare it, every view lists it; no module keeps its own list."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from engine.errors import EngineError
from workbench.eval import measures
from workbench.eval.measures import SHOWN, Shown, primary_measures, shown
from workbench.tune.acceptance import decide_scores
from workbench.tune.rule import STATISTICAL, AcceptanceRule

REPO = Path(__file__).resolve().parents[2]
NEW = "precision@3"  # computed by every evaluation (DEFAULT_FAMILIES x DEFAULT_KS), shown nowhere


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> str:
    entry = Shown(NEW, frozenset({"headline", "table", "tested", "diff"}), primary=True)
    monkeypatch.setitem(SHOWN, NEW, entry)
    return NEW


def test_an_unregistered_measure_cannot_be_a_rules_primary() -> None:
    with pytest.raises(EngineError, match="primary must be one of"):
        AcceptanceRule(primary=NEW)


def test_a_registered_measure_is_a_primary_and_every_decision_compares_it(registered: str) -> None:
    rule = dataclasses.replace(STATISTICAL, primary=registered, resamples=200)
    a = {f"q{i}": {registered: 0.0, "mrr": 0.5} for i in range(8)}
    b = {f"q{i}": {registered: 1.0 / 3, "mrr": 0.5} for i in range(8)}
    decision = decide_scores(a, b, dataclasses.replace(rule, slice_by=()))
    assert registered in decision.comparisons
    assert decision.criteria[0].name.startswith(registered)


def test_a_registered_measure_appears_in_its_views_in_order(registered: str) -> None:
    assert registered in primary_measures()
    assert shown("headline")[-1] == registered
    table = shown("table")
    # grouped by measure, then K: precision@3 sits before precision@5
    assert table.index(registered) == table.index("precision@5") - 1
    assert registered in shown("diff") and registered in shown("tested")


def test_an_unknown_view_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown view"):
        shown("nowhere")


def _hand_written_lists(path: Path) -> list[str]:
    """Tuples or lists of two or more literal measure names the registry shows."""
    names = set(SHOWN)
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Tuple | ast.List):
            vals = [e.value for e in node.elts if isinstance(e, ast.Constant)]
            if len(vals) >= 2 and len(vals) == len(node.elts) and set(vals) <= names:
                out.append(f"{path.relative_to(REPO)}:{node.lineno} {vals}")
    return out


def test_no_module_keeps_its_own_list_of_shown_measures() -> None:
    own = Path(measures.__file__)
    found = [
        hit
        for pkg in ("workbench", "engine")
        for path in sorted((REPO / pkg).rglob("*.py"))
        if path != own
        for hit in _hand_written_lists(path)
    ]
    assert not found, f"measure lists outside workbench/eval/measures.py: {found}"
