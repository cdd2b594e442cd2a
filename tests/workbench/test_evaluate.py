"""Evaluation runs: cached re-scoring equals a full run and live search; stage attribution."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from engine.config import EngineConfig
from engine.indexer import build_index
from engine.pipeline import Candidates, Ranked
from engine.search import Engine
from engine.tree import parse_kb
from tests.engine.engine_kit import HASH_CFG, write_kb
from tests.engine.http_servers import LocalServer, rerank_handler
from workbench.eval import golden
from workbench.eval.attribution import attribute
from workbench.eval.evaluate import EvalCache, Evaluator
from workbench.eval.run_record import save_run
from workbench.export.formats import trec_run

GOLDEN = """name: tiny
queries:
  - {id: q1, query: 按标题切块, relevant: ["rag/chunking#切块策略/按标题切块"], difficulty: easy, category: rag}
  - {id: q2, query: 重排会增加多少延迟, relevant: ["retrieval/rerank#重排/延迟"], difficulty: medium, category: retrieval}
  - {id: q3, query: what is MRR, relevant: ["evaluation/metrics#检索指标/mrr", "evaluation/metrics#检索指标/召回率"], difficulty: hard, category: evaluation}
  - {id: q4, query: 交叉编码器读取什么, relevant: ["retrieval/rerank#重排/交叉编码器"], difficulty: medium, category: retrieval}
  - {id: q5, query: 块之间的 overlap, relevant: ["rag/chunking#切块策略/固定长度切块"], difficulty: easy, category: rag}
  - {id: q9, query: 年会在哪里, unanswerable: true}
"""

CONFIGS = [
    {},
    {"fusion.vector_weight": 0.3},
    {"fusion.k": 5.0, "fusion.bm25_weight": 2.0},
    {"fusion.multiplier": 1},
    {"search.top_k": 3},
    {"search.mode": "vector"},
    {"search.mode": "keyword"},
    {"expansion.enabled": True},
    {"lexical.k1": 0.9, "lexical.b": 0.3},
    {"lexical.title_weight": 2.0, "lexical.title_b": 0.3},
]


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("eval")
    kb_dir = write_kb(root / "kb")
    index = root / "index"
    build_index(parse_kb(kb_dir), HASH_CFG, str(index))
    (root / "g.yaml").write_text(GOLDEN, encoding="utf-8")
    gs = golden.load(root / "g.yaml")
    return kb_dir, index, gs


def _run(engine, gs, cfg, cache=None):
    return Evaluator(engine, cache or EvalCache()).run(gs, cfg, modes=[cfg.search.mode])


@pytest.mark.parametrize("overrides", CONFIGS)
def test_cached_rescoring_equals_full_run_and_live_search(setup, overrides):
    kb_dir, index, gs = setup
    base = Engine.open(kb_dir, index, HASH_CFG)
    shared = EvalCache()
    _run(base, gs, HASH_CFG, shared)  # warm the cache with the baseline config
    cfg = HASH_CFG.with_overrides(overrides)
    cached = _run(base, gs, cfg, shared)
    fresh_engine = Engine.open(kb_dir, index, cfg)
    full = _run(fresh_engine, gs, cfg)
    mode = cfg.search.mode
    assert cached.per_query(mode) == full.per_query(mode)
    for a, b in zip(cached.for_mode(mode), full.for_mode(mode), strict=True):
        assert [r.node_id for r in a.ranked] == [r.node_id for r in b.ranked]
        live = fresh_engine.search(a.item.query)
        k = cfg.search.top_k
        assert [r.node_id for r in a.ranked[:k]] == [r.node_id for r in live.results]
    if not any(k.startswith(("lexical.", "expansion.")) for k in overrides):
        assert cached.cache_misses == 0  # pure re-scoring: no retrieval at all


def test_rerank_scores_cached_and_equal_to_live(setup):
    kb_dir, index, gs = setup
    with LocalServer({"/v1/rerank": rerank_handler()}) as srv:
        cfg = HASH_CFG.with_overrides(
            {"rerank.provider": "http", "rerank.base_url": srv.url("/v1"), "rerank.model": "m"}
        )
        engine = Engine.open(kb_dir, index, cfg)
        cache = EvalCache()
        first = Evaluator(engine, cache).run(gs, cfg)
        calls = len(srv.requests)
        assert calls > 0 and first.rerank
        cut = cfg.with_overrides({"rerank.max_candidates": 3, "rerank.weight": 0.5})
        again = Evaluator(engine.with_config(cut), cache).run(gs, cut)
        assert len(srv.requests) == calls  # re-scored from cached rerank scores
        live_engine = Engine.open(kb_dir, index, cut)
        for r in again.for_mode("hybrid"):
            live = live_engine.search(r.item.query)
            assert [x.node_id for x in r.ranked[:10]] == [x.node_id for x in live.results]


def test_run_record_and_trec(setup, tmp_path: Path):
    kb_dir, index, gs = setup
    run = _run(Engine.open(kb_dir, index, HASH_CFG), gs, HASH_CFG)
    assert {r.item.id for r in run.queries} == {"q1", "q2", "q3", "q4", "q5"}  # q9 unanswerable
    path = save_run(run, tmp_path)
    import json

    rec = json.loads(path.read_text(encoding="utf-8"))
    assert rec["config_hash"] == HASH_CFG.hash
    assert EngineConfig.from_yaml(rec["config_yaml"]) == HASH_CFG
    assert rec["dataset"]["hash"] == gs.content_hash
    assert len(rec["queries"]) == 5 and "ranked" in rec["queries"][0]
    assert set(rec["summary"]["hybrid"]) >= {"means", "latency", "by_difficulty", "failures"}
    lines = trec_run(run, "hybrid").splitlines()
    assert lines[0].split()[1] == "Q0" and lines[0].split()[3] == "1"


def _item(rel):
    return golden.item_from_dict({"id": "q", "query": "x", "relevant": rel})


def _ranked(ids, fusion=None):
    return [
        Ranked(n, 1.0 / (i + 1), None, None, (fusion or {}).get(n, i + 1), None)
        for i, n in enumerate(ids)
    ]


def test_attribution_causes():
    cands = Candidates(
        "x",
        vector=(*((f"v{i}", 1.0 - i / 100) for i in range(1, 31)), ("deep", 0.1)),
        bm25=tuple((f"b{i}", 10.0 - i / 10) for i in range(1, 31)),
        pool=200,
    )
    # v1 is rank 1 in the vector channel but fusion put it at 7 -> dropped by fusion
    ranked = _ranked(["b1", "b2", "v2", "b3", "v3", "b4", "v1"], {"v1": 7})
    out = attribute(
        _item(["v1", "nowhere", "v20", "b1"]),
        ranked,
        cands,
        pool=30,
        mode="hybrid",
        use_rerank=False,
    )
    causes = {a.node_id: a.cause for a in out}
    assert causes == {"nowhere": "lost_in_both", "v1": "dropped_by_fusion", "v20": "lost_in_bm25"}
    # "deep" is in the 200-candidate cache but beyond the 30-candidate pool
    out = attribute(_item(["deep"]), ranked, cands, pool=30, mode="vector", use_rerank=False)
    assert out[0].cause == "lost_in_vector" and out[0].vector_rank_any == 31
    # in the pool of the keyword channel, but ranked below 5 -> cut at K
    out = attribute(_item(["b9"]), ranked, cands, pool=30, mode="keyword", use_rerank=False)
    assert out[0].cause == "cut_at_k"
    # fusion had it at 2, rerank pushed it out
    rr = (
        [Ranked("b3", 1, None, 3, 3, 1), Ranked("b4", 1, None, 4, 4, 2)]
        + [Ranked(f"z{i}", 0, None, None, 9, i + 3) for i in range(4)]
        + [Ranked("b2", 0, None, 2, 2, 7)]
    )
    out = attribute(_item(["b2"]), rr, cands, pool=30, mode="hybrid", use_rerank=True)
    assert out[0].cause == "demoted_by_rerank"


def test_two_runs_saved_in_the_same_second_keep_both_records(setup, tmp_path):
    import copy
    import json

    kb_dir, index, gs = setup
    run = _run(Engine.open(kb_dir, index, HASH_CFG), gs, HASH_CFG)
    twin = copy.deepcopy(run)  # same id: same second, same config
    first, second = save_run(run, tmp_path), save_run(twin, tmp_path)
    assert first != second and first.is_file() and second.is_file()
    assert second.stem == f"{first.stem}-2"
    assert json.loads(second.read_text(encoding="utf-8"))["run_id"] == second.stem


# Per-query latency must not depend on whether candidates came from the cache.

STAGES = {"expand": 1.0, "embed": 2.0, "vector": 3.0, "bm25": 4.0}


class SlowEngine:
    """Retrieval takes 300 ms of wall time, but its own stage timings say 10 ms."""

    config = None
    kb = None
    index_fingerprint = "fp"

    def warm_up(self) -> None:
        time.sleep(0.3)  # model loading

    def candidates(self, query: str, pool: int) -> Candidates:
        time.sleep(0.3)
        return Candidates(
            query,
            vector=(("a", 0.9), ("b", 0.8)),
            bm25=(("b", 3.0), ("a", 1.0)),
            pool=pool,
            timings=STAGES,
        )


def test_uncached_latency_is_the_stage_timings_not_wall_time_plus_warm_up() -> None:
    gs = golden.parse("name: t\nqueries:\n  - {id: q1, query: x, relevant: [a]}\n")
    cfg = EngineConfig()
    cache = EvalCache()
    first = Evaluator(SlowEngine(), cache).run(gs, cfg)
    again = Evaluator(SlowEngine(), cache).run(gs, cfg)
    assert again.cache_misses == 0
    (r1,), (r2,) = first.queries, again.queries
    # far below the 300 ms sleeps (wall time + warm-up would be >= 600 ms); loose under load
    assert 10.0 <= r1.latency_ms < 250.0, r1.latency_ms
    assert abs(r1.latency_ms - r2.latency_ms) < 200.0


def test_latest_run_is_the_last_saved_even_within_one_second(tmp_path: Path) -> None:
    from workbench.eval.run_record import list_runs

    for name in (
        "20261201-100000-abcdef",
        "20261201-100000-abcdef-2",
        "20261201-100000-abcdef-10",
        "20261130-235959-abcdef",
    ):
        (tmp_path / f"{name}.json").write_text("{}", encoding="utf-8")
    assert [p.stem for p in list_runs(tmp_path)] == [
        "20261201-100000-abcdef-10",
        "20261201-100000-abcdef-2",
        "20261201-100000-abcdef",
        "20261130-235959-abcdef",
    ]
