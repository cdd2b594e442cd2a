from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from engine.errors import EngineError
from engine.store import Location, Store, chapter_schema, filter_sql, sql_str, vectors_of
from tests.engine.engine_kit import HASH_CFG, write_kb


def _rows(n: int, dims: int, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    vecs = rng.normal(size=(n, dims)).astype(np.float32)
    cats = ["rag", "retrieval", "evaluation"]
    return [
        {
            "id": f"doc{i:04d}",
            "vector": vecs[i],
            "text": f"text {i}",
            "tokens": f"t{i} common",
            "doc_id": f"doc{i:04d}",
            "title": f"Title {i}",
            "level": 1,
            "ordinal": i,
            "parent_id": None,
            "breadcrumb": "[]",
            "file_path": f"d{i}.md",
            "line": 1,
            "anchor": "",
            "category": cats[i % 3],
            "priority": "P0" if i % 2 else "P1",
            "doc_type": "concept",
            "keywords": ["even"] if i % 2 == 0 else ["odd", "x'y"],
            "content_hash": "h",
            "row_hash": "r",
        }
        for i in range(n)
    ]


def test_schema_has_fixed_size_vector_and_keyword_list() -> None:
    s = chapter_schema(8)
    assert s.field("vector").type.list_size == 8
    assert str(s.field("keywords").type) == "list<item: string>"


def test_store_add_upsert_delete_and_versions(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "idx"))
    tbl = store.create_table("chapters_t", 4)
    rows = _rows(5, 4)
    Store.add(tbl, rows)
    v_add = tbl.version
    changed = dict(rows[0], title="Changed")
    Store.upsert(tbl, [changed, dict(rows[1], id="new")])
    Store.delete_ids(tbl, ["doc0004", "it's-missing"])
    got = Store.read(tbl, ["id", "title"]).to_pylist()
    assert sorted(r["id"] for r in got) == ["doc0000", "doc0001", "doc0002", "doc0003", "new"]
    assert {r["id"]: r["title"] for r in got}["doc0000"] == "Changed"
    old = store.open_table("chapters_t", v_add)  # a pinned reader still sees the old rows
    assert sorted(Store.read(old, ["id"]).column("id").to_pylist())[-1] == "doc0004"
    assert store.table_names() == ["chapters_t"]
    store.drop_table("chapters_t")
    assert store.table_names() == []


def test_lance_vector_search_equals_exact_numpy(tmp_path: Path) -> None:
    rows = _rows(300, 16, seed=3)
    store = Store(str(tmp_path / "idx"))
    tbl = store.create_table("chapters_v", 16)
    Store.add(tbl, rows)
    mat = np.stack([r["vector"] for r in rows])
    mat /= np.linalg.norm(mat, axis=1, keepdims=True)
    q = np.random.default_rng(9).normal(size=16).astype(np.float32)
    q /= np.linalg.norm(q)
    sims = mat @ q
    cases = [
        (None, lambda r: True),
        ({"category": ["rag", "evaluation"]}, lambda r: r["category"] in ("rag", "evaluation")),
        ({"keywords": ["x'y"], "priority": ["P0"]}, lambda r: "x'y" in r["keywords"]),
    ]
    for flt, keep in cases:
        allowed = [i for i, r in enumerate(rows) if keep(r)]
        exact = sorted(allowed, key=lambda i: -sims[i])[:10]
        got = Store.vector_search(tbl, q, 10, filter_sql(flt))
        assert [g[0] for g in got] == [rows[i]["id"] for i in exact]
        np.testing.assert_allclose([g[1] for g in got], sims[exact], atol=1e-5)


def test_filter_sql_quotes_and_rejects_unknown_keys() -> None:
    assert sql_str("O'Reilly") == "'O''Reilly'"
    assert filter_sql({"category": ["a", "b"], "keywords": ["k"]}) == (
        "category IN ('a', 'b') AND array_has_any(keywords, ['k'])"
    )
    assert filter_sql(None) is None
    with pytest.raises(EngineError, match="unknown filter 'author'"):
        filter_sql({"author": ["me"]})


def test_vectors_of_reads_the_matrix(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "idx"))
    tbl = store.create_table("chapters_m", 4)
    rows = _rows(3, 4)
    Store.add(tbl, rows)
    data = Store.read(tbl, ["id", "vector"])
    order = np.argsort(data.column("id").to_pylist())
    np.testing.assert_array_equal(vectors_of(data)[order], np.stack([r["vector"] for r in rows]))


def test_local_location_files(tmp_path: Path) -> None:
    loc = Location(str(tmp_path / "idx"))
    assert loc.read_text("manifest.json") is None
    assert loc.names() == []
    loc.write_text("manifest.json", "{}")
    loc.write_bytes("lexical_x.npz", b"\x00\x01")
    assert loc.read_text("manifest.json") == "{}"
    assert loc.names() == ["lexical_x.npz", "manifest.json"]  # no temp files left behind
    loc.delete("lexical_x.npz")
    loc.delete("never-existed")
    assert loc.names() == ["manifest.json"]


def _moto_python() -> str | None:
    if importlib.util.find_spec("moto") is not None:
        return sys.executable
    return os.environ.get("MOTO_PYTHON") or None  # a python that has moto[server]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def moto_s3():
    python = _moto_python()
    if python is None:
        pytest.skip("moto is not installed in this environment (set MOTO_PYTHON to use one)")
    port = _free_port()
    proc = subprocess.Popen(
        [python, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(endpoint, timeout=0.5)
                break
            except OSError:
                time.sleep(0.1)
        req = urllib.request.Request(f"{endpoint}/wikirag-test", method="PUT")
        urllib.request.urlopen(req, timeout=5)
        yield endpoint
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_index_and_search_on_s3(moto_s3: str, tmp_path: Path) -> None:
    from engine.indexer import build_index, read_manifest
    from engine.search import Engine
    from engine.tree import parse_kb

    opts = {
        "endpoint": moto_s3,
        "allow_http": "true",
        "aws_access_key_id": "test",
        "aws_secret_access_key": "test",
        "region": "us-east-1",
    }
    uri = "s3://wikirag-test/indexes/tiny"
    kb = parse_kb(write_kb(tmp_path / "kb"))
    report = build_index(kb, HASH_CFG, uri, storage_options=opts)
    assert report.full_rebuild and report.rows == len(kb.nodes)
    m = read_manifest(Location(uri, opts))
    assert m is not None and m.table == report.table
    assert "manifest.json" in Location(uri, opts).names()
    again = build_index(kb, HASH_CFG, uri, storage_options=opts)
    assert again.embedded == 0 and not again.full_rebuild
    # An update writes its delta as a new whole object beside the base.
    p = tmp_path / "kb" / "rag/chunking.md"
    p.write_text(p.read_text() + "\n补充：延迟预算。\n", "utf-8")
    kb = parse_kb(tmp_path / "kb")
    upd = build_index(kb, HASH_CFG, uri, storage_options=opts)
    assert upd.updated == 1 and not upd.full_rebuild
    m2 = read_manifest(Location(uri, opts))
    assert m2 is not None and m2.lexical_file == m.lexical_file
    assert m2.lexical_delta_file in Location(uri, opts).names()
    engine = Engine.from_kb(kb, uri, HASH_CFG, opts)
    resp = engine.search("重排 延迟")
    assert resp.results[0].node_id == "retrieval/rerank#重排/延迟"
    assert engine.stats()["index"]["rows"] == len(kb.nodes)


@pytest.mark.slow
def test_vector_paths_latency_and_agreement(tmp_path: Path) -> None:
    """numpy brute force vs LanceDB flat scan at 20k x 384 (the choice in engine/search.py)."""
    n, dims = 20_000, 384
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(50, dims))
    vecs = (centers[rng.integers(0, 50, n)] + 0.3 * rng.normal(size=(n, dims))).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    rows = _rows(n, dims)
    for r, v in zip(rows, vecs, strict=True):
        r["vector"] = v
    store = Store(str(tmp_path / "idx"))
    tbl = store.create_table("chapters_b", dims)
    Store.add(tbl, rows)
    queries = vecs[rng.integers(0, n, 20)] + 0.1 * rng.normal(size=(20, dims)).astype(np.float32)
    lance_ms, numpy_ms, agree = [], [], []
    for q in queries:
        q = (q / np.linalg.norm(q)).astype(np.float32)
        t = time.perf_counter()
        got = [g[0] for g in Store.vector_search(tbl, q, 10)]
        lance_ms.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        sims = np.einsum("ij,j->i", vecs, q)
        top = np.argpartition(-sims, 10)[:10]
        exact = [rows[i]["id"] for i in top[np.argsort(-sims[top])]]
        numpy_ms.append((time.perf_counter() - t) * 1000)
        agree.append(len(set(got) & set(exact)) / 10)
    assert np.mean(agree) == 1.0
    assert np.median(numpy_ms) < np.median(lance_ms)


def test_writes_survive_a_shadowed_datasets_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The repo's datasets/ folder imported as a namespace package must not break writes."""
    import types

    from lancedb import scannable

    monkeypatch.setitem(sys.modules, "datasets", types.ModuleType("datasets"))
    monkeypatch.setattr(scannable, "_registered_modules", set())
    store = Store(str(tmp_path / "idx"))
    tbl = store.create_table("chapters_d", 4)
    Store.add(tbl, _rows(2, 4))
    Store.upsert(tbl, _rows(3, 4))
    assert tbl.count_rows() == 3


@pytest.mark.slow
def test_an_approximate_vector_index_serves_filters_and_updates(tmp_path: Path) -> None:
    import numpy as np

    from engine.indexer import build_index, read_manifest
    from engine.search import Engine
    from engine.tree import parse_kb
    from tests.engine.engine_kit import HASH_CFG
    from workbench.bench import synthetic_kb

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
    from engine.indexer import build_index, read_manifest
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
    from engine.indexer import build_index, read_manifest
    from engine.search import Engine
    from engine.tree import parse_kb
    from workbench.bench import overlap, synthetic_kb

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
    exact_idx = str(tmp_path / "exact")
    off = cfg.with_overrides({"index.ann_min_rows": 0})
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
    # ~610 rows, 24 partitions, every one probed and 500 candidates re-ranked exactly:
    # only PQ's coarse scores can lose a neighbour here.
    assert np.mean(recall) >= 0.95


@pytest.mark.slow
def test_lowering_the_threshold_gives_an_unchanged_kb_the_vector_index_without_a_rebuild(
    tmp_path: Path,
) -> None:
    from engine.indexer import build_index, read_manifest
    from engine.search import Engine
    from engine.tree import parse_kb
    from workbench.bench import synthetic_kb

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
    from engine.store import ann_nprobes

    # Hash vectors have no clusters: recall@10 0.909 at 98 of 152 partitions, 0.983 at 128.
    assert ann_nprobes("IVF_PQ/cosine/partitions=1000/sub_vectors=32") == 850
    assert ann_nprobes("IVF_PQ/cosine/partitions=152/sub_vectors=32") == 130
    assert ann_nprobes("IVF_PQ/cosine/partitions=20/sub_vectors=32") == 32
    assert ann_nprobes("") == 32


def test_ann_search_re_ranks_the_candidate_budget_whatever_k() -> None:
    from engine.store import ANN_REFINE_CANDIDATES, ann_refine_factor

    assert ann_refine_factor(30) == 5  # hybrid's pool: the factor the 1M recall was measured at
    for budget in (ANN_REFINE_CANDIDATES, 1000):
        for k in (1, 7, 10, 30, 40, 333, 1000, 5000):
            f = ann_refine_factor(k, budget)
            assert f * k >= budget
            assert f == 1 or (f - 1) * k < budget  # no more than needed


def test_fine_pq_codes_get_the_small_budget_and_older_coarse_indexes_keep_theirs() -> None:
    from engine.store import (
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
    from engine.embedding import make_embedder
    from engine.indexer import build_index, read_manifest
    from engine.store import ann_partitions, ann_sub_vectors
    from engine.tree import parse_kb
    from tests.engine.engine_kit import HASH_CFG
    from workbench.bench import synthetic_kb

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
