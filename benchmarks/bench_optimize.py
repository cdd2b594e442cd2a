"""`wikirag optimize` speed: trials per second on a 1,000-query set, candidates cached.

    python benchmarks/bench_optimize.py [--data ../shared/data/benchmarks/cmrc2018-trial]
        [--work /tmp/wikirag-optimize] [--trials 100] [--reuse] [--out benchmarks/results/optimize.json]

Steps:
1. ``wikirag import-beir`` + ``wikirag index`` (default embedder) unless ``--reuse``;
2. a warm-up study of 2 trials over all 1,000 answerable questions: fills the evaluation
   cache (one retrieval per query for the vector channel) -- timed, reported as "warm-up";
3. the measured study: ``--trials`` seeded TPE trials, 5-fold CV over the same 1,000
   questions, on the warm cache. A trial that meets a new BM25 setting (k1, b, title
   weight, expansion on/off) pays for that setting's keyword channel over all queries;
   a fusion-only trial only re-fuses. Both kinds are counted and timed.

The target (issue 11) is 100 trials in <= 60 s. The machine's load average and the study's
CPU seconds are recorded: on a shared 2-core box under load the wall-clock numbers are
several times an idle machine's, the CPU seconds are not.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


def _cli(*args: str) -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "workbench.cli", *args], check=True, capture_output=True)
    return time.perf_counter() - t


def main(argv: list[str] | None = None) -> int:
    root = Path(__file__).resolve().parents[1]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(root.parent / "shared/data/benchmarks/cmrc2018-trial"))
    ap.add_argument("--work", default="/tmp/wikirag-optimize")
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reuse", action="store_true", help="reuse an existing --work index")
    ap.add_argument("--out", default=str(root / "benchmarks/results/optimize.json"))
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    sys.path.insert(0, str(root))

    from workbench.bench.measure import load_avg, peak_rss_mb
    from workbench.eval import golden
    from workbench.eval.engines import evaluator
    from workbench.tune.optimizer import K_FOLDS, run_study
    from workbench.workspace import resolve

    work = Path(args.work)
    kb, idx, ds = work / "kb", work / "index", work / "cmrc.yaml"
    out: dict = {"data": f"reused {work}", "trials": args.trials, "seed": args.seed}
    if not (args.reuse and (idx / "manifest.json").is_file()):
        out["data"] = args.data
        work.mkdir(parents=True, exist_ok=True)
        _cli("import-beir", args.data, "--kb-out", str(kb), "--dataset-out", str(ds))
        out["index_s"] = round(_cli("index", "--kb", str(kb), "--index", str(idx)), 2)

    ws = resolve(kb, index=idx, dataset=ds, experiments_root=work / "experiments")
    base = ws.load_config()
    items = golden.load(ds).answerable("all")
    ev = evaluator(ws, base)
    t = time.perf_counter()
    run_study(ev, base, items, trials=2, seed=args.seed, k_folds=K_FOLDS)
    out["warm_up_s"] = round(time.perf_counter() - t, 2)

    load_before = load_avg()
    t, cpu = time.perf_counter(), time.process_time()
    study = run_study(ev, base, items, trials=args.trials, seed=args.seed, k_folds=K_FOLDS)
    total, cpu = time.perf_counter() - t, time.process_time() - cpu
    search = study.budget["search_seconds"]
    secs = [r.seconds for r in study.trials]
    lexical = {
        json.dumps(
            {k: v for k, v in r.params.items() if k.startswith(("lexical.", "expansion."))},
            sort_keys=True,
        )
        for r in study.trials
        if r.params.get("search.mode") != "vector"
    }
    best = study.trial(study.best)
    out |= {
        "queries": len(items),
        "k_folds": K_FOLDS,
        "measure": study.measure,
        "search_s": round(search, 2),
        "study_s_including_channel_set_up": round(total, 2),
        # CPU seconds of this process for the whole study: what an idle machine would take,
        # give or take, whatever the load average says.
        "study_cpu_s": round(cpu, 2),
        "trials_per_s": round(len(study.trials) / search, 2),
        "trial_s": {
            "median": round(statistics.median(secs), 4),
            "p90": round(sorted(secs)[int(0.9 * (len(secs) - 1))], 4),
            "max": round(max(secs), 4),
        },
        "distinct_bm25_settings": len(lexical),
        "target": "100 trials <= 60 s",
        "meets_target": bool(search <= 60.0 * len(study.trials) / 100),
        "best_trial": {"number": study.best, "cv": best.value if best else None},
        "baseline_cv": study.baseline_score,
        "load_avg_before": load_before,
        "load_avg_after": load_avg(),
        "cpus": os.cpu_count(),
        "peak_rss_mb": peak_rss_mb(),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
