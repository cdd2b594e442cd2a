"""Accept/rollback experiments: the current baseline config + one change, both evaluated.

Both run on the tune split (the holdout is evaluated too; the rule only checks it is not
significantly worse). The change is accepted only if every criterion of the acceptance
rule holds (workbench/tune/rule.py: rule.yaml or a preset; workbench/tune/acceptance.py:
``decide``). The log, baselines, lock and crash recovery are ``experiment_store``'s.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from engine.config import EngineConfig
from engine.errors import EngineError
from workbench.eval import golden
from workbench.eval.evaluate import Evaluator
from workbench.eval.run_record import RunRecord
from workbench.tune import rule as rules
from workbench.tune.acceptance import Criterion, Decision, decide
from workbench.tune.experiment_entry import one_line
from workbench.tune.experiment_log import ExperimentResult, now
from workbench.tune.experiment_store import ExperimentStore
from workbench.tune.rule import STATISTICAL, AcceptanceRule
from workbench.workspace import Workspace

RULE = STATISTICAL  # the default when experiments/<kb>/rule.yaml is absent


def _with_latency(run: RunRecord, mode: str) -> dict[str, float]:
    m = dict(run.means(mode))
    lat = run.latency(mode)
    m["latency_p50"], m["latency_p95"] = lat["p50"], lat["p95"]
    m["queries"] = float(len(run.for_mode(mode)))
    return m


@dataclass
class Scored:
    """A candidate config evaluated beside the baseline and decided; nothing written yet."""

    base_cfg: EngineConfig
    cand_cfg: EngineConfig
    mode: str
    runs: dict[tuple[str, str], RunRecord]  # ("b" | "c", "tune" | "holdout") -> run
    decision: Decision


def score_candidate(
    gs: golden.GoldenSet,
    evaluator_for: Callable[[EngineConfig], Evaluator],
    base_cfg: EngineConfig,
    cand_cfg: EngineConfig,
    rule: AcceptanceRule = RULE,
    *,
    evaluators: tuple[Evaluator, Evaluator] | None = None,
) -> Scored:
    """Evaluate baseline and candidate on tune and holdout and apply ``rule``; no writes.

    The optimizer's entry point for "would the rule accept this config?". Locking,
    golden-set checks and logging belong to ``run_experiment``, which calls this.
    """
    mode_b, mode_c = base_cfg.search.mode, cand_cfg.search.mode
    ev_b, ev_c = evaluators or (evaluator_for(base_cfg), evaluator_for(cand_cfg))
    runs = {}
    for split in ("tune", "holdout"):
        runs[("b", split)] = ev_b.run(gs, base_cfg, modes=[mode_b], split=split)
        runs[("c", split)] = ev_c.run(gs, cand_cfg, modes=[mode_c], split=split)
    if mode_b != mode_c:  # compare under the name each run used
        for split in ("tune", "holdout"):
            runs[("c", split)] = _rename_mode(runs[("c", split)], mode_c, mode_b)
    holdout = (runs[("b", "holdout")], runs[("c", "holdout")])
    decision = decide(runs[("b", "tune")], runs[("c", "tune")], mode_b, rule, holdout=holdout)
    return Scored(base_cfg, cand_cfg, mode_b, runs, decision)


def same_rankings(runs: Mapping[tuple[str, str], RunRecord], mode: str) -> bool:
    """Whether baseline and candidate ranked every query identically on tune and holdout."""
    for split in ("tune", "holdout"):
        b, c = runs.get(("b", split)), runs.get(("c", split))
        if b is None or c is None:
            continue
        cand = {r.item.id: r for r in c.for_mode(mode)}
        for r in b.for_mode(mode):
            other = cand.get(r.item.id)
            if (
                other is None
                or [x.node_id for x in other.ranked] != [x.node_id for x in r.ranked]
                or other.metrics != r.metrics
            ):
                return False
    return True


def query_moves(
    base: RunRecord, cand: RunRecord, mode: str, measure: str, n: int = 10
) -> dict[str, list[dict[str, Any]]]:
    """The queries the change improved and regressed most on ``measure`` (tune split)."""
    b, c = base.per_query(mode), cand.per_query(mode)
    text = {r.item.id: r.item.query for r in base.for_mode(mode)}
    deltas = [(qid, c[qid].get(measure, 0.0) - b[qid].get(measure, 0.0)) for qid in b if qid in c]
    up = sorted((d for d in deltas if d[1] > 1e-9), key=lambda d: (-d[1], d[0]))[:n]
    down = sorted((d for d in deltas if d[1] < -1e-9), key=lambda d: (d[1], d[0]))[:n]
    return {
        kind: [{"id": q, "query": text.get(q, ""), "delta": round(d, 4)} for q, d in rows]
        for kind, rows in (("improved", up), ("regressed", down))
    }


def run_experiment(
    ws: Workspace,
    evaluator_for: Callable[[EngineConfig], Evaluator],
    overrides: Mapping[str, Any],
    *,
    title: str | None = None,
    tier: str = "manual",
    notes: str = "",
    dry_run: bool = False,
    notify: Callable[[str], None] | None = None,
    allow_invalid: bool = False,
    rule: AcceptanceRule | None = None,
    extra: Mapping[str, Any] | None = None,
    confirm: Sequence[Criterion] = (),
) -> ExperimentResult:
    """Evaluate baseline vs baseline+change on tune (and holdout), decide, log, maybe accept.

    ``rule``: default experiments/<kb>/rule.yaml if present, else the statistical preset.

    Holds the KB's experiment lock from reading the baseline to writing it (module doc);
    ``notify`` hears about a recovered interrupted accept and, with ``allow_invalid``,
    which invalid golden items were skipped (an invalid golden set is refused otherwise).
    ``extra`` is stored in the experiment record as it is (e.g. the optimizer's study).
    ``confirm``: criteria the rule's decision must also pass (the optimizer's test on data
    its search never saw); they are listed with the rule's own.
    """
    store = ExperimentStore(ws.experiments)
    with store.writing("experiment try", notify):
        return _run_locked(
            ws,
            store,
            evaluator_for,
            overrides,
            title,
            tier,
            notes,
            dry_run=dry_run,
            allow_invalid=allow_invalid,
            notify=notify,
            rule=rule or rules.resolve(ws.experiments),
            extra=extra,
            confirm=confirm,
        )


def _run_locked(
    ws: Workspace,
    store: ExperimentStore,
    evaluator_for: Callable[[EngineConfig], Evaluator],
    overrides: Mapping[str, Any],
    title: str | None,
    tier: str,
    notes: str,
    *,
    dry_run: bool,
    allow_invalid: bool,
    notify: Callable[[str], None] | None,
    rule: AcceptanceRule,
    extra: Mapping[str, Any] | None = None,
    confirm: Sequence[Criterion] = (),
) -> ExperimentResult:
    gs = golden.load(ws.dataset)
    base_cfg = store.baseline_config()
    cand_cfg = base_cfg.with_overrides(dict(overrides))
    changes = base_cfg.diff(cand_cfg)
    if not changes:
        raise EngineError("the change leaves the config as it is; pick a different value")
    mode_b = base_cfg.search.mode
    ev_b, ev_c = evaluator_for(base_cfg), evaluator_for(cand_cfg)
    kb = getattr(getattr(ev_b, "engine", None), "kb", None)  # node ids checked when known
    gs = golden.checked(gs, kb, allow_invalid=allow_invalid, notify=notify)
    sc = score_candidate(gs, evaluator_for, base_cfg, cand_cfg, rule, evaluators=(ev_b, ev_c))
    runs, decision = sc.runs, sc.decision
    if confirm:
        decision = replace(
            decision,
            criteria=[*decision.criteria, *confirm],
            accepted=decision.accepted and all(c.passed for c in confirm),
        )
    base_t, cand_t = runs[("b", "tune")], runs[("c", "tune")]
    no_effect = same_rankings(runs, mode_b)
    number = 0 if no_effect else store.next_number()
    result = ExperimentResult(
        number=number,
        title=one_line(title or "") or ", ".join(f"{k}={b}" for k, (_, b) in changes.items()),
        tier=one_line(tier),
        changes=changes,
        decision=decision,
        base_tune=_with_latency(base_t, mode_b),
        cand_tune=_with_latency(cand_t, mode_b),
        base_holdout=_with_latency(runs[("b", "holdout")], mode_b),
        cand_holdout=_with_latency(runs[("c", "holdout")], mode_b),
        base_hash=base_cfg.hash,
        cand_hash=cand_cfg.hash,
        cand_yaml=cand_cfg.to_yaml(),
        mode=mode_b,
        notes=one_line(notes),
        date=now(),
        extra=dict(extra or {}),
    )
    result.extra["queries"] = query_moves(base_t, cand_t, mode_b, rule.primary)
    # which golden set decided it: the trajectory marks where the set changed
    result.extra["dataset_hash"] = gs.content_hash
    if no_effect:
        # An identical ranking for every query is not an experiment: nothing to decide, and
        # the log stays a record of changes that did something (the scorecard once logged
        # index.use_summaries=True without an LLM as an experiment with identical metrics).
        result.extra["no_effect"] = True
        return result
    if dry_run:
        return result
    store.ensure_initial_version()
    if decision.accepted:
        # Named in the record before any file is written, so recovery after a crash
        # rewrites this exact version instead of adding another.
        result.extra["baseline_version"] = store.next_version()
    store.append(result)
    if decision.accepted:
        store.write_baseline(cand_cfg, result.extra["baseline_version"])
    return result


def _rename_mode(run: RunRecord, old: str, new: str) -> RunRecord:

    results = [replace(r, mode=new) if r.mode == old else r for r in run.queries]
    return run.with_queries(results, modes=tuple(new if m == old else m for m in run.modes))
