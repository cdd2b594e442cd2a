"""The CI gate: does a run regress against the accepted baseline, under the experiment rule?"""

from __future__ import annotations

from collections.abc import Callable

from workbench.eval import golden
from workbench.eval.engines import evaluator
from workbench.eval.run_record import RunRecord
from workbench.tune import rule as rules
from workbench.tune.acceptance import decide
from workbench.tune.experiment_store import ExperimentStore
from workbench.tune.rule import AcceptanceRule
from workbench.workspace import Workspace


def gate(
    ws: Workspace,
    current: RunRecord,
    rule: AcceptanceRule | None = None,
    *,
    gs: golden.GoldenSet | None = None,
    allow_invalid: bool = False,
    notify: Callable[[str], None] | None = None,
) -> tuple[bool, str]:
    """CI gate: does ``current`` regress against the accepted baseline?

    The same rule as experiments (rule.yaml, else the statistical preset), asked the
    non-inferiority question: the primary measure must not be significantly worse
    (statistical) or not drop by more than the improvement threshold (strict); the other
    criteria are unchanged. No holdout check: the gate scores the split it was given.
    ``gs``: the golden set ``current`` was scored on (already checked); without it the
    workspace's set is loaded and validated like `eval` does (``golden.checked``), so the
    baseline is never scored on items the current run skipped, nor on an invalid set.
    """

    store = ExperimentStore(ws.experiments)
    rule = rule or rules.resolve(ws.experiments)
    base_cfg = store.baseline_config()
    if base_cfg.hash == current.config.hash:
        return True, f"config is the baseline ({base_cfg.hash}); nothing to compare"
    ev = evaluator(ws, base_cfg)
    if gs is None:
        gs = golden.checked(
            golden.load(ws.dataset), ev.engine.kb, allow_invalid=allow_invalid, notify=notify
        )
    mode = current.modes[0]
    base_run = ev.run(gs, base_cfg, modes=[mode], split=current.split)
    d = decide(base_run, current, mode, rule, require_improvement=False)
    c = d.comparisons
    deltas = (
        f"ΔRecall@5 {c['recall@5'].delta:+.3f}, ΔMRR {c['mrr'].delta:+.3f}, "
        f"ΔHit@5 {c['hit@5'].delta:+.3f}; rule {rule.name}"
    )
    if d.accepted:
        return True, f"no regression vs baseline {base_cfg.hash}: {deltas}"
    return False, f"regression vs baseline {base_cfg.hash}: " + "; ".join(
        d.reasons
    ) + f" ({deltas})"
