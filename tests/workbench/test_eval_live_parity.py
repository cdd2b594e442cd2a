"""Evaluation rankings equal live search rankings, for every fusion method and many configs.

Both go through ``engine.pipeline.compose``; this pins that they keep doing so: a real
(tiny, hash-embedded) index, a deterministic fake reranker, and a seeded sample of configs
across fusion method x normalisation x weights x rerank x injection x top_k x multipliers.
"""

from __future__ import annotations

import itertools
import random

import pytest

from engine.config import EngineConfig
from engine.indexer import build_index
from engine.search import Engine
from engine.tree import parse_kb
from tests.engine.engine_kit import HASH_CFG, CountingEmbedder, FakeReranker, write_kb
from workbench.eval import golden
from workbench.eval.evaluate import Evaluator

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
        for res in run.results:
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
    for res in run.results:
        ids = [r.node_id for r in res.ranked]
        assert len(ids) == len(set(ids))
        assert len(ids) > 2  # ranked deeper than top_k (to EVAL_DEPTH, pool permitting)
