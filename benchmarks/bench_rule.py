"""The acceptance rule's false-accept rate on null changes, its power, and the primary measure.

    python benchmarks/bench_rule.py --kb /tmp/rule_cmrc_kb --dataset /tmp/rule_cmrc.yaml \
        [--index DIR] [--nulls 200] [--out benchmarks/results/rule_null.json]

Prepare the CMRC 2018 trial set once (shared data, read-only):

    wikirag import-beir ../shared/data/benchmarks/cmrc2018-trial \
        --kb-out /tmp/rule_cmrc_kb --dataset-out /tmp/rule_cmrc.yaml
    wikirag index --kb /tmp/rule_cmrc_kb

What it measures, on the tune split (holdout used as the rule uses it):
1. Real changes vs the default config, decided by the statistical and strict presets.
2. Null changes of two kinds, each ``--nulls`` seeds, decided by the statistical rule:
   - ``swap``: a real change's per-query (baseline, candidate) results, each query's pair
     swapped by a fair coin: the per-query differences become symmetric noise with the
     real change's size and tie structure, and zero expected effect.
   - ``jitter``: the baseline's rank of the first relevant chapter, perturbed by -1/0/+1
     independently in both arms: zero expected effect, realistic ties.
   The false-accept rate is accepted / nulls, with a Clopper-Pearson 95% interval.
3. Power: the keyword change with each pair kept with probability (1 + s) / 2 and swapped
   otherwise (s = 0 is the null, s = 1 the real change), 50 seeds per s.
4. The primary measure: for each measure, how often the rule accepts the keyword change
   on random 100-query subsets (half the split if smaller) (sensitivity), and how many pairs of the
   real configs differ significantly (discriminative power, Sakai 2006).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import beta

from engine.config import EngineConfig
from workbench.eval import golden
from workbench.eval.engines import evaluator
from workbench.eval.stats import compare_paired
from workbench.tune.acceptance import decide_scores
from workbench.tune.experiments import score_candidate
from workbench.tune.rule import STATISTICAL, STRICT
from workbench.workspace import resolve

CHANGES = {
    "search.mode=keyword": {"search.mode": "keyword"},
    "search.mode=vector": {"search.mode": "vector"},
    "expansion.enabled=false": {"expansion.enabled": False},
    "fusion.bm25_weight=2": {"fusion.bm25_weight": 2.0},
    "fusion.k=10": {"fusion.k": 10},
    "fusion.vector_weight=0.3": {"fusion.vector_weight": 0.3},
}
MEASURES = ("mrr", "ndcg@10", "recall@5", "hit@5")


def _cp(k: int, n: int) -> list[float]:
    lo = 0.0 if k == 0 else float(beta.ppf(0.025, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(0.975, k + 1, n - k))
    return [round(lo, 4), round(hi, 4)]


def _groups(run, mode: str) -> dict[str, dict[str, str]]:
    return {
        by: {r.item.id: str(getattr(r.item, by)) for r in run.for_mode(mode)}
        for by in STATISTICAL.slice_by
    }


def _swap(a: dict, b: dict, lat_a: dict, lat_b: dict, rng, keep: float = 0.5):
    qa, qb, la, lb = {}, {}, [], []
    for q in a:
        if rng.random() < keep:
            qa[q], qb[q] = a[q], b[q]
            la.append(lat_a[q])
            lb.append(lat_b[q])
        else:
            qa[q], qb[q] = b[q], a[q]
            la.append(lat_b[q])
            lb.append(lat_a[q])
    return qa, qb, float(np.median(lb) - np.median(la))


def _rank_metrics(rank: int | None) -> dict[str, float]:
    r = rank or 10**6
    return {
        "mrr": 1.0 / r if r <= 20 else 0.0,
        "recall@5": float(r <= 5),
        "hit@5": float(r <= 5),
        "ndcg@10": 1.0 / np.log2(r + 1) if r <= 10 else 0.0,
    }


def _first_relevant(result) -> int | None:
    rel = set(result.item.relevant)
    return next((i for i, x in enumerate(result.ranked, 1) if x.node_id in rel), None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kb", required=True)
    ap.add_argument("--index", default=None)
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--nulls", type=int, default=200)
    ap.add_argument("--resamples", type=int, default=2000)
    ap.add_argument("--out", default="benchmarks/results/rule_null.json")
    args = ap.parse_args()
    t0 = time.perf_counter()
    ws = resolve(args.kb, args.index, None, args.dataset, experiments_root="/tmp/rule_bench_exp")
    gs = golden.load(ws.dataset)
    rule = dataclasses.replace(STATISTICAL, resamples=args.resamples)
    base_cfg = EngineConfig()

    def ev(c: EngineConfig):
        return evaluator(ws, c)

    out: dict[str, Any] = {
        "dataset": str(args.dataset),
        "rule": rule.to_dict(),
        "nulls_per_kind": args.nulls,
    }
    scored = {}
    real = {}
    for name, ov in CHANGES.items():
        sc = score_candidate(gs, ev, base_cfg, base_cfg.with_overrides(ov), rule)
        scored[name] = sc
        strict = score_candidate(gs, ev, base_cfg, base_cfg.with_overrides(ov), STRICT)
        c = sc.decision.comparisons
        real[name] = {
            "tune_queries": c["mrr"].wins + c["mrr"].losses + c["mrr"].ties,
            "deltas": {m: round(c[m].delta, 4) for m in MEASURES},
            "mrr_ci": [round(c["mrr"].ci_low, 4), round(c["mrr"].ci_high, 4)],
            "wins_losses_ties_mrr": [c["mrr"].wins, c["mrr"].losses, c["mrr"].ties],
            "statistical": "accepted" if sc.decision.accepted else "rolled back",
            "statistical_failed": sc.decision.reasons,
            "strict": "accepted" if strict.decision.accepted else "rolled back",
            "strict_failed": strict.decision.reasons,
        }
        print(name, real[name]["statistical"], "| strict:", real[name]["strict"], flush=True)
    out["real_changes"] = real

    def pq(sc, who: str, split: str):
        run = sc.runs[(who, split)]
        return run.per_query(sc.mode), {r.item.id: r.latency_ms for r in run.for_mode(sc.mode)}

    # 2. null changes
    names = list(CHANGES)
    nulls: dict[str, Any] = {}
    acc, deltas = 0, []
    for seed in range(args.nulls):
        rng = np.random.default_rng(seed)
        sc = scored[names[seed % len(names)]]
        (a, la), (b, lb) = pq(sc, "b", "tune"), pq(sc, "c", "tune")
        (ha, hla), (hb, hlb) = pq(sc, "b", "holdout"), pq(sc, "c", "holdout")
        qa, qb, lat = _swap(a, b, la, lb, rng)
        hqa, hqb, _ = _swap(ha, hb, hla, hlb, rng)
        groups = _groups(sc.runs[("b", "tune")], sc.mode)
        d = decide_scores(qa, qb, rule, groups=groups, latency_delta_ms=lat, holdout=(hqa, hqb))
        acc += d.accepted
        deltas.append(d.comparisons["mrr"].delta)
    nulls["swap"] = {
        "accepted": acc,
        "rate": acc / args.nulls,
        "rate_ci95": _cp(acc, args.nulls),
        "mean_mrr_delta": float(np.mean(deltas)),
    }
    print("swap nulls accepted", acc, "of", args.nulls, flush=True)
    base_t = scored[names[0]].runs[("b", "tune")]
    base_h = scored[names[0]].runs[("b", "holdout")]
    mode = scored[names[0]].mode
    ranks_t = {r.item.id: _first_relevant(r) for r in base_t.for_mode(mode)}
    ranks_h = {r.item.id: _first_relevant(r) for r in base_h.for_mode(mode)}
    groups = _groups(base_t, mode)

    def jitter(ranks: dict, rng) -> dict:
        out_: dict = {}
        for q, r in ranks.items():
            out_[q] = _rank_metrics(None if r is None else max(1, r + rng.choice([-1, 0, 0, 0, 1])))
        return out_

    acc = 0
    for seed in range(args.nulls):
        rng = np.random.default_rng(10_000 + seed)
        d = decide_scores(
            jitter(ranks_t, rng),
            jitter(ranks_t, rng),
            rule,
            groups=groups,
            holdout=(jitter(ranks_h, rng), jitter(ranks_h, rng)),
        )
        acc += d.accepted
    nulls["jitter"] = {"accepted": acc, "rate": acc / args.nulls, "rate_ci95": _cp(acc, args.nulls)}
    print("jitter nulls accepted", acc, "of", args.nulls, flush=True)
    total = nulls["swap"]["accepted"] + nulls["jitter"]["accepted"]
    nulls["all"] = {
        "accepted": total,
        "of": 2 * args.nulls,
        "rate": total / (2 * args.nulls),
        "rate_ci95": _cp(total, 2 * args.nulls),
    }
    # which half of "CI low > 0 or p < alpha" falsely accepts: every real change, 200 swaps each
    per_test = {"ci_low_above_0": 0, "randomization_p": 0, "either": 0, "draws": 0}
    for sc in scored.values():
        (a, _), (b, _) = pq(sc, "b", "tune"), pq(sc, "c", "tune")
        zero = dict.fromkeys(a, 0.0)
        for seed in range(args.nulls):
            qa, qb, _ = _swap(a, b, zero, zero, np.random.default_rng(40_000 + seed))
            c = compare_paired(qa, qb, rule.primary, alpha=rule.alpha, n_resamples=args.resamples)
            x, y = c.ci_low > 0, c.delta > 0 and c.p_value < rule.alpha
            per_test["ci_low_above_0"] += x
            per_test["randomization_p"] += y
            per_test["either"] += x or y
            per_test["draws"] += 1
    nulls["primary_criterion_alone"] = {
        **per_test,
        "either_rate": per_test["either"] / per_test["draws"],
        "either_rate_ci95": _cp(per_test["either"], per_test["draws"]),
    }
    print("primary criterion alone", nulls["primary_criterion_alone"], flush=True)
    out["null_changes"] = nulls

    # 3. power on the keyword change, scaled by s
    kw = scored["search.mode=keyword"]
    (a, la), (b, lb) = pq(kw, "b", "tune"), pq(kw, "c", "tune")
    groups = _groups(kw.runs[("b", "tune")], kw.mode)
    power = []
    for s in (0.0, 0.25, 0.5, 0.75, 1.0):
        acc, ds = 0, []
        for seed in range(50):
            rng = np.random.default_rng(20_000 + seed)
            qa, qb, lat = _swap(a, b, la, lb, rng, keep=(1 + s) / 2)
            d = decide_scores(qa, qb, rule, groups=groups, latency_delta_ms=lat)
            acc += d.accepted
            ds.append(d.comparisons["mrr"].delta)
        power.append(
            {"s": s, "mean_mrr_delta": round(float(np.mean(ds)), 4), "accepted_of_50": acc}
        )
        print("power s", s, acc, "/ 50", flush=True)
    out["power_keyword_scaled"] = power

    # 4. primary measure: sensitivity on 100-query subsets and discriminative power
    qids = sorted(a)
    size = min(100, len(qids) // 2)  # the bundled wiki's tune split has fewer than 200
    sens = {}
    for m in MEASURES:
        r_m = dataclasses.replace(rule, primary=m, slice_by=())
        acc = 0
        for seed in range(100):
            rng = np.random.default_rng(30_000 + seed)
            sub = rng.choice(qids, size=size, replace=False)
            acc += decide_scores({q: a[q] for q in sub}, {q: b[q] for q in sub}, r_m).accepted
        sens[m] = {"subset_size": size, "keyword_accepted_on_subsets": acc / 100}
    configs = {"default": scored[names[0]].runs[("b", "tune")].per_query(mode)}
    for name, sc in scored.items():
        configs[name] = sc.runs[("c", "tune")].per_query(sc.mode)
    for m in MEASURES:
        sig, ties = 0, []
        pairs = list(itertools.combinations(configs, 2))
        for x, y in pairs:
            c = compare_paired(configs[x], configs[y], m, n_resamples=args.resamples)
            sig += c.p_value < rule.alpha
            ties.append(c.ties / (c.wins + c.losses + c.ties))
        sens[m]["significant_pairs"] = f"{sig}/{len(pairs)}"
        sens[m]["mean_tie_fraction"] = round(float(np.mean(ties)), 3)
    out["primary_measure"] = sens
    out["seconds"] = round(time.perf_counter() - t0, 1)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(
        json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    print(json.dumps({k: out[k] for k in ("null_changes", "power_keyword_scaled")}, indent=1))
    print(json.dumps(sens, indent=1))


if __name__ == "__main__":
    main()
