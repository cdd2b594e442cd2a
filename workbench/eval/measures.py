"""The measures the workbench shows and decides on: one registry, read by every view.

``SHOWN`` lists run-level measures (``"recall@5"``) with where each is a column and whether
an acceptance rule may decide on it. The rule, decisions, compare, sweep, the tuning
loop's matrix, reports, figures, the CLI and the UI read ``shown(view)`` and
``primary_measures()``, so a measure added here (and computed by ``metrics``) appears in
all of them; tests/workbench/test_measure_registry.py holds that no module keeps a list of
its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from workbench.eval.metrics import DEFAULT_FAMILIES, parse_measure


@dataclass(frozen=True)
class Shown:
    """How the workbench shows and decides on one run-level measure (``"recall@5"``).

    ``views``: where it is a column (see ``VIEWS``); ``primary``: whether an acceptance
    rule may decide on it; ``decimals``: how it is printed.
    """

    name: str
    views: frozenset[str] = frozenset()
    primary: bool = False
    decimals: int = 3


VIEWS = {
    "headline": "metric cards, decisions, sweep and experiment tables, report cards",
    "table": "the comparison table of 2-4 configs",
    "matrix": "the per-query matrix of a tuning loop (reference vs candidates)",
    "tested": "a paired significance test in a comparison",
    "holdout": "a sweep's holdout columns",
    "chart": "trend and bar charts",
    "diff": "the measures runs diff can compare query by query",
}


GROUPED = frozenset({"table", "matrix"})  # listed by measure, then K


def _shown(name: str, *views: str, primary: bool = False) -> Shown:
    return Shown(name, frozenset(views), primary)


# The one list of run-level measures the workbench shows: adding a measure here (and to
# DEFAULT_FAMILIES if it is new) is all it takes for the rule, compare, sweep, reports, the
# CLI and the UI to use it. Order is display order.
SHOWN: dict[str, Shown] = {
    s.name: s
    for s in (
        _shown(
            "recall@5",
            "headline",
            "table",
            "matrix",
            "tested",
            "holdout",
            "chart",
            "diff",
            primary=True,
        ),
        _shown(
            "mrr", "headline", "table", "matrix", "tested", "holdout", "chart", "diff", primary=True
        ),
        _shown("hit@5", "headline", "table", "matrix", "chart", "diff", primary=True),
        _shown("ndcg@10", "headline", "table", "matrix", "tested", "diff", primary=True),
        _shown("recall@10", "table", "matrix", "diff", primary=True),
        _shown("hit@10", "table", primary=True),
        _shown("ndcg@5", "table", primary=True),
        _shown("precision@5", "table", "matrix"),
        _shown("precision@10", "table"),
        _shown("map", primary=True),
    )
}


def shown(view: str) -> tuple[str, ...]:
    """The measures of one view, in display order (``GROUPED`` views: by measure, then K)."""
    if view not in VIEWS:
        raise ValueError(f"unknown view {view!r}; views: {', '.join(VIEWS)}")
    names = [n for n, s in SHOWN.items() if view in s.views]
    if view in GROUPED:
        order = {f: i for i, f in enumerate(DEFAULT_FAMILIES)}

        def key(n: str) -> tuple[int, int]:
            m = parse_measure(n)
            return order.get(m.name, len(order)), m.k or 0

        names.sort(key=key)
    return tuple(names)


def primary_measures() -> tuple[str, ...]:
    """What an acceptance rule's ``primary`` may name."""
    return tuple(n for n, s in SHOWN.items() if s.primary)
