"""With parent-child injection on, an evaluation's first top_k equal a live search's."""

from __future__ import annotations

from types import SimpleNamespace

from engine.config import EngineConfig
from engine.pipeline import Candidates, pool_size, rank
from workbench.eval import golden
from workbench.eval.evaluate import Evaluator

ORDER = ["p", "x", "y", "z", "c"]  # c is p's child, fused 5th
RERANK = {"p": 0.9, "x": 0.5, "y": 0.4, "z": 0.35, "c": 0.3}
CANDS = Candidates(
    "q",
    vector=tuple((n, 1.0 - i / 10) for i, n in enumerate(ORDER)),
    bm25=tuple((n, 10.0 - i) for i, n in enumerate(ORDER)),
    pool=200,
)
KB = SimpleNamespace(
    nodes={
        n: SimpleNamespace(children_ids=("c",) if n == "p" else (), parent_id=None) for n in ORDER
    }
)


class Engine:
    config = None
    kb = KB
    index_fingerprint = "fp"
    reranker_name = "fake"

    def candidates(self, query: str, pool: int) -> Candidates:
        return CANDS

    def rerank_scores(self, query: str, ids: list[str]) -> dict[str, float]:
        return {n: RERANK[n] for n in ids}


def test_eval_head_equals_live_ranking_with_injection() -> None:
    cfg = EngineConfig().with_overrides(
        {"search.top_k": 3, "injection.enabled": True, "rerank.provider": "http"}
    )
    live = rank(
        CANDS,
        cfg,
        top_k=3,
        mode="hybrid",
        rerank_scores=RERANK,
        children_of=lambda n: KB.nodes[n].children_ids,
        pool=pool_size(cfg, 3, True),
    )
    assert [r.node_id for r in live] == ["p", "c", "x"]
    gs = golden.parse("name: t\nqueries:\n  - {id: q1, query: q, relevant: [c]}\n")
    (r,) = Evaluator(Engine()).run(gs, cfg).results
    assert [x.node_id for x in r.ranked[:3]] == ["p", "c", "x"]
    assert len({x.node_id for x in r.ranked}) == len(r.ranked)
