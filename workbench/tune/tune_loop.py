"""The tuning loop in one call: a reference and 1-3 candidates evaluated, saved as runs and
compared query by query (what the Tune page shows), and the experiment a change already had.

Every config goes through the cached evaluator, so after the first run a change of fusion,
rerank or injection settings re-scores cached candidates.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.config import EngineConfig
from workbench.eval.evaluate import save_run
from workbench.eval.golden import GoldenSet
from workbench.eval.run_record import RunRecord
from workbench.tune.compare import Comparison, compare_runs, parse_config_spec
from workbench.tune.experiment_store import ExperimentStore


@dataclass(frozen=True)
class LoopResult:
    specs: tuple[str, ...]  # the configs as typed: "baseline", "baseline+fusion.k=30"
    comparison: Comparison
    records: tuple[RunRecord, ...]  # the saved runs, in the order of specs
    configs: tuple[EngineConfig, ...]

    @property
    def modes(self) -> tuple[str, ...]:
        return self.comparison.modes

    def changes(self, i: int, baseline: EngineConfig) -> dict[str, Any]:
        """Config ``i`` as overrides of ``baseline`` (what "Run as experiment" tries)."""
        return {k: new for k, (_, new) in baseline.diff(self.configs[i]).items()}


def run_loop(
    ws: Any,
    gs: GoldenSet,
    specs: Sequence[str],
    *,
    split: str = "all",
    evaluator_for: Callable[[EngineConfig], Any],
    progress: Callable[[int, int, str], None] | None = None,
) -> LoopResult:
    """Evaluate each spec (``parse_config_spec``: the first is the reference), save each run
    under ``ws.runs_dir`` and compare them. A bad spec fails before anything is evaluated."""
    if not 2 <= len(specs) <= 4:
        raise ValueError(f"the loop compares a reference and 1-3 candidates; got {len(specs)}")
    configs = [parse_config_spec(s, ws) for s in specs]  # validate all first
    runs, records = [], []
    ev = None
    for n, (label, cfg) in enumerate(configs):
        if progress:
            progress(n, len(configs), label)
        ev = evaluator_for(cfg)
        run = ev.run(gs, cfg, modes=[cfg.search.mode], split=split)
        save_run(run, ws.runs_dir)
        runs.append((label, run))
        records.append(RunRecord.from_run(run))
    if ev is not None and hasattr(getattr(ev, "cache", None), "save"):
        ev.cache.save()
    if progress:
        progress(len(configs), len(configs), "")
    return LoopResult(
        specs=tuple(label for label, _ in configs),
        comparison=compare_runs(runs, modes=[c.search.mode for _, c in configs]),
        records=tuple(records),
        configs=tuple(c for _, c in configs),
    )


def earlier_experiment(
    store: ExperimentStore, changes: Mapping[str, Any], dataset_hash: str
) -> dict[str, Any] | None:
    """The newest logged experiment that tried exactly ``changes`` against today's baseline
    on the same golden set, or None (so the page can say so before running it again)."""
    if not changes:
        return None
    base_hash = store.baseline_config().hash
    wanted = {k: v for k, v in changes.items()}
    for r in reversed(store.load_records()):
        tried = {k: v[1] for k, v in (r.get("changes") or {}).items()}
        same_set = not r.get("dataset_hash") or r.get("dataset_hash") == dataset_hash
        if tried == wanted and (r.get("baseline") or {}).get("hash") == base_hash and same_set:
            return r
    return None
