"""`wikirag bench --rescore`: time the evaluator's cached paths (no model calls)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.config import EngineConfig
from workbench.bench.measure import stderr_line
from workbench.eval import golden
from workbench.eval.evaluate import EvalCache, Evaluator
from workbench.eval.percentiles import percentile
from workbench.tune.experiments import run_experiment
from workbench.tune.sweep import sweep
from workbench.workspace import Workspace


def bench_rescoring(
    engine: Any,
    dataset: str | Path,
    cfg: EngineConfig,
    work: str | Path,
    *,
    n_rescore: int = 1000,
    n_small: int = 100,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Time the evaluator's cached paths (issues 4/5): re-score, an experiment, a sweep.

    The cache is warmed by one full evaluation (``rescore_cold_s``: model calls), then:
    ``rescore_1000_s`` re-scores another fusion config over the same queries from cache;
    ``experiment_100_s`` runs ``run_experiment`` (baseline + a fusion change, tune and
    holdout, decision, log append) on a 100-query golden set; ``sweep25_100_s`` runs a
    5 x 5 fusion.k x fusion.vector_weight sweep (tune + holdout) on those 100 queries.
    """
    import yaml

    say = log or stderr_line
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    gs = golden.load(dataset)
    items = gs.answerable()[:n_rescore]
    out: dict[str, Any] = {"rescore_queries": len(items)}

    def subset(name: str, chosen: list[Any]) -> Path:
        path = work / f"{name}.yaml"
        body = {"name": name, "queries": [i.to_dict() for i in chosen]}
        path.write_text(yaml.safe_dump(body, allow_unicode=True, sort_keys=False), "utf-8")
        return path

    big = golden.load(subset("rescore", items))
    cache = EvalCache()
    base = engine.with_config(cfg)
    ev = Evaluator(base, cache)
    say(f"bench: warming the evaluation cache ({len(items)} queries, model calls)")
    t = time.perf_counter()
    ev.run(big, cfg, modes=["hybrid"])
    out["rescore_cold_s"] = round(time.perf_counter() - t, 3)
    other = cfg.with_overrides({"fusion.k": 30.0, "fusion.vector_weight": 0.5})
    times = []
    for _ in range(3):
        t = time.perf_counter()
        run = Evaluator(engine.with_config(other), cache).run(big, other, modes=["hybrid"])
        times.append(time.perf_counter() - t)
    out["rescore_1000_s"] = round(percentile(times, 50), 3)
    out["rescore_1000_runs_s"] = [round(x, 3) for x in times]
    out["rescore_cache_misses"] = run.cache_misses

    small = items[:n_small]
    ds = subset("small", small)
    exp_dir = work / "experiments"
    exp_dir.mkdir(exist_ok=True)
    (exp_dir / "baseline.yaml").write_text(cfg.to_yaml(), "utf-8")
    ws = Workspace(
        kb=Path(engine.kb.root),
        index=work / "unused-index",
        dataset=ds,
        experiments=exp_dir,
        config_path=None,
    )

    def evaluator_for(c: EngineConfig) -> Evaluator:
        return Evaluator(engine.with_config(c), cache)

    t = time.perf_counter()
    res = run_experiment(ws, evaluator_for, {"fusion.vector_weight": 0.5, "fusion.k": 20.0})
    out["experiment_100_s"] = round(time.perf_counter() - t, 3)
    out["experiment_queries"] = len(small)
    out["experiment_decision"] = "accepted" if res.decision.accepted else "rolled back"

    grid: dict[str, list[Any]] = {
        "fusion.k": [10, 20, 40, 60, 100],
        "fusion.vector_weight": [0.25, 0.5, 1.0, 2.0, 4.0],
    }
    t = time.perf_counter()
    sw = sweep(ws, cfg, grid, golden.load(ds), evaluator_for=evaluator_for)
    out["sweep25_100_s"] = round(time.perf_counter() - t, 3)
    out["sweep_points"] = len(sw.points)
    out["sweep_best"] = sw.best.row(sw.split)
    out["rescore_targets"] = {
        "rescore_1000_s <= 1": out["rescore_1000_s"] <= 1.0,
        "experiment_100_s <= 2": out["experiment_100_s"] <= 2.0,
        "sweep25_100_s <= 10": out["sweep25_100_s"] <= 10.0,
    }
    return out
