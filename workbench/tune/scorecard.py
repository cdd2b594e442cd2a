"""The scorecard: nine weighted dimensions -> 0-100 and a grade (docs/design.md, "Workbench").

Every dimension is scored from measured evidence by a formula written out in its
``formula`` string, shows that evidence, and says what would raise it: a concrete next
experiment (config overrides runnable by ``wikirag experiment try``) where a config change
targets it, otherwise an action. ``build_scorecard`` is pure given the evidence;
``compute_scorecard`` gathers it (engine, KB, golden set, the extra runs it needs).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from engine.config import EngineConfig
from workbench.eval import golden
from workbench.eval.engines import evaluator
from workbench.eval.messages import Message, Translate
from workbench.eval.run_record import RunRecord
from workbench.tune.architecture_dimension import architecture_dimension
from workbench.tune.corpus_dimensions import chunking_dimension, coverage_dimension
from workbench.tune.dimension import Change, Dimension
from workbench.tune.engineering_dimension import engineering_dimension
from workbench.tune.experiment_store import ExperimentStore
from workbench.tune.next_steps import next_steps
from workbench.tune.retrieval_dimensions import (
    HIT5_BANDS,
    MRR_BANDS,
    RECALL5_BANDS,
    embedding_dimension,
    metric_dimension,
    mode_run,
    recall_fixes,
    rerank_dimension,
)
from workbench.tune.scorecard_markdown import scorecard_markdown
from workbench.tune.suggestions import distinct_experiments, screen

GRADES = ((90.0, "A"), (80.0, "B"), (70.0, "C+"), (60.0, "C"), (50.0, "D"))

ProgressFn = Callable[[int, int, str], None]


def grade_for(total: float) -> str:
    """A >= 90, B >= 80, C+ >= 70, C >= 60, D >= 50, else F (boundaries inclusive)."""
    for bound, letter in GRADES:
        if total >= bound:
            return letter
    return "F"


@dataclass(frozen=True)
class Scorecard:
    total: float
    grade: str
    dimensions: tuple[Dimension, ...]
    weaknesses: tuple[Dimension, ...]
    run_id: str = ""
    config_hash: str = ""
    mode: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    def dimension(self, key: str) -> Dimension:
        return next(d for d in self.dimensions if d.key == key)

    def to_dict(self, translate: Translate | None = None) -> dict[str, Any]:
        """Plain data: texts in English (the CLI, --json, reports) or through ``translate``."""
        return {
            "total": self.total,
            "grade": self.grade,
            "run_id": self.run_id,
            "config_hash": self.config_hash,
            "mode": self.mode,
            "dimensions": [d.to_dict(translate) for d in self.dimensions],
            "weaknesses": [d.to_dict(translate) for d in self.weaknesses],
            "meta": self.meta,
        }

    def to_markdown(self, translate: Translate | None = None) -> str:
        return scorecard_markdown(self.to_dict(translate), translate=translate)


def build_scorecard(
    run: RunRecord,
    *,
    kb: Any,
    gs: golden.GoldenSet | None,
    engine_stats: Mapping[str, Any] | None = None,
    extra_runs: Mapping[str, RunRecord] | None = None,
    history: Sequence[Mapping[str, Any]] = (),
    llm_configured: bool = False,
) -> Scorecard:
    """Score ``run`` from the given evidence (pure).

    ``llm_configured``: whether an LLM endpoint is set; without one, suggestions that need
    it (chapter summaries) are shown disabled with the reason.

    ``extra_runs``: ``"vector"`` (vector mode, rerank off), ``"hybrid"`` (hybrid mode,
    rerank off; only needed when the run is not a hybrid run without rerank) and
    ``"no_rerank"`` (the run's mode with rerank off; only needed when the run reranks).
    """
    if not run.modes:
        raise ValueError("the run has no modes; evaluate at least one mode first")
    extra = dict(extra_runs or {})
    cfg = run.config
    mode = run.modes[0]
    recall_changes = recall_fixes(run, mode, cfg)
    mrr_fixes: list[Change] = [
        (
            {"rerank.provider": "onnx-cross-encoder"},
            Message("MRR is about the first relevant rank; a cross-encoder reorders the top"),
        ),
        ({"fusion.k": 20.0}, Message("a smaller RRF k rewards agreement at the top ranks")),
        ({"fusion.k": 10.0}, Message("a smaller RRF k rewards agreement at the top ranks")),
    ]
    if cfg.rerank.provider != "none":
        mrr_fixes = mrr_fixes[1:]
    dims = [
        metric_dimension("recall5", "recall@5", RECALL5_BANDS, run, mode, recall_changes),
        metric_dimension("mrr", "mrr", MRR_BANDS, run, mode, mrr_fixes),
        metric_dimension("hit5", "hit@5", HIT5_BANDS, run, mode, recall_changes),
        embedding_dimension(run, extra, cfg),
        rerank_dimension(run, mode, extra),
        chunking_dimension(kb, cfg),
        architecture_dimension(cfg, kb, run, extra, history),
        engineering_dimension(run, engine_stats or {}),
        coverage_dimension(gs, kb),
    ]
    dims = [screen(d, cfg, kb, history, llm_configured=llm_configured) for d in dims]
    total = round(sum(d.weight * d.score for d in dims) / 100.0, 2)
    weak = [
        replace(d, next_steps=next_steps(d.next_experiment, d.alternatives, cfg, gs, history))
        for d in distinct_experiments(
            sorted((d for d in dims if d.score < 100), key=lambda d: (-d.loss, d.key))[:3]
        )
    ]
    return Scorecard(
        total=total,
        grade=grade_for(total),
        dimensions=tuple(dims),
        weaknesses=tuple(weak),
        run_id=run.run_id,
        config_hash=cfg.hash,
        mode=mode,
        meta={"split": run.split, "queries": len(run.for_mode(mode)), "extra_runs": sorted(extra)},
    )


def compute_scorecard(
    ws: Any,
    cfg: EngineConfig,
    run: RunRecord | None = None,
    progress: ProgressFn | None = None,
    *,
    evaluator_for: Callable[[EngineConfig], Any] | None = None,
    llm_configured: bool,
) -> Scorecard:
    """Gather the evidence (engine, KB, golden set, missing runs) and build the scorecard.

    ``llm_configured``: whether an LLM endpoint is set (``answer.llm.llm_settings``; the
    caller resolves it so tuning does not depend on the answering layer).

    The extra runs re-score cached candidates (vector-only and rerank-off are fusion and
    rerank changes), so they cost milliseconds per query once the main run is cached.
    """
    if evaluator_for is None:

        def evaluator_for(c: EngineConfig) -> Any:
            return evaluator(ws, c)

    gs = golden.load(ws.dataset)
    ev = evaluator_for(cfg)
    steps = ["run", "vector", "hybrid", "no_rerank", "stats"]

    def step(i: int, name: str) -> None:
        if progress:
            progress(i, len(steps), name)

    if run is None:
        step(0, "evaluating")
        run = ev.run(gs, cfg, modes=[cfg.search.mode], split="all", kb_name=ws.name)
    rcfg = run.config
    mode = run.modes[0]
    ids = [r.item.id for r in run.for_mode(mode)]
    extra: dict[str, RunRecord] = {}
    rev = ev if rcfg.hash == cfg.hash else evaluator_for(rcfg)

    def sub(m: str) -> RunRecord:
        return rev.run(gs, rcfg, modes=[m], rerank=False, split=run.split, item_ids=ids)

    if mode_run(run, "vector", False) is None:
        step(1, "vector-only mode")
        extra["vector"] = sub("vector")
    if run.rerank:
        step(3, "rerank off")
        extra["no_rerank"] = sub(mode)
    has_hybrid = mode_run(run, "hybrid", False) or (
        extra.get("no_rerank") if mode == "hybrid" else None
    )
    if has_hybrid is None:
        step(2, "hybrid mode")
        extra["hybrid"] = sub("hybrid")
    if mode_run(run, "keyword", False) is None:
        extra["keyword"] = sub("keyword")
    # Ablations for the architecture dimension: switch one capability the other way.
    for name, key, value in (
        ("ablate_expansion", "expansion.enabled", not rcfg.expansion.enabled),
        ("ablate_injection", "injection.enabled", not rcfg.injection.enabled),
    ):
        if name == "ablate_injection" and rcfg.rerank.provider == "none":
            continue  # injection acts on reranked results only
        if name == "ablate_expansion" and mode == "vector":
            continue
        acfg = rcfg.with_overrides({key: value})
        extra[name] = evaluator_for(acfg).run(
            gs, acfg, modes=[mode], rerank=run.rerank, split=run.split, item_ids=ids
        )
    step(4, "engine stats")
    engine = getattr(rev, "engine", None)
    kb = getattr(engine, "kb", None)
    try:
        stats = dict(engine.stats()) if engine is not None and hasattr(engine, "stats") else {}
    except Exception as exc:  # stats are evidence, not a reason to fail the scorecard
        stats = {"error": str(exc)}
    if stats.get("embedder") and "signature_match" not in stats:
        # Engine.open / with_config refuse an index built by another embedder (ConfigError),
        # so an engine that answered stats() has a matching signature.
        stats["signature_match"] = True
    cache = getattr(rev, "cache", None)
    if cache is not None and hasattr(cache, "save"):
        cache.save()
    step(5, "done")

    try:
        history = ExperimentStore(ws.experiments).load_records()
    except Exception:  # an unreadable log costs the log-aware suggestions, not the card
        history = []
    return build_scorecard(
        run,
        kb=kb,
        gs=gs,
        engine_stats=stats,
        extra_runs=extra,
        history=history,
        llm_configured=llm_configured,
    )
