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
    from engine.indexer import build_index
    from engine.manifest import read_manifest
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
    assert "datasets" not in scannable._registered_modules  # lancedb's own state untouched
    assert "datasets" not in sys.modules
