"""A candidate pool larger than the cached 200 must still equal a live search."""

from __future__ import annotations

from engine.config import EngineConfig
from engine.pipeline import Candidates, rank
from workbench.eval import golden
from workbench.eval.evaluate import EvalCache, Evaluator

VECTOR = ["x", *(f"v{i:03d}" for i in range(1, 400))]
BM25 = [*(f"b{i:03d}" for i in range(1, 250)), "x", *(f"c{i:03d}" for i in range(150))]


class PoolEngine:
    config = None
    kb = None
    index_fingerprint = "fp"

    def candidates(self, query: str, pool: int) -> Candidates:
        return Candidates(
            query,
            vector=tuple((n, 1.0 - i / 1000) for i, n in enumerate(VECTOR[:pool])),
            bm25=tuple((n, 500.0 - i) for i, n in enumerate(BM25[:pool])),
            pool=pool,
        )


def test_eval_with_pool_above_cache_depth_matches_live() -> None:
    rrf = {"fusion.method": "rrf", "fusion.vector_weight": 1.0, "fusion.bm25_weight": 1.0}
    cfg = EngineConfig().with_overrides({**rrf, "fusion.multiplier": 30})  # pool 10 x 30
    live = rank(PoolEngine().candidates("q", 300), cfg, top_k=10, mode="hybrid", rerank_scores=None)
    assert live[0].node_id == "x"  # in both channels within 300 (bm25 rank 250)
    gs = golden.parse("name: t\nqueries:\n  - {id: q1, query: q, relevant: [x]}\n")
    cache = EvalCache()
    default_pool = EngineConfig().with_overrides(rrf)
    Evaluator(PoolEngine(), cache).run(gs, default_pool)  # cache filled at the default pool
    (r,) = Evaluator(PoolEngine(), cache).run(gs, cfg).results
    assert [x.node_id for x in r.ranked[:10]] == [x.node_id for x in live]
