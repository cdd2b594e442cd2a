"""Auto-optimize: walk the change catalog one experiment at a time, lowest tier first."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.config import EngineConfig, affects_index
from engine.errors import EngineError
from workbench.eval.evaluate import Evaluator
from workbench.tune.catalog import TIER_NAMES, strategies, walk_notes, walk_title
from workbench.tune.experiment_log import ExperimentResult
from workbench.tune.experiment_store import ExperimentStore
from workbench.tune.experiments import run_experiment
from workbench.workspace import Workspace


def optimize(
    ws: Workspace,
    evaluator_for: Callable[[EngineConfig], Evaluator],
    *,
    budget: int = 10,
    tiers: set[int] | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> list[ExperimentResult]:
    """Walk the catalog one change at a time from the lowest tier; stop at the budget."""
    results: list[ExperimentResult] = []
    tried: set[str] = set()
    todo = [(s, c) for s in strategies(tiers) for c in s.candidates if not _reindexes(c)]
    todo.sort(key=lambda t: t[0].tier)
    for strat, change in todo:
        if len(results) >= budget:
            break
        base = ExperimentStore(ws.experiments).baseline_config()
        try:
            cand = base.with_overrides(change)
        except EngineError:
            continue
        key = _ranking_key(cand)
        if not base.diff(cand) or key in tried or key == _ranking_key(base):
            continue
        tried.add(key)
        if progress:
            progress(len(results), budget, strat.name)
        res = run_experiment(
            ws,
            evaluator_for,
            change,
            title=walk_title(strat, change),
            tier=TIER_NAMES[strat.tier],
            notes=walk_notes(strat),
        )
        results.append(res)
    if progress:
        progress(len(results), budget, "done")
    return results


def _ranking_key(cfg: EngineConfig) -> str:
    """Configs that rank identically share a key: RRF is invariant to scaling both weights."""
    v, b = cfg.fusion.vector_weight, cfg.fusion.bm25_weight
    top = max(v, b)
    if top > 0:
        cfg = cfg.with_overrides({"fusion.vector_weight": v / top, "fusion.bm25_weight": b / top})
    return cfg.hash


def _reindexes(change: dict[str, Any]) -> bool:
    """A change to what the index stores cannot be re-scored from caches: the walk skips it."""
    return any(affects_index(k) for k in change)
