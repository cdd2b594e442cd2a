"""Does a learned ranker (LambdaMART, LightGBM) earn its place over the shipped fusion?

    python benchmarks/bench_learned_fusion.py [--sets wiki,wiki-independent,vue,handbook,cmrc]
        [--cache .wikirag/bench] [--out benchmarks/results/learned_fusion.json]

Needs the indexes `bench_defaults.py` builds (``<cache>/<set>/index``) and LightGBM
(`pip install lightgbm==4.7.0`; not a dependency of the product unless it earns a place).

Per set, per query: both channels' candidates at the default pool (what hybrid fuses), and
one row per candidate chapter with features a fusion can see — each channel's score, rank
and per-query normalised score, presence in each channel, the shipped fusion's (dbsf) score
and rank, the chapter's depth and length, the share of query tokens in its title. Two
measurements, each against the shipped fusion on the same candidates and with the same
tree-aware metric as evaluation:

- *tune -> holdout*: the model's size (trees, leaves) is chosen by 5-fold cross-validation
  inside the golden set's tune split, it is fitted on the whole tune split and scored on the
  holdout split (what the acceptance rule would see);
- *5-fold over every query*: train on four folds, score the fifth; a paired comparison over
  all queries (more queries, so a smaller change can show).

Only the fusion step is compared: no rerank, no child injection (both off by default).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_defaults import SHARED, bench_sets, prepare_cmrc  # noqa: E402

from engine.config import EngineConfig  # noqa: E402
from engine.pipeline import Candidates, Composed, compose, pool_size  # noqa: E402
from engine.search import Engine  # noqa: E402
from engine.tokenizer import tokenize  # noqa: E402
from workbench.eval import golden  # noqa: E402
from workbench.eval import metrics as M  # noqa: E402
from workbench.eval.evaluate import EVAL_DEPTH, parent_function  # noqa: E402
from workbench.eval.stats import compare_paired  # noqa: E402
from workbench.tune.trial_scoring import make_folds  # noqa: E402

FEATURES = (
    "v_score", "v_rank", "v_norm", "v_in",
    "b_score", "b_rank", "b_norm", "b_in",
    "fused_score", "fused_rank", "depth", "log_len", "title_share",
)  # fmt: skip
GRID = [(n, leaves) for n in (50, 150, 400) for leaves in (3, 7, 15)]


def candidate_rows(
    cands: Candidates, composed: Composed, cfg: EngineConfig, kb_nodes: dict[str, Any]
) -> tuple[list[str], np.ndarray]:
    """Candidate ids and their feature matrix (the fused pool is the pipeline's own)."""
    pool, fused = composed.pool, composed.fused
    vec, bm = list(cands.vector[:pool]), list(cands.bm25[:pool])
    ids = list(dict.fromkeys([n for n, _ in fused] + [n for n, _ in vec] + [n for n, _ in bm]))
    v = {n: (s, r) for r, (n, s) in enumerate(vec, 1)}
    b = {n: (s, r) for r, (n, s) in enumerate(bm, 1)}
    f = {n: (s, r) for r, (n, s) in enumerate(fused, 1)}
    v_min = min((s for s, _ in v.values()), default=0.0)
    v_span = (max((s for s, _ in v.values()), default=0.0) - v_min) or 1.0
    b_max = max((s for s, _ in b.values()), default=0.0) or 1.0
    q_tokens = set(tokenize(cands.query, cfg.lexical.tokenizer_spec))
    rows = []
    for n in ids:
        node = kb_nodes.get(n)
        title_tokens = set(tokenize(node.title, cfg.lexical.tokenizer_spec)) if node else set()
        vsc, vr = v.get(n, (v_min, pool + 1))
        bsc, br = b.get(n, (0.0, pool + 1))
        fsc, fr = f.get(n, (0.0, len(ids) + 1))
        rows.append(
            [
                vsc, vr, (vsc - v_min) / v_span, float(n in v),
                bsc, br, bsc / b_max, float(n in b),
                fsc, fr,
                float(node.level) if node else 0.0,
                float(np.log1p(len(node.content))) if node else 0.0,
                len(q_tokens & title_tokens) / (len(q_tokens) or 1),
            ]
        )  # fmt: skip
    return ids, np.array(rows, dtype=float)


def score(ids: list[str], item: golden.GoldenItem, hierarchy: Any) -> dict[str, float]:
    """The query's metrics as evaluation computes them: to the same depth, tree-aware."""
    return M.evaluate_query(
        ids[:EVAL_DEPTH],
        item.qrels,
        ("mrr", "hit@5", "ndcg@10"),
        hierarchy,
        relevance_level=item.relevant_grade,
    )


def fit(qs: list[dict[str, Any]], n_trees: int, leaves: int, seed: int = 7) -> Any:
    import lightgbm as lgb

    x = np.vstack([q["x"] for q in qs])
    y = np.concatenate([q["y"] for q in qs])
    model = lgb.LGBMRanker(
        objective="lambdarank",
        n_estimators=n_trees,
        num_leaves=leaves,
        learning_rate=0.05,
        min_child_samples=10,
        subsample=0.8,
        subsample_freq=1,
        colsample_bytree=0.8,
        random_state=seed,
        n_jobs=1,
        verbose=-1,
    )
    model.fit(x, y, group=[len(q["y"]) for q in qs])
    return model


def learned_scores(model: Any, qs: list[dict[str, Any]], hierarchy: Any) -> dict[str, dict]:
    out = {}
    for q in qs:
        order = np.argsort(-model.predict(q["x"]), kind="stable")
        out[q["item"].id] = score([q["ids"][i] for i in order], q["item"], hierarchy)
    return out


def folds(qs: list[dict[str, Any]], k: int = 5) -> list[list[dict[str, Any]]]:
    """The optimizer's own fold split (by query id, seeded), so both measure alike."""
    by_id = {q["item"].id: q for q in qs}
    return [[by_id[i] for i in fold] for fold in make_folds(list(by_id), k, seed=0)]


def pick_size(tune: list[dict[str, Any]], hierarchy: Any) -> tuple[int, int, float]:
    """The (trees, leaves) with the best 5-fold CV MRR inside ``tune``."""
    best = (0, 0, -1.0)
    parts = folds(tune)
    for n_trees, leaves in GRID:
        mrrs = []
        for j, test in enumerate(parts):
            train = [q for i, p in enumerate(parts) if i != j for q in p]
            if not any(q["y"].any() for q in train):
                continue
            got = learned_scores(fit(train, n_trees, leaves), test, hierarchy)
            mrrs.extend(v["mrr"] for v in got.values())
        m = float(np.mean(mrrs)) if mrrs else -1.0
        if m > best[2]:
            best = (n_trees, leaves, m)
    return best


def measure_set(name: str, kb: str, dataset: str, index: Path) -> dict[str, Any]:
    cfg = EngineConfig()
    eng = Engine.open(kb, index, cfg)
    gs = golden.load(dataset)
    nodes = eng.kb.nodes
    hierarchy = parent_function(eng.kb)
    top_k = cfg.search.top_k
    pool = pool_size(cfg, top_k, False)
    qs = []
    for item in gs.answerable():
        cands = eng.candidates(item.query, pool=pool)
        # The baseline is the shipped pipeline's own ranking, as evaluation builds it.
        composed = compose(cands, cfg, top_k=top_k, mode="hybrid", depth=EVAL_DEPTH)
        fused = [r.node_id for r in composed.ranked]
        ids, x = candidate_rows(cands, composed, cfg, nodes)
        grades = item.qrels
        y = np.array([grades.get(n, 0) >= item.relevant_grade for n in ids], dtype=int)
        qs.append({"item": item, "ids": ids, "x": x, "y": y, "base": score(fused, item, hierarchy)})
    tune = [q for q in qs if q["item"].split == "tune"]
    hold = [q for q in qs if q["item"].split == "holdout"]
    n_trees, leaves, cv_mrr = pick_size(tune, hierarchy)
    model = fit(tune, n_trees, leaves)
    base_h = {q["item"].id: q["base"] for q in hold}
    learned_h = learned_scores(model, hold, hierarchy)
    base_all = {q["item"].id: q["base"] for q in qs}
    learned_all: dict[str, dict] = {}
    for j, test in enumerate(parts := folds(qs)):
        train = [q for i, p in enumerate(parts) if i != j for q in p]
        learned_all.update(learned_scores(fit(train, n_trees, leaves), test, hierarchy))
    importance = dict(
        sorted(
            zip(FEATURES, (int(v) for v in model.booster_.feature_importance("gain")), strict=True),
            key=lambda kv: -kv[1],
        )
    )
    return {
        "queries": len(qs),
        "n_tune": len(tune),
        "n_holdout": len(hold),
        "candidates_per_query": round(float(np.mean([len(q["ids"]) for q in qs])), 1),
        "gold_in_candidates": round(float(np.mean([q["y"].any() for q in qs])), 3),
        "size": {"trees": n_trees, "leaves": leaves, "tune_cv_mrr": round(cv_mrr, 4)},
        "holdout": {m: compare_paired(base_h, learned_h, m).to_dict() for m in ("mrr", "hit@5")},
        "five_fold_all": {
            m: compare_paired(base_all, learned_all, m).to_dict() for m in ("mrr", "hit@5")
        },
        "gain_importance": importance,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default="wiki,wiki-independent,vue,handbook,cmrc")
    ap.add_argument("--cache", default=str(ROOT / ".wikirag" / "bench"))
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/learned_fusion.json"))
    args = ap.parse_args(argv)
    try:
        import lightgbm  # noqa: F401
    except ImportError:
        sys.exit("bench_learned_fusion: needs LightGBM: pip install lightgbm==4.7.0")
    wanted = [s for s in args.sets.split(",") if s]
    by_name = {s.name: s for s in bench_sets(SHARED)}
    cache = Path(args.cache)
    out: dict[str, Any] = {
        "command": " ".join(sys.argv),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "load": [round(x, 2) for x in os.getloadavg()],
        "features": list(FEATURES),
        "sets": {},
    }
    for name in wanted:
        s = by_name[name]
        kb, ds = s.kb, s.dataset
        if name == "cmrc":
            kb, ds = prepare_cmrc(SHARED / "benchmarks" / "cmrc2018-trial", cache / "cmrc")
        index = cache / s.index_name / "index"
        if not index.is_dir():
            print(f"== {name}: no index at {index} (run bench_defaults.py first); skipped")
            continue
        t0 = time.perf_counter()
        r = measure_set(name, kb, ds, index)
        r["seconds"] = round(time.perf_counter() - t0, 1)
        out["sets"][name] = r
        h, a = r["holdout"]["mrr"], r["five_fold_all"]["mrr"]
        print(
            f"== {name}: holdout MRR {h['mean_a']:.3f} -> {h['mean_b']:.3f} (p {h['p_value']:.2f}),"
            f" 5-fold all {a['mean_a']:.3f} -> {a['mean_b']:.3f} "
            f"[{a['ci_low']:+.3f}, {a['ci_high']:+.3f}] p {a['p_value']:.2f}"
            f" {a['wins']}/{a['losses']}/{a['ties']}",
            flush=True,
        )
    Path(args.out).write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
