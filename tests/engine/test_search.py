from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from engine.channels import normalize_filters
from engine.config import EngineConfig
from engine.errors import ConfigError, EngineError, IndexMissingError, UnknownNodeError
from engine.index_plan import freshness
from engine.indexer import build_index
from engine.manifest import read_manifest
from engine.pipeline import rank
from engine.search import Engine
from engine.store import Location
from engine.tree import parse_kb
from tests.engine.engine_kit import HASH_CFG, CountingEmbedder, FakeReranker, write_kb

RERANK_CFG = HASH_CFG.with_overrides({"rerank.provider": "http", "rerank.base_url": "http://x"})


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("search")
    kb_dir = write_kb(root / "kb")
    build_index(parse_kb(kb_dir), HASH_CFG, str(root / "idx"), embedder=CountingEmbedder())
    return kb_dir, root / "idx"


@pytest.fixture(scope="module")
def engine(built: tuple[Path, Path]) -> Engine:
    kb_dir, idx = built
    return Engine.open(kb_dir, idx, HASH_CFG)


def test_open_without_index_says_what_to_run(tmp_path: Path) -> None:
    kb_dir = write_kb(tmp_path / "kb")
    with pytest.raises(IndexMissingError, match=r"no index at .*; run `wikirag index --kb .*kb`"):
        Engine.open(kb_dir, tmp_path / "nothing", HASH_CFG)
    assert not (tmp_path / "nothing").exists()  # opening creates nothing


@pytest.mark.parametrize("q", ["", "   ", "\n\t"])
def test_empty_query_is_an_error(engine: Engine, q: str) -> None:
    with pytest.raises(EngineError, match="query is empty"):
        engine.search(q)


def test_search_response_shape(engine: Engine) -> None:
    resp = engine.search("重排会增加延迟吗", top_k=3)
    assert resp.results[0].node_id == "retrieval/rerank#重排/延迟"
    assert len(resp.results) == 3 and resp.total >= 3
    top = resp.results[0]
    assert set(top.rank_source) == {"vector", "bm25", "rerank"}
    assert top.rank_source["rerank"] is None
    assert top.breadcrumb == ["重排", "延迟"] and top.title == "延迟"
    assert top.content.startswith("## 延迟")
    assert top.metadata == {
        "file_path": "retrieval/rerank.md",
        "line": top.metadata["line"],
        "anchor": "延迟",
        "level": 2,
        "keywords": ["重排", "rerank", "交叉编码器"],
        "doc_type": "concept",
        "priority": "P1",
        "category": "retrieval",
    }
    assert set(resp.timings) == {"expand", "embed", "vector", "bm25", "fusion", "rerank", "inject"}
    assert resp.config_hash == HASH_CFG.hash
    assert resp.index_stats["rows"] == 12 and resp.index_stats["fresh"] is True
    d = resp.to_dict()
    assert d["results"][0]["node_id"] == top.node_id and d["total"] == resp.total


def test_search_equals_rank_of_candidates(engine: Engine) -> None:
    """Cached evaluation (rank over candidates) gives exactly the live ranking."""
    cfg = engine.config
    for q in ["切块策略", "召回率", "交叉编码器 查询"]:
        live = engine.search(q, top_k=5)
        cands = engine.candidates(q, pool=200)
        ranked = rank(cands, cfg, top_k=5, mode="hybrid", rerank_scores=None)
        assert [r.node_id for r in live.results] == [r.node_id for r in ranked]
        assert [r.score for r in live.results] == [r.score for r in ranked]


def test_modes_use_one_channel(engine: Engine) -> None:
    kw = engine.search("交叉编码器", mode="keyword")
    assert all(r.rank_source["vector"] is None for r in kw.results)
    assert kw.timings["embed"] == 0.0
    vec = engine.search("交叉编码器", mode="vector")
    assert all(r.rank_source["bm25"] is None for r in vec.results)
    with pytest.raises(EngineError, match="search mode"):
        engine.search("x", mode="fuzzy")


def test_expansion_feeds_bm25_only(built: tuple[Path, Path]) -> None:
    kb_dir, idx = built
    expand = {"expansion.enabled": True, "expansion.threshold": 0.3}
    on = Engine.open(kb_dir, idx, HASH_CFG.with_overrides(expand))
    off = on.with_config(HASH_CFG.with_overrides({"expansion.enabled": False}))
    a, b = on.candidates("重排模型", pool=20), off.candidates("重排模型", pool=20)
    assert a.expansion_terms and not b.expansion_terms
    assert a.vector == b.vector  # the vector channel sees the original query
    assert a.bm25 != b.bm25


@pytest.mark.parametrize(
    ("filters", "check"),
    [
        ({"category": "rag"}, lambda m: m["category"] == "rag"),
        ({"priority": ["P0"]}, lambda m: m["priority"] == "P0"),
        ({"doc_type": "concept", "priority": "P1"}, lambda m: m["category"] == "retrieval"),
        ({"keywords": ["MRR", "chunking"]}, lambda m: {"MRR", "chunking"} & set(m["keywords"])),
    ],
)
@pytest.mark.parametrize("mode", ["hybrid", "vector", "keyword"])
def test_filters_apply_to_both_channels(engine: Engine, filters, check, mode: str) -> None:
    resp = engine.search("检索 切块 重排 召回率 指标", mode=mode, filters=filters, top_k=20)
    assert resp.results
    assert all(check(r.metadata) for r in resp.results)
    cands = engine.candidates("检索 切块 重排 召回率 指标", pool=50, filters=filters)
    allowed = {n.node_id for n in engine.kb.nodes.values() if check(_meta(n))}
    assert {nid for nid, _ in cands.vector} <= allowed
    assert {nid for nid, _ in cands.bm25} <= allowed


def _meta(node) -> dict:
    from engine.response import node_metadata

    return node_metadata(node)


def test_filter_validation() -> None:
    assert normalize_filters({"category": "rag", "keywords": ["a", "a", " b "]}) == {
        "category": ("rag",),
        "keywords": ("a", "b"),
    }
    with pytest.raises(EngineError, match="unknown filter 'author'"):
        normalize_filters({"author": "me"})
    with pytest.raises(EngineError, match="has no value"):
        normalize_filters({"category": []})


def test_lance_vector_backend_equals_numpy(tmp_path: Path) -> None:
    # LanceDB's flat scan sees the chapter vectors only: compare without passage vectors.
    cfg = HASH_CFG.with_overrides({"index.passage_chars": 0})
    kb_dir, idx = write_kb(tmp_path / "kb"), tmp_path / "idx"
    build_index(parse_kb(kb_dir), cfg, str(idx), embedder=CountingEmbedder())
    engine = Engine.open(kb_dir, idx, cfg)
    lance = Engine.open(kb_dir, idx, cfg, vector_backend="lance")
    for q, f in [("重排 延迟", None), ("切块", {"category": "rag"}), ("指标", {"keywords": "MRR"})]:
        a = engine.candidates(q, pool=10, filters=f, mode="vector").vector
        b = lance.candidates(q, pool=10, filters=f, mode="vector").vector
        assert [n for n, _ in a] == [n for n, _ in b]
        np.testing.assert_allclose([s for _, s in a], [s for _, s in b], atol=1e-5)


def test_result_expansion(engine: Engine) -> None:
    q = "切块策略 按标题切块"
    r = engine.search(q, top_k=1, expand="children", mode="keyword").results[0]
    assert r.node_id == "rag/chunking#切块策略/按标题切块"
    assert r.expanded == []
    sib = engine.search(q, top_k=1, expand="siblings", mode="keyword").results[0]
    assert [e["node_id"] for e in sib.expanded] == ["rag/chunking#切块策略/固定长度切块"]
    assert sib.expanded[0]["relation"] == "sibling"
    par = engine.search(q, top_k=1, expand="parent", mode="keyword").results[0]
    assert [e["node_id"] for e in par.expanded] == ["rag/chunking#切块策略"]
    with pytest.raises(EngineError, match="expand must be one of"):
        engine.search(q, expand="cousins")


def test_rerank_reorders_and_reports_ranks(built: tuple[Path, Path]) -> None:
    kb_dir, idx = built
    fake = FakeReranker({"MRR 是第一个": 0.99, "交叉编码器同时": 0.5})
    eng = Engine.open(kb_dir, idx, RERANK_CFG, reranker=fake)
    resp = eng.search("重排 延迟", top_k=3)
    assert [r.node_id for r in resp.results[:2]] == [
        "evaluation/metrics#检索指标/mrr",
        "retrieval/rerank#重排/交叉编码器",
    ]
    assert [r.rank_source["rerank"] for r in resp.results[:2]] == [1, 2]
    assert resp.results[0].score == pytest.approx(0.99)
    assert fake.calls[-1][1] <= RERANK_CFG.rerank.max_candidates
    assert eng.reranker_name == "fake-reranker"
    scores = eng.rerank_scores("q", ["evaluation/metrics#检索指标/mrr", "not-a-node"])
    assert scores == {"evaluation/metrics#检索指标/mrr": 0.99}
    plain = eng.search("重排 延迟", top_k=3, rerank=False)
    assert all(r.rank_source["rerank"] is None for r in plain.results)


def test_rerank_failure_still_answers_with_a_warning(built: tuple[Path, Path]) -> None:
    kb_dir, idx = built
    eng = Engine.open(kb_dir, idx, RERANK_CFG, reranker=FakeReranker({}, fail=True))
    resp = eng.search("重排 延迟", top_k=3)
    assert resp.results and all(r.rank_source["rerank"] is None for r in resp.results)
    assert any("rerank failed" in w and "timed out" in w for w in resp.warnings)


def test_rerank_requested_without_provider_warns(engine: Engine) -> None:
    resp = engine.search("重排", rerank=True)
    assert resp.results and any("rerank.provider is none" in w for w in resp.warnings)


def test_parent_child_injection(built: tuple[Path, Path]) -> None:
    kb_dir, idx = built
    cfg = RERANK_CFG.with_overrides({"injection.enabled": True})
    fake = FakeReranker({"重排模型对候选做精排": 0.95})
    eng = Engine.open(kb_dir, idx, cfg, reranker=fake)
    resp = eng.search("重排", top_k=3)
    parent = "retrieval/rerank#重排"
    assert [(r.node_id, r.injected_from) for r in resp.results] == [
        (parent, None),
        ("retrieval/rerank#重排/交叉编码器", parent),
        ("retrieval/rerank#重排/延迟", parent),
    ]
    assert resp.results[0].score == pytest.approx(0.95)
    assert [r.score for r in resp.results[1:]] == [pytest.approx(0.95 * 0.5)] * 2
    assert resp.results[1].rank_source == {"vector": None, "bm25": None, "rerank": None}


def test_chapter_navigation_and_unknown_ids(engine: Engine) -> None:
    node = engine.chapter("rag/chunking#切块策略")
    assert node.title == "切块策略"
    assert [n.title for n in engine.children("rag/chunking#切块策略")] == [
        "按标题切块",
        "固定长度切块",
    ]
    assert [n.title for n in engine.siblings("rag/chunking#切块策略/按标题切块")] == [
        "固定长度切块"
    ]
    assert engine.parent("rag/chunking#切块策略").node_id == "rag/chunking"
    assert engine.parent("rag/chunking") is None
    with pytest.raises(UnknownNodeError, match="did you mean rag/chunking#切块策略"):
        engine.chapter("rag/chunking#切块策")
    with pytest.raises(UnknownNodeError):
        engine.children("zzz")


def test_stats_reports_freshness(tmp_path: Path) -> None:
    kb_dir = write_kb(tmp_path / "kb")
    build_index(parse_kb(kb_dir), HASH_CFG, str(tmp_path / "idx"), embedder=CountingEmbedder())
    eng = Engine.open(kb_dir, tmp_path / "idx", HASH_CFG)
    s = eng.stats()
    assert (s["documents"], s["chapters"], s["nodes"]) == (3, 9, 12)
    assert s["index"]["rows"] == 12 and s["embedder"]["provider"] == "hash"
    assert s["freshness"]["fresh"] is True
    # The served snapshot keeps the manifest's header only (memory); freshness after a
    # re-parse reads the node hashes from disk.
    assert eng._shared.current().snapshot.manifest.nodes == {}
    (kb_dir / "new.md").write_text("# 新文档\n\n内容。\n", "utf-8")
    (kb_dir / "evaluation/metrics.md").write_text("# 评测\n\n改过的内容。\n", "utf-8")
    eng.refresh()
    got = eng.stats()["freshness"]
    on_disk = read_manifest(Location(str(tmp_path / "idx")))
    assert got == freshness(parse_kb(kb_dir), HASH_CFG, on_disk)
    assert got["new"] >= 2 and got["deleted"] + got["changed"] >= 1 and not got["fresh"]


def test_with_config_shares_index_and_checks_embedder(engine: Engine) -> None:
    other = engine.with_config(HASH_CFG.with_overrides({"fusion.bm25_weight": 3.0}))
    assert other is not engine and other.kb is engine.kb
    assert other.index_fingerprint == engine.index_fingerprint
    assert engine.with_config(HASH_CFG) is engine
    assert other.search("重排").config_hash != engine.search("重排").config_hash
    with pytest.raises(ConfigError, match="index was built with embedder hash"):
        engine.with_config(HASH_CFG.with_overrides({"embedding.dims": 64}))


def test_concurrent_searches_match_sequential(engine: Engine) -> None:
    queries = ["重排", "切块", "召回率", "交叉编码器", "MRR", "延迟"] * 5
    expected = {q: [r.node_id for r in engine.search(q).results] for q in set(queries)}
    errors: list[BaseException] = []
    got: list[tuple[str, list[str]]] = []

    def worker(qs: list[str]) -> None:
        try:
            for q in qs:
                got.append((q, [r.node_id for r in engine.search(q).results]))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(queries[i::4],)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert all(ids == expected[q] for q, ids in got) and len(got) == len(queries)


def test_searches_keep_working_during_a_hot_rebuild(tmp_path: Path) -> None:
    kb_dir = write_kb(tmp_path / "kb")
    idx = tmp_path / "idx"
    build_index(parse_kb(kb_dir), HASH_CFG, str(idx), embedder=CountingEmbedder())
    eng = Engine.open(kb_dir, idx, HASH_CFG)
    assert "faq#冷启动" not in {r.node_id for r in eng.search("冷启动 预热").results}
    (kb_dir / "faq.md").write_text("# 冷启动\n\n冷启动时先预热模型和索引。\n", "utf-8")

    stop = threading.Event()
    errors: list[BaseException] = []
    count = [0]

    def searcher() -> None:
        while not stop.is_set():
            try:
                assert eng.search("冷启动 预热").results
                count[0] += 1
            except BaseException as exc:
                errors.append(exc)
                return

    t = threading.Thread(target=searcher)
    t.start()
    try:
        first = eng.rebuild(force=True)  # full rebuild: new table, old one dropped after
        second = eng.rebuild()  # incremental: nothing changed
    finally:
        stop.set()
        t.join()
    assert errors == [] and count[0] > 0
    assert first.full_rebuild and second.embedded == 0
    assert eng.search("冷启动 预热").results[0].node_id == "faq#冷启动"


def test_refresh_picks_up_an_index_built_elsewhere(tmp_path: Path) -> None:
    kb_dir = write_kb(tmp_path / "kb")
    idx = tmp_path / "idx"
    build_index(parse_kb(kb_dir), HASH_CFG, str(idx), embedder=CountingEmbedder())
    eng = Engine.open(kb_dir, idx, HASH_CFG)
    before = eng.index_fingerprint
    assert eng.refresh() is False
    (kb_dir / "faq.md").write_text("# 冷启动\n\n冷启动时先预热模型。\n", "utf-8")
    build_index(parse_kb(kb_dir), HASH_CFG, str(idx), embedder=CountingEmbedder())
    assert eng.refresh() is True and eng.index_fingerprint != before
    assert eng.search("冷启动").results[0].node_id == "faq#冷启动"


def test_default_config_requires_matching_index(built: tuple[Path, Path]) -> None:
    kb_dir, idx = built
    emb = CountingEmbedder(dims=32)
    with pytest.raises(ConfigError, match="run `wikirag index`"):
        Engine.open(kb_dir, idx, EngineConfig(), embedder=emb)


@pytest.mark.slow
def test_real_default_embedder_end_to_end(tmp_path: Path) -> None:
    """The shipped default (multilingual USE, ONNX) indexes and searches the tiny KB."""
    kb_dir = write_kb(tmp_path / "kb")
    cfg = EngineConfig()
    report = build_index(parse_kb(kb_dir), cfg, str(tmp_path / "idx"))
    assert report.rows == 12 and report.warnings == []
    eng = Engine.open(kb_dir, tmp_path / "idx", cfg)
    assert eng.stats()["embedder"]["provider"] == "use-onnx"
    resp = eng.search("重排会带来多少延迟？", top_k=3)
    assert resp.results[0].node_id == "retrieval/rerank#重排/延迟"
    # English query, Chinese KB: the multilingual vectors still find the chapter.
    vec = eng.search("how is recall measured", mode="vector", top_k=3)
    assert "evaluation/metrics#检索指标/召回率" in [r.node_id for r in vec.results]


def test_warm_up_loads_models_before_the_first_search(built: tuple[Path, Path]) -> None:
    kb_dir, idx = built
    emb = CountingEmbedder()
    fake = FakeReranker({}, fail=True)  # a failing provider does not break warm-up
    eng = Engine.open(kb_dir, idx, RERANK_CFG, embedder=emb, reranker=fake)
    eng.warm_up()
    assert emb.queries == 1 and len(fake.calls) == 1


def test_stale_index_results_fall_back_to_stored_metadata(tmp_path: Path) -> None:
    kb_dir = write_kb(tmp_path / "kb")
    build_index(parse_kb(kb_dir), HASH_CFG, str(tmp_path / "idx"), embedder=CountingEmbedder())
    (kb_dir / "retrieval/rerank.md").unlink()  # deleted after indexing, not re-indexed
    eng = Engine.open(kb_dir, tmp_path / "idx", HASH_CFG)
    resp = eng.search("重排 延迟", top_k=3)
    top = resp.results[0]
    assert top.node_id == "retrieval/rerank#重排/延迟"
    assert (top.title, top.breadcrumb, top.content) == ("延迟", ["重排", "延迟"], "")
    assert top.metadata["category"] == "retrieval" and top.metadata["keywords"][0] == "重排"
    assert any("no longer in the KB" in w for w in resp.warnings)
    assert resp.index_stats["fresh"] is False


def test_remote_embedder_runs_channels_side_by_side_with_equal_results(
    built: tuple[Path, Path], engine: Engine
) -> None:
    kb_dir, idx = built
    remote_cfg = HASH_CFG.with_overrides({"embedding.provider": "openai"})
    remote = Engine.open(kb_dir, idx, remote_cfg, embedder=CountingEmbedder())
    for q in ["重排 延迟", "切块策略", "召回率"]:
        a = engine.candidates(q, pool=20)
        b = remote.candidates(q, pool=20)
        assert (a.vector, a.bm25, a.expansion_terms) == (b.vector, b.bm25, b.expansion_terms)
    assert remote._shared._executor is not None and engine._shared._executor is None


def test_title_weight_reweights_stored_counts_without_reindexing(built: tuple[Path, Path]) -> None:
    kb_dir, idx = built
    plain_cfg = HASH_CFG.with_overrides({"lexical.title_weight": 0.0})
    plain = Engine.open(kb_dir, idx, plain_cfg)
    snap = plain._shared.current().snapshot
    # The indexer cached the title field beside the body counts.
    assert snap.lexical.has_title
    assert snap.lexical.title_counts.sum() > 0
    titled = plain.with_config(plain_cfg.with_overrides({"lexical.title_weight": 3.0}))
    a = plain.candidates("切块", pool=20, mode="keyword").bm25
    b = titled.candidates("切块", pool=20, mode="keyword").bm25
    assert {n for n, _ in a} == {n for n, _ in b}  # same matches, other scores
    assert a != b
    # title_weight 0 is plain BM25 over the body: same as the rank_bm25 reference.
    ref = plain.with_config(plain_cfg.with_overrides({"lexical.backend": "rank_bm25"}))
    c = ref.candidates("切块", pool=20, mode="keyword").bm25
    assert [n for n, _ in a] == [n for n, _ in c]
    np.testing.assert_allclose([s for _, s in a], [s for _, s in c], rtol=1e-9)


STEM_KB = {
    "ops.md": "# Operations\n\n## Backups\n\nEach database is backed up nightly.\n\n"
    "## Jobs\n\nA job runs every hour.\n",
}


def test_a_stemmed_index_matches_inflected_queries(tmp_path: Path) -> None:
    kb_dir = write_kb(tmp_path / "kb", STEM_KB)
    cfg = HASH_CFG.with_overrides({"lexical.stem": True})
    build_index(parse_kb(kb_dir), cfg, str(tmp_path / "idx"))
    eng = Engine.open(kb_dir, tmp_path / "idx", cfg)
    assert eng._shared.current().snapshot.manifest.tokenizer == "jieba-search+stem"
    hits = eng.candidates("databases", pool=5, mode="keyword").bm25
    assert [nid for nid, _ in hits] == ["ops#operations/backups"]
    hits = eng.candidates("running jobs", pool=5, mode="keyword").bm25
    assert [nid for nid, _ in hits] == ["ops#operations/jobs"]


def test_stemming_config_and_index_mismatch_is_refused(
    built: tuple[Path, Path], engine: Engine
) -> None:
    kb_dir, idx = built  # built with the defaults: stemmed
    plain = HASH_CFG.with_overrides({"lexical.stem": False})
    with pytest.raises(ConfigError, match=r"tokenizer 'jieba-search\+stem'.*run `wikirag index`"):
        Engine.open(kb_dir, idx, plain)
    with pytest.raises(ConfigError, match=r"lexical.stem=false"):
        engine.with_config(plain)
    # Other lexical changes still share the index (k1/b re-weight stored counts).
    assert engine.with_config(HASH_CFG.with_overrides({"lexical.k1": 1.2})) is not None


def test_vocabulary_similarity_is_one_for_kb_terms_and_a_cosine_otherwise(engine: Engine) -> None:
    vocab = engine._shared.current().snapshot.vocab
    assert vocab is not None and "切块" in vocab.row_of
    got = engine.vocabulary_similarity(["切块", "食堂", "overlap"])
    assert got is not None and got[0] == 1.0
    # a term outside the vocabulary: its best cosine against every vocabulary vector
    emb = engine._embedder().embed_documents(["食堂"])[0]
    emb = emb / np.linalg.norm(emb)
    assert got[1] == pytest.approx(float((vocab.vectors @ emb).max()), abs=1e-5)
    assert got[1] < 1.0 and len(got) == 3
