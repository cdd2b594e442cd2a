"""The approximate vector index: when a table gets one, how it is shaped, what a query
re-ranks, and that search through it agrees with exact search."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engine.store import Location
from tests.engine.engine_kit import HASH_CFG, write_kb


@pytest.mark.slow
def test_an_approximate_vector_index_serves_filters_and_updates(tmp_path: Path) -> None:
    import numpy as np

    from engine.indexer import build_index
    from engine.manifest import read_manifest
    from engine.search import Engine
    from engine.tree import parse_kb
    from tests.engine.engine_kit import HASH_CFG
    from workbench.bench.synthetic import synthetic_kb

    synthetic_kb(tmp_path / "kb", 1500, seed=11)
    kb = parse_kb(tmp_path / "kb")
    idx = tmp_path / "idx"
    build_index(kb, HASH_CFG, str(idx), ann_min_rows=1000)
    m = read_manifest(Location(str(idx)))
    assert m is not None and m.vector_index.startswith("IVF_PQ/cosine/")
    ann = Engine.from_kb(kb, str(idx), HASH_CFG)
    snap = ann._shared.current().snapshot
    assert snap.ann and snap.vectors.size == 0  # vectors stay on disk
    queries = [n.title for n in list(kb.nodes.values())[::50]]
    # Recall is a benchmark figure (docs/benchmarks.md); here: the index answers, and the
    # chapter a title query names is found.
    found = [
        any(kb.nodes[i].title == q for i, _ in ann.candidates(q, pool=10, mode="vector").vector)
        for q in queries
    ]
    assert np.mean(found) >= 0.5
    # A filter is honoured: every hit has the category asked for.
    hits = ann.candidates(queries[0], pool=10, mode="vector", filters={"category": ["ops"]})
    assert hits.vector and all(kb.nodes[i].category == "ops" for i, _ in hits.vector)
    # An update keeps the index; its new rows are found too.
    p = next((tmp_path / "kb").rglob("*.md"))
    p.write_text(p.read_text() + "\n## 全新章节 zqxv\n\n独一无二的内容。\n", "utf-8")
    build_index(parse_kb(tmp_path / "kb"), HASH_CFG, str(idx), ann_min_rows=1000)
    assert read_manifest(Location(str(idx))).vector_index == m.vector_index
    fresh = Engine.from_kb(parse_kb(tmp_path / "kb"), str(idx), HASH_CFG)
    top = fresh.candidates("全新章节 zqxv", pool=5, mode="vector").vector
    assert any(i.endswith("全新章节-zqxv") for i, _ in top)


def _search_view(engine, queries: list[str], mode: str) -> list[list[tuple[str, float]]]:
    return [
        [(r.node_id, round(r.score, 12)) for r in engine.search(q, mode=mode).results]
        for q in queries
    ]


def test_below_the_ann_threshold_a_build_and_its_results_are_those_of_exact_search(
    tmp_path: Path,
) -> None:
    from engine.config import EngineConfig
    from engine.indexer import build_index
    from engine.manifest import read_manifest
    from engine.search import Engine
    from engine.tree import parse_kb

    # The shipped threshold is far above a small KB; 0 turns the index off altogether.
    assert EngineConfig().index.ann_min_rows > 1000
    kb = parse_kb(write_kb(tmp_path / "kb"))
    rows = len(kb.nodes)
    runs = {}
    for name, threshold in (("default", None), ("off", 0), ("one_above", rows + 1)):
        cfg = (
            HASH_CFG
            if threshold is None
            else HASH_CFG.with_overrides({"index.ann_min_rows": threshold})
        )
        build_index(kb, cfg, str(tmp_path / name))
        assert read_manifest(Location(str(tmp_path / name))).vector_index == ""
        engine = Engine.from_kb(kb, str(tmp_path / name), cfg)
        assert not engine._shared.current().snapshot.ann
        queries = ["切块", "rerank 重排", "评估指标"]
        runs[name] = [_search_view(engine, queries, m) for m in ("vector", "hybrid")]
    assert runs["default"] == runs["off"] == runs["one_above"]
    assert runs["default"][0][0]  # the queries found something


def test_a_config_saved_before_the_ann_threshold_keeps_exact_search() -> None:
    from engine.config import EngineConfig

    old = EngineConfig().to_dict()
    del old["index"]["ann_min_rows"]
    assert EngineConfig.from_dict(old).index.ann_min_rows == 0


@pytest.mark.slow
def test_an_update_that_takes_the_table_past_the_threshold_adds_the_vector_index(
    tmp_path: Path,
) -> None:
    from engine.indexer import build_index
    from engine.manifest import read_manifest
    from engine.search import Engine
    from engine.tree import parse_kb
    from workbench.bench.measure import overlap
    from workbench.bench.synthetic import synthetic_kb

    synthetic_kb(tmp_path / "kb", 600, seed=5)
    kb = parse_kb(tmp_path / "kb")
    rows = len(kb.nodes)
    cfg = HASH_CFG.with_overrides({"index.ann_min_rows": rows + 5})
    idx = str(tmp_path / "idx")
    build_index(kb, cfg, idx)
    assert read_manifest(Location(idx)).vector_index == ""
    extra = "\n".join(f"## 新增章节 {i} zq{i}\n\n新增内容 {i}。\n" for i in range(6))
    (tmp_path / "kb" / "extra.md").write_text(f"# 新增文档\n\n导言。\n\n{extra}", "utf-8")
    kb2 = parse_kb(tmp_path / "kb")
    assert len(kb2.nodes) >= rows + 5
    report = build_index(kb2, cfg, idx)
    assert not report.full_rebuild
    m = read_manifest(Location(idx))
    assert m.vector_index  # the update crossed the threshold: the table got its index
    ann = Engine.from_kb(kb2, idx, cfg)
    snap = ann._shared.current().snapshot
    assert snap.ann and snap.vectors.size == 0
    # Its answers against exact search over the same vectors (a build with the index off).
    # The approximate index holds chapter vectors only (passage vectors are searched only
    # exactly, below the threshold), so the reference leaves passages out too.
    exact_idx = str(tmp_path / "exact")
    off = cfg.with_overrides({"index.ann_min_rows": 0, "index.passage_chars": 0})
    build_index(kb2, off, exact_idx)
    exact = Engine.from_kb(kb2, exact_idx, off)
    queries = [n.title for n in list(kb2.nodes.values())[::20]]
    recall = [
        overlap(
            [i for i, _ in ann.candidates(q, pool=10, mode="vector").vector],
            [i for i, _ in exact.candidates(q, pool=10, mode="vector").vector],
        )
        for q in queries
    ]
    # ~610 rows, 2 partitions, both probed and 150 candidates re-ranked exactly:
    # only PQ's coarse scores can lose a neighbour here.
    assert np.mean(recall) >= 0.95


@pytest.mark.slow
def test_lowering_the_threshold_gives_an_unchanged_kb_the_vector_index_without_a_rebuild(
    tmp_path: Path,
) -> None:
    from engine.indexer import build_index
    from engine.manifest import read_manifest
    from engine.search import Engine
    from engine.tree import parse_kb
    from workbench.bench.synthetic import synthetic_kb

    synthetic_kb(tmp_path / "kb", 600, seed=7)
    kb = parse_kb(tmp_path / "kb")
    idx = str(tmp_path / "idx")
    build_index(kb, HASH_CFG.with_overrides({"index.ann_min_rows": 0}), idx)
    before = read_manifest(Location(idx))
    assert before.vector_index == ""
    lowered = HASH_CFG.with_overrides({"index.ann_min_rows": len(kb.nodes)})
    report = build_index(kb, lowered, idx)
    assert not report.full_rebuild and report.embedded == 0
    after = read_manifest(Location(idx))
    assert after.vector_index.startswith("IVF_PQ/cosine/")
    # Same table and rows; the manifest names the version that holds the index.
    assert after.table == before.table and after.nodes == before.nodes
    assert after.version > before.version and report.version == after.version
    snap = Engine.from_kb(kb, idx, lowered)._shared.current().snapshot
    assert snap.ann and snap.vectors.size == 0
    # Nothing more to do the next time: the manifest stays as it is.
    build_index(kb, lowered, idx)
    assert read_manifest(Location(idx)) == after


def test_a_query_probes_most_of_the_vector_index_partitions_and_at_least_32() -> None:
    from engine.ann import ann_nprobes

    # Hash vectors have no clusters: recall@10 0.909 at 98 of 152 partitions, 0.983 at 128.
    assert ann_nprobes("IVF_PQ/cosine/partitions=1000/sub_vectors=32") == 850
    assert ann_nprobes("IVF_PQ/cosine/partitions=152/sub_vectors=32") == 130
    assert ann_nprobes("IVF_PQ/cosine/partitions=20/sub_vectors=32") == 32
    assert ann_nprobes("") == 32


def test_ann_search_re_ranks_the_candidate_budget_whatever_k() -> None:
    from engine.ann import ANN_REFINE_CANDIDATES, ann_refine_factor

    assert ann_refine_factor(30) == 5  # hybrid's pool: the factor the 1M recall was measured at
    for budget in (ANN_REFINE_CANDIDATES, 1000):
        for k in (1, 7, 10, 30, 40, 333, 1000, 5000):
            f = ann_refine_factor(k, budget)
            assert f * k >= budget
            assert f == 1 or (f - 1) * k < budget  # no more than needed


def test_fine_pq_codes_get_the_small_budget_and_older_coarse_indexes_keep_theirs() -> None:
    from engine.ann import (
        ANN_REFINE_CANDIDATES,
        ANN_REFINE_CANDIDATES_COARSE,
        ann_refine_candidates,
    )

    assert ann_refine_candidates("IVF_PQ/cosine/partitions=250/sub_vectors=64/dims=256") == (
        ANN_REFINE_CANDIDATES
    )
    # Built before the change: 8 dims per sub-vector, no dims= in the description.
    assert ann_refine_candidates("IVF_PQ/cosine/partitions=1000/sub_vectors=32") == (
        ANN_REFINE_CANDIDATES_COARSE
    )
    assert ann_refine_candidates("IVF_PQ/cosine/partitions=9/sub_vectors=32/dims=256") == (
        ANN_REFINE_CANDIDATES_COARSE
    )
    assert ANN_REFINE_CANDIDATES < ANN_REFINE_CANDIDATES_COARSE


def test_the_vector_index_has_four_dims_per_sub_vector_and_a_quarter_root_of_partitions(
    tmp_path: Path,
) -> None:
    from engine.ann import ann_partitions, ann_sub_vectors
    from engine.embedding import make_embedder
    from engine.indexer import build_index
    from engine.manifest import read_manifest
    from engine.tree import parse_kb
    from tests.engine.engine_kit import HASH_CFG
    from workbench.bench.synthetic import synthetic_kb

    assert ann_sub_vectors(256) == 64 and ann_sub_vectors(512) == 128
    assert ann_sub_vectors(12) == 3 and ann_sub_vectors(7) == 1  # always divides evenly
    assert ann_partitions(1_000_000) == 250 and ann_partitions(200_000) == 111
    assert ann_partitions(1600) == 6  # rows / 256: LanceDB trains no more
    assert ann_partitions(10) == 1
    synthetic_kb(tmp_path / "kb", 1600, seed=3)
    kb = parse_kb(tmp_path / "kb")
    build_index(kb, HASH_CFG, str(tmp_path / "idx"), ann_min_rows=1000)
    m = read_manifest(Location(str(tmp_path / "idx")))
    assert m is not None
    dims = make_embedder(HASH_CFG.embedding).signature.dims
    assert m.vector_index == (
        f"IVF_PQ/cosine/partitions=6/sub_vectors={ann_sub_vectors(dims)}/dims={dims}"
    )
