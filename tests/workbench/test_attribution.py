"""Stage attribution when rerank pushes a chapter below the evaluated depth."""

from __future__ import annotations

from engine.config import EngineConfig
from engine.pipeline import Candidates
from workbench.eval import golden
from workbench.eval.evaluate import Evaluator

IDS = [f"n{i:02d}" for i in range(1, 41)]


class RerankingEngine:
    config = None
    kb = None
    index_fingerprint = "fp"
    reranker_name = "fake"

    def candidates(self, query: str, pool: int) -> Candidates:
        return Candidates(
            query,
            vector=tuple((n, 1.0 - i / 100) for i, n in enumerate(IDS)),
            bm25=tuple((n, 40.0 - i) for i, n in enumerate(IDS)),
            pool=pool,
        )

    def rerank_scores(self, query: str, ids: list[str]) -> dict[str, float]:
        # the reranker dislikes n02 most: it falls from fused rank 2 to the bottom of the head
        return {n: (0.0 if n == "n02" else 1.0 - IDS.index(n) / 100) for n in ids}


def test_rerank_demoting_below_eval_depth_is_demoted_by_rerank_not_fusion() -> None:
    gs = golden.parse("name: t\nqueries:\n  - {id: q1, query: x, relevant: [n02]}\n")
    run = Evaluator(RerankingEngine()).run(gs, EngineConfig(), rerank=True)
    (r,) = run.queries
    assert "n02" not in [x.node_id for x in r.ranked]  # below the 20 evaluated
    assert r.attribution[0].fusion_rank == 2
    assert r.cause == "demoted_by_rerank"
