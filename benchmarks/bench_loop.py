"""The tuning loop's steps, warm, on the bundled wiki: each step's median wall time over a few
repetitions in one process (target: <= 2 s each, issue 24).

    python benchmarks/bench_loop.py [--reps 5] [--out benchmarks/results/loop_wiki.json]

Steps: compare the baseline with ``baseline+fusion.bm25_weight=0.4`` saving both runs
(``compare_rescore``: both configs re-scored from the cache, runs saved;
``compare_new_candidate``: the baseline's saved run re-used and a new candidate weight
scored and saved, the loop's usual compare; ``compare_reuse``: both saved runs re-used,
what a second look costs), build the per-query matrix and select the lost
queries, one lost query's ranked lists side by side (titles and snippets from the KB), the
already-tried check, run the candidate as an experiment (decided, logged) and read the log
back (trajectory + rows with readable verdicts). The experiments folder is a temporary copy
of experiments/wiki (a fresh one per experiment repetition), so the repo's log is untouched.
Warm: one untimed round first opens the engine, loads the models and fills the eval cache.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

CANDIDATE = "baseline+fusion.bm25_weight=0.4"


def timed(fn: Callable[[], Any], reps: int) -> tuple[list[float], Any]:
    times, out = [], None
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return times, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--index", default=".wikirag/wiki")
    ap.add_argument("--out", default="benchmarks/results/loop_wiki.json")
    args = ap.parse_args()
    os.chdir(REPO)

    from workbench.eval import golden
    from workbench.eval.engines import evaluator
    from workbench.tune.compare import compare_configs, parse_config_spec
    from workbench.tune.experiment_history import log_rows, trajectory
    from workbench.tune.experiment_store import ExperimentStore
    from workbench.tune.experiments import run_experiment
    from workbench.tune.tried import earlier_try
    from workbench.workspace import resolve

    tmp = Path(tempfile.mkdtemp(prefix="bench_loop_"))
    try:

        def fresh_workspace(n: int) -> Any:
            root = tmp / f"exp{n}"
            shutil.copytree(REPO / "experiments" / "wiki", root / "wiki")
            return resolve(kb="wiki", index=args.index, experiments_root=root)

        ws = fresh_workspace(0)
        gs = golden.load(ws.dataset)
        configs = [parse_config_spec(s, ws) for s in ("baseline", CANDIDATE)]
        ev_for = lambda c: evaluator(ws, c)  # noqa: E731
        t0 = time.perf_counter()
        cold = compare_configs(ws, configs, gs, evaluator_for=ev_for)
        cold_s = time.perf_counter() - t0
        kb = evaluator(ws, configs[0][1]).engine.kb
        steps: dict[str, list[float]] = {}

        steps["compare_rescore"], _ = timed(
            lambda: compare_configs(ws, configs, gs, evaluator_for=ev_for, reuse=False),
            args.reps,
        )
        # the loop's usual compare: the baseline's saved run re-used, a new candidate scored
        new = iter(range(1, 1000))
        steps["compare_new_candidate"], _ = timed(
            lambda: compare_configs(
                ws,
                [
                    configs[0],
                    parse_config_spec(f"baseline+fusion.bm25_weight={0.4 + next(new) / 100}", ws),
                ],
                gs,
                evaluator_for=ev_for,
            ),
            args.reps,
        )
        steps["compare_reuse"], cmp = timed(
            lambda: compare_configs(ws, configs, gs, evaluator_for=ev_for), args.reps
        )
        assert all(cmp.reused), "the saved runs were not re-used"
        steps["matrix"], lost = timed(lambda: cmp.matrix().select("mrr", outcome="lost"), args.reps)
        qid = lost[0].qid
        steps["side_by_side"], sbs = timed(lambda: cmp.side_by_side(qid, kb=kb), args.reps)
        store0 = ExperimentStore(ws.experiments)
        steps["already_tried_check"], _ = timed(
            lambda: earlier_try(store0, {"fusion.bm25_weight": 0.4}, gs.content_hash), args.reps
        )
        exp_times, verdicts = [], []
        for n in range(args.reps):
            w = fresh_workspace(n + 1)  # copy not timed: each run starts from the same log
            t0 = time.perf_counter()
            res = run_experiment(w, lambda c, w=w: evaluator(w, c), {"fusion.bm25_weight": 0.4})
            exp_times.append(time.perf_counter() - t0)
            verdicts.append(res.verdict)
        steps["run_as_experiment"] = exp_times
        store = ExperimentStore(w.experiments)
        steps["read_log"], rows = timed(lambda: (trajectory(store), log_rows(store)), args.reps)
        from workbench.tune.verdict import from_record

        last = store.load_records()[-1]
        out = {
            "benchmark": "tuning loop steps, warm, bundled wiki",
            "reps": args.reps,
            "load": os.getloadavg(),
            "cpus": os.cpu_count(),
            "queries": cmp.queries,
            "cold_first_compare_s": round(cold_s, 3),
            "cold_reused": list(cold.reused),
            "lost_query": qid,
            "side_by_side_columns": len(sbs.columns),
            "experiment_decision": verdicts[-1],
            "experiment_verdict": (v.text() if (v := from_record(last)) else ""),
            "log_rows": len(rows[1]),
            "median_s": {k: round(statistics.median(v), 4) for k, v in steps.items()},
            "max_s": {k: round(max(v), 4) for k, v in steps.items()},
            "target_s": 2.0,
        }
        out["all_within_target"] = all(v <= 2.0 for v in out["median_s"].values())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    Path(args.out).write_text(
        json.dumps(out, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    print(json.dumps(out, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
