"""Fusion methods side by side: MRR / Hit@5 / Recall@5 per method and weight, expansion off and on.

    python benchmarks/bench_fusion.py KB_DIR INDEX DATASET OUT.json

The KB must be indexed first (``wikirag index --kb KB_DIR --index INDEX``); for the CMRC
trial, ``wikirag import-beir`` it first. Candidates are retrieved once per expansion
setting and every fusion config is re-scored from the evaluation cache, through the same
``Evaluator`` that ``wikirag eval`` uses. Results: benchmarks/results/fusion_*.json.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from engine.config import EngineConfig
from engine.search import Engine
from workbench.eval import golden
from workbench.eval.evaluate import EvalCache, Evaluator

BM25_SHARES = (0.5, 0.6, 0.7, 0.8, 0.9)  # bm25 weight / (vector + bm25 weight)


def configs() -> list[tuple[str, str, dict[str, object]]]:
    out: list[tuple[str, str, dict[str, object]]] = [
        ("vector", "vector", {}),
        ("keyword", "keyword", {}),
        ("rrf 1:1", "hybrid", {}),
    ]
    for share in BM25_SHARES:
        w = {"fusion.vector_weight": round(1 - share, 2), "fusion.bm25_weight": share}
        for norm in ("minmax", "zscore", "tmm"):
            out.append(
                (
                    f"convex {norm} bm25={share}",
                    "hybrid",
                    {"fusion.method": "convex", "fusion.normalization": norm, **w},
                )
            )
        out.append((f"dbsf bm25={share}", "hybrid", {"fusion.method": "dbsf", **w}))
    for share in (0.7, 0.9):
        w = {"fusion.vector_weight": round(1 - share, 2), "fusion.bm25_weight": share}
        out.append((f"rrf bm25={share}", "hybrid", w))
    return out


def main(kb: str, index: str, dataset: str, out: str) -> None:
    gs = golden.load(dataset)
    base = EngineConfig()
    ev = Evaluator(Engine.open(kb, index, base), EvalCache())
    rows = []
    for expansion in (False, True):
        for name, mode, overrides in configs():
            cfg = base.with_overrides({"expansion.enabled": expansion, **overrides})
            t0 = time.time()
            run = ev.run(gs, cfg, modes=(mode,), rerank=False)
            m = run.means(mode)
            rows.append(
                {
                    "expansion": expansion,
                    "config": name,
                    "mrr": m["mrr"],
                    "hit@5": m["hit@5"],
                    "recall@5": m["recall@5"],
                    "queries": len(run.queries),
                    "errors": run.errors,
                }
            )
            print(
                f"expansion={expansion!s:5} {name:26} MRR {m['mrr']:.4f} "
                f"Hit@5 {m['hit@5']:.4f} R@5 {m['recall@5']:.4f} ({time.time() - t0:.1f}s)",
                flush=True,
            )
    Path(out).write_text(json.dumps(rows, indent=1), encoding="utf-8")


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit("usage: python benchmarks/bench_fusion.py KB_DIR INDEX DATASET OUT.json")
    main(*sys.argv[1:5])
