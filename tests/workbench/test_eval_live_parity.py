"""Evaluation rankings equal live search rankings, for every fusion method and many configs.

Both go through ``engine.pipeline.compose``; this pins that they keep doing so: a real
(tiny, hash-embedded) index, a deterministic fake reranker, and a seeded sample of configs
across fusion method x normalisation x weights x rerank x injection x top_k x multipliers.
"""

from __future__ import annotations

import itertools
import random
from types import SimpleNamespace

import pytest

from engine.config import EngineConfig
from engine.indexer import build_index
from engine.pipeline import Candidates, pool_size, rank
from engine.search import Engine
from engine.tree import parse_kb
from tests.engine.engine_kit import HASH_CFG, CountingEmbedder, FakeReranker, write_kb
from workbench.eval import golden
from workbench.eval.evaluate import EvalCache, Evaluator

BASE = HASH_CFG.with_overrides({"rerank.provider": "http", "rerank.base_url": "http://x"})
# Parents score above injection.min_score (0.8) so injection has children to add.
RERANK_TABLE = {
    "切块决定检索": 0.95,
    "重排模型对候选": 0.9,
    "检索指标衡量": 0.85,
    "交叉编码器同时": 0.5,
    "召回率衡量": 0.7,
    "按固定 token": 0.3,
}
QUERIES = [
    "切块 策略",
    "重排 延迟",
    "检索 指标 召回率",
    "MRR 排名",
    "交叉编码器",
    "chunking overlap",
    "标题 切块",
    "候选数",
]
METHODS = [
    {"fusion.method": "rrf"},
    {"fusion.method": "convex", "fusion.normalization": "minmax"},
    {"fusion.method": "convex", "fusion.normalization": "zscore"},
    {"fusion.method": "convex", "fusion.normalization": "tmm"},
    {"fusion.method": "dbsf"},
]


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    root = tmp_path_factory.mktemp("parity")
    kb_dir = write_kb(root / "kb")
    build_index(parse_kb(kb_dir), HASH_CFG, str(root / "idx"), embedder=CountingEmbedder())
    return Engine.open(kb_dir, root / "idx", BASE, reranker=FakeReranker(RERANK_TABLE))


def _golden(engine: Engine) -> golden.GoldenSet:
    any_id = sorted(engine.kb.nodes)[0]  # relevance does not matter: rankings are compared
    lines = [
        f"  - {{id: q{i}, query: '{q}', relevant: ['{any_id}']}}" for i, q in enumerate(QUERIES)
    ]
    return golden.parse("name: parity\nqueries:\n" + "\n".join(lines) + "\n")


def _configs() -> list[tuple[EngineConfig, bool]]:
    rng = random.Random(20261130)
    grid = list(
        itertools.product(
            METHODS,
            [(1.0, 1.0), (0.3, 0.7), (2.0, 0.5)],  # vector / bm25 weights
            [False, True],  # rerank
            [False, True],  # injection
            [1, 2, 3, 5],  # top_k
            [(1, 1), (3, 4), (2, 6)],  # multiplier / rerank_multiplier
            [35, 2],  # rerank.max_candidates
            [1.0, 0.6],  # rerank.weight
        )
    )
    # Every method with and without rerank and injection, the rest sampled.
    picked = [g for g in grid if g[1] == (1.0, 1.0) and g[4] == 3 and g[5] == (3, 4)]
    picked = [g for g in picked if g[6] == 35 and g[7] == 1.0]
    picked += rng.sample(grid, 60)
    out = []
    for method, (wv, wb), rerank, inject, top_k, (mult, rmult), max_c, rw in picked:
        cfg = BASE.with_overrides(
            {
                **method,
                "fusion.vector_weight": wv,
                "fusion.bm25_weight": wb,
                "fusion.multiplier": mult,
                "fusion.rerank_multiplier": rmult,
                "injection.enabled": inject,
                "injection.max_children": 2,
                "search.top_k": top_k,
                "rerank.max_candidates": max_c,
                "rerank.weight": rw,
            }
        )
        out.append((cfg, rerank))
    return out


def test_eval_rankings_equal_live_search_for_every_fusion_method(engine: Engine) -> None:
    gs = _golden(engine)
    ev = Evaluator(engine)
    configs = _configs()
    assert {c.fusion.method for c, _ in configs} == {"rrf", "convex", "dbsf"}
    assert any(c.injection.enabled and r for c, r in configs)
    injected = 0
    for cfg, rerank in configs:
        live_engine = engine.with_config(cfg)
        run = ev.run(gs, cfg, modes=("hybrid",), rerank=rerank)
        assert run.errors == 0
        for res in run.queries:
            live = live_engine.search(res.item.query, rerank=rerank).results
            top_k = cfg.search.top_k
            got = [(r.node_id, r.injected_from) for r in res.ranked[:top_k]]
            want = [(r.node_id, r.injected_from) for r in live]
            assert got == want, (cfg.diff(BASE), rerank, res.item.query)
            assert [r.score for r in res.ranked[:top_k]] == pytest.approx(
                [r.score for r in live], abs=1e-12
            )
            injected += sum(1 for r in live if r.injected_from)
    assert injected > 0  # injection really happened somewhere, so it was compared too


def test_deeper_eval_list_extends_the_live_list_without_duplicates(engine: Engine) -> None:
    gs = _golden(engine)
    cfg = BASE.with_overrides(
        {"fusion.method": "dbsf", "injection.enabled": True, "search.top_k": 2}
    )
    run = Evaluator(engine).run(gs, cfg, modes=("hybrid",), rerank=True)
    for res in run.queries:
        ids = [r.node_id for r in res.ranked]
        assert len(ids) == len(set(ids))
        assert len(ids) > 2  # ranked deeper than top_k (to EVAL_DEPTH, pool permitting)


# A candidate pool larger than the cached 200 must still equal a live search.

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
    (r,) = Evaluator(PoolEngine(), cache).run(gs, cfg).queries
    assert [x.node_id for x in r.ranked[:10]] == [x.node_id for x in live]


# With parent-child injection on, an evaluation's first top_k equal a live search's.

ORDER = ["p", "x", "y", "z", "c"]  # c is p's child, fused 5th
RERANK = {"p": 0.9, "x": 0.5, "y": 0.4, "z": 0.35, "c": 0.3}
CANDS = Candidates(
    "q",
    vector=tuple((n, 1.0 - i / 10) for i, n in enumerate(ORDER)),
    bm25=tuple((n, 10.0 - i) for i, n in enumerate(ORDER)),
    pool=200,
)
INJECTION_KB = SimpleNamespace(
    nodes={
        n: SimpleNamespace(children_ids=("c",) if n == "p" else (), parent_id=None) for n in ORDER
    }
)


class InjectionEngine:
    config = None
    kb = INJECTION_KB
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
        children_of=lambda n: INJECTION_KB.nodes[n].children_ids,
        pool=pool_size(cfg, 3, True),
    )
    assert [r.node_id for r in live] == ["p", "c", "x"]
    gs = golden.parse("name: t\nqueries:\n  - {id: q1, query: q, relevant: [c]}\n")
    (r,) = Evaluator(InjectionEngine()).run(gs, cfg).queries
    assert [x.node_id for x in r.ranked[:3]] == ["p", "c", "x"]
    assert len({x.node_id for x in r.ranked}) == len(r.ranked)
