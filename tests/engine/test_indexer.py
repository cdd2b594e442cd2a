from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.errors import ProviderError
from engine.index_plan import freshness
from engine.indexer import build_index, drop_stale_tables
from engine.manifest import MANIFEST, read_manifest
from engine.rows import embed_text
from engine.search import Engine
from engine.store import Location, Store
from engine.tree import parse_kb
from tests.engine.engine_kit import HASH_CFG, TINY_KB, CountingEmbedder, write_kb

N_NODES = 12  # 3 documents x (document node + H1 + 2 H2)


@pytest.fixture
def kb_dir(tmp_path: Path) -> Path:
    return write_kb(tmp_path / "kb")


def _build(kb_dir: Path, idx: Path, emb: CountingEmbedder | None = None, **kw):
    return build_index(
        parse_kb(kb_dir), HASH_CFG, str(idx), embedder=emb or CountingEmbedder(), **kw
    )


def test_first_build_is_full_and_writes_manifest_and_caches(kb_dir: Path, tmp_path: Path) -> None:
    emb = CountingEmbedder()
    stages: set[str] = set()
    report = _build(kb_dir, tmp_path / "idx", emb, progress=lambda d, t, s: stages.add(s))
    assert report.full_rebuild and report.added == N_NODES and report.embedded == N_NODES
    assert (report.updated, report.removed, report.unchanged) == (0, 0, 0)
    assert len(emb.chapter_texts) == N_NODES
    assert {"embed", "lexical", "vocab"} <= stages
    m = read_manifest(Location(str(tmp_path / "idx")))
    assert m is not None and m.table == report.table and m.version == report.version
    assert m.signature == {"provider": "hash", "model": "char-ngram-1-3-crc32-v1", "dims": 256}
    assert len(m.nodes) == N_NODES and m.tokenizer == "jieba-search+stem"
    files = Location(str(tmp_path / "idx")).names()
    assert set(files) == {
        MANIFEST,
        m.hashes_file,
        m.lexical_file,
        m.crumbs_file,
        m.lexical_stats_file,
        m.vocab_terms_file,
        m.vocab_vectors_file,
    }
    assert m.lexical_delta_file == ""  # a full build writes the counts as a base


def test_embedded_text_layout(kb_dir: Path) -> None:
    kb = parse_kb(kb_dir)
    node = kb.nodes["rag/chunking#切块策略/按标题切块"]
    assert embed_text(node, 10) == (
        "path: rag/chunking.md\ntitle: 切块策略 > 按标题切块\n"
        f"summary: {node.summary}\n" + node.content[:10]
    )


def test_rebuild_without_changes_embeds_nothing(kb_dir: Path, tmp_path: Path) -> None:
    _build(kb_dir, tmp_path / "idx")
    emb = CountingEmbedder()
    report = _build(kb_dir, tmp_path / "idx", emb)
    assert not report.full_rebuild
    assert (report.added, report.updated, report.removed, report.unchanged) == (0, 0, 0, N_NODES)
    assert emb.calls == 0


def test_incremental_touches_only_changed_chapters(kb_dir: Path, tmp_path: Path) -> None:
    idx = tmp_path / "idx"
    first = _build(kb_dir, idx)
    # Edit one chapter, add a document, delete another.
    p = kb_dir / "retrieval/rerank.md"
    p.write_text(p.read_text().replace("候选数不宜超过 35。", "候选数不宜超过 20。"), "utf-8")
    (kb_dir / "faq.md").write_text("# 常见问题\n\n索引多久更新一次？每晚。\n", "utf-8")
    (kb_dir / "evaluation/metrics.md").unlink()
    emb = CountingEmbedder()
    report = _build(kb_dir, idx, emb)
    assert not report.full_rebuild and report.table == first.table
    assert report.added == 2  # faq document node + its H1
    assert report.updated == 1 and report.removed == 4
    assert report.unchanged == N_NODES - 4 - 1
    assert sorted(t.splitlines()[1] for t in emb.chapter_texts) == [
        "title: 常见问题",
        "title: 常见问题",
        "title: 重排 > 延迟",
    ]
    tbl = Store(str(idx)).open_table(report.table, report.version)
    ids = set(Store.read(tbl, ["id"]).column("id").to_pylist())
    assert ids == set(parse_kb(kb_dir).nodes)
    assert report.rows == len(ids)


def test_row_only_changes_reuse_vectors(kb_dir: Path, tmp_path: Path) -> None:
    idx = tmp_path / "idx"
    _build(kb_dir, idx)
    p = kb_dir / "rag/chunking.md"
    p.write_text(p.read_text().replace("category: rag", "category: chunking"), "utf-8")
    emb = CountingEmbedder()
    report = _build(kb_dir, idx, emb)
    assert report.updated == 4 and report.embedded == 0 and emb.chapter_texts == []
    tbl = Store(str(idx)).open_table(report.table, report.version)
    cats = Store.read(tbl, ["id", "category"]).to_pylist()
    assert {r["category"] for r in cats if r["id"].startswith("rag/")} == {"chunking"}


def test_changed_embedder_forces_full_rebuild_with_warning(kb_dir: Path, tmp_path: Path) -> None:
    idx = tmp_path / "idx"
    first = _build(kb_dir, idx)
    emb = CountingEmbedder(dims=64)
    report = _build(kb_dir, idx, emb)
    assert report.full_rebuild and report.table != first.table
    assert any("embedder changed" in w and "/256 -> " in w for w in report.warnings)
    assert report.updated == N_NODES and report.embedded == N_NODES
    assert Store(str(idx)).table_names() == [report.table]  # the old table was dropped


def test_force_rebuilds_into_a_new_table(kb_dir: Path, tmp_path: Path) -> None:
    idx = tmp_path / "idx"
    first = _build(kb_dir, idx)
    report = _build(kb_dir, idx, force=True)
    assert report.full_rebuild and report.table != first.table and report.embedded == N_NODES
    assert report.warnings == []


def test_crash_during_full_rebuild_leaves_previous_index_usable(
    kb_dir: Path, tmp_path: Path
) -> None:
    idx = tmp_path / "idx"
    first = _build(kb_dir, idx)
    before = (idx / MANIFEST).read_text()
    failing = CountingEmbedder(fail_after=5)
    with pytest.raises(ProviderError):
        build_index(parse_kb(kb_dir), HASH_CFG, str(idx), force=True, embedder=failing)
    assert (idx / MANIFEST).read_text() == before
    engine = Engine.from_kb(parse_kb(kb_dir), str(idx), HASH_CFG, embedder=CountingEmbedder())
    assert engine.search("重排 延迟").results[0].node_id == "retrieval/rerank#重排/延迟"
    assert engine.index_fingerprint == f"{first.table}_v{first.version}"
    # The orphan table from the crash is dropped by the next successful build.
    assert len(Store(str(idx)).table_names()) == 2
    _build(kb_dir, idx, force=True)
    assert len(Store(str(idx)).table_names()) == 1


def test_crash_during_incremental_update_changes_nothing(kb_dir: Path, tmp_path: Path) -> None:
    idx = tmp_path / "idx"
    first = _build(kb_dir, idx)
    for rel in TINY_KB:
        p = kb_dir / rel
        p.write_text(p.read_text() + "\n补充一段新内容。\n", "utf-8")
    with pytest.raises(ProviderError):
        _build(kb_dir, idx, CountingEmbedder(fail_after=2))
    assert Store(str(idx)).open_table(first.table).version == first.version
    assert read_manifest(Location(str(idx))).build_id == f"{first.table}_v{first.version}"


def test_table_versions_past_the_manifest_are_rolled_back(kb_dir: Path, tmp_path: Path) -> None:
    idx = tmp_path / "idx"
    first = _build(kb_dir, idx)
    # Simulate a crash after a write but before the manifest switch: a stray delete.
    tbl = Store(str(idx)).open_table(first.table)
    Store.delete_ids(tbl, ["rag/chunking"])
    report = _build(kb_dir, idx)
    assert report.embedded == 0
    tbl = Store(str(idx)).open_table(report.table, report.version)
    assert "rag/chunking" in Store.read(tbl, ["id"]).column("id").to_pylist()


def test_freshness_counts(kb_dir: Path, tmp_path: Path) -> None:
    idx = tmp_path / "idx"
    _build(kb_dir, idx)
    m = read_manifest(Location(str(idx)))
    assert freshness(parse_kb(kb_dir), HASH_CFG, m) == {
        "new": 0,
        "changed": 0,
        "deleted": 0,
        "fresh": True,
    }
    (kb_dir / "evaluation/metrics.md").unlink()
    p = kb_dir / "rag/chunking.md"
    p.write_text(p.read_text() + "\n新增。\n", "utf-8")
    fr = freshness(parse_kb(kb_dir), HASH_CFG, m)
    assert fr == {"new": 0, "changed": 1, "deleted": 4, "fresh": False}
    assert freshness(parse_kb(kb_dir), HASH_CFG, None)["new"] == N_NODES - 4


def test_drop_stale_tables_keeps_the_current_one(kb_dir: Path, tmp_path: Path) -> None:
    idx = tmp_path / "idx"
    _build(kb_dir, idx)
    report = _build(kb_dir, idx, force=True, drop_old=False)
    assert len(Store(str(idx)).table_names()) == 2
    assert drop_stale_tables(str(idx)) == 1
    assert Store(str(idx)).table_names() == [report.table]


def test_builds_in_two_threads_are_serialised(kb_dir: Path, tmp_path: Path) -> None:
    import threading

    idx = tmp_path / "idx"
    reports = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            reports.append(_build(kb_dir, idx, force=True))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(reports) == 2
    current = read_manifest(Location(str(idx)))
    assert current.table in {r.table for r in reports}
    assert Store(str(idx)).table_names() == [current.table]
    assert (idx / ".build.lock").exists() and ".build.lock" not in Location(str(idx)).names()


def test_manifest_is_valid_json_with_hash_pairs(kb_dir: Path, tmp_path: Path) -> None:
    idx = tmp_path / "idx"
    _build(kb_dir, idx)
    data = json.loads((idx / MANIFEST).read_text())
    assert "nodes" not in data and data["nodes_changed"] == {} and data["nodes_removed"] == []
    base = json.loads((idx / data["hashes_file"]).read_text())
    assert len(base["nodes"]["ids"]) == len(base["nodes"]["embed"]) == N_NODES
    assert all(isinstance(h, str) and h for h in base["nodes"]["embed"] + base["nodes"]["row"])
    assert data["format"] == 1 and data["kb_fingerprint"]


def test_llm_summaries_are_embedded_when_configured(kb_dir: Path, tmp_path: Path) -> None:
    from engine.rows import summary_key

    idx = tmp_path / "idx"
    _build(kb_dir, idx)
    kb = parse_kb(kb_dir)
    node = kb.nodes["retrieval/rerank#重排/延迟"]
    (idx / "summaries.json").write_text(
        json.dumps(
            {"version": 1, "summaries": {summary_key(node): {"summary": "重排的延迟代价。"}}},
            ensure_ascii=False,
        ),
        "utf-8",
    )
    cfg = HASH_CFG.with_overrides({"index.use_summaries": True})
    emb = CountingEmbedder()
    report = build_index(kb, cfg, str(idx), embedder=emb)
    assert report.updated == 1 and emb.chapter_texts == [
        embed_text(node, cfg.index.content_chars, "重排的延迟代价。")
    ]
    assert "summary: 重排的延迟代价。" in emb.chapter_texts[0]
    m = read_manifest(Location(str(idx)))
    assert m.summaries == {summary_key(node): "重排的延迟代价。"}
    assert freshness(kb, cfg, m)["fresh"] is True
    assert build_index(kb, cfg, str(idx), embedder=CountingEmbedder()).embedded == 0


def test_use_summaries_without_a_cache_warns(kb_dir: Path, tmp_path: Path) -> None:
    cfg = HASH_CFG.with_overrides({"index.use_summaries": True})
    report = build_index(parse_kb(kb_dir), cfg, str(tmp_path / "idx"), embedder=CountingEmbedder())
    assert any("use_summaries is on" in w for w in report.warnings)


def test_turning_stemming_on_retokenizes_every_row_without_re_embedding(
    kb_dir: Path, tmp_path: Path
) -> None:
    idx = tmp_path / "idx"
    plain = HASH_CFG.with_overrides({"lexical.stem": False})
    build_index(parse_kb(kb_dir), plain, str(idx), embedder=CountingEmbedder())
    stem = HASH_CFG.with_overrides({"lexical.stem": True})
    emb = CountingEmbedder()
    report = build_index(parse_kb(kb_dir), stem, str(idx), embedder=emb)
    n = len(parse_kb(kb_dir).nodes)
    assert (report.updated, report.embedded) == (n, 0)  # the embedded text did not change
    assert emb.chapter_texts == []
    manifest = read_manifest(Location(str(idx), None))
    assert manifest is not None and manifest.tokenizer == "jieba-search+stem"
    Engine.open(kb_dir, idx, stem)  # the engine accepts the rebuilt index


def _index_contents(idx: Path) -> dict:
    """What an index holds, independent of how it was built (table names, versions, column
    order of the BM25 matrix), as a serving snapshot loads it."""
    from engine.index_caches import current_title_terms
    from engine.snapshot import load_snapshot

    loc = Location(str(idx))
    m = read_manifest(loc)
    assert m is not None
    store = Store(str(idx))
    tbl = store.open_table(m.table, m.version)
    rows = sorted(
        Store.read(
            tbl, ["id", "tokens", "text", "content_hash", "row_hash", "keywords"]
        ).to_pylist(),
        key=lambda r: r["id"],
    )
    snap = load_snapshot(store, loc, m)
    bm, ids = snap.lexical, snap.ids
    queries = [["重排", "延迟"], ["召回率"], ["切块", "标题"], ["常见问题", "每晚"], ["mrr"]]
    return {
        "rows": rows,
        "nodes": m.nodes,
        "ids": ids,
        "terms": sorted(bm.terms),
        "scores": [bm.get_scores(q) for q in queries],
        "vocab": json.loads(loc.read_text(m.vocab_terms_file))["terms"],
        "vocab_vectors": snap.vocab.vectors.tolist(),
        "title_terms": current_title_terms(loc, m),
        "files": m.files,
        "title_field": _title_field(bm, ids),
    }


def _title_field(bm, ids: list[str]) -> dict:
    """The BM25 title-field counts as {(row id, term): count} (column order aside)."""
    assert bm.title_counts is not None
    c = bm.title_counts.tocoo()
    return {(ids[r], bm.terms[t]): v for r, t, v in zip(c.row, c.col, c.data, strict=True)}


def _assert_same_index(a: dict, b: dict) -> None:
    import numpy as np

    keys = (
        "rows",
        "nodes",
        "ids",
        "terms",
        "vocab",
        "vocab_vectors",
        "title_terms",
        "files",
        "title_field",
    )
    for key in keys:
        assert a[key] == b[key], key
    for sa, sb in zip(a["scores"], b["scores"], strict=True):
        np.testing.assert_allclose(sa, sb, rtol=1e-12, atol=1e-12)


def test_incremental_update_equals_a_full_rebuild(
    kb_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import engine.indexer as indexer

    idx = tmp_path / "idx"
    _build(kb_dir, idx)
    recounted: list[str] = []
    real = indexer.lexical_from_table
    monkeypatch.setattr(indexer, "lexical_from_table", lambda *a: recounted.append("x") or real(*a))
    # An edited chapter, a renamed heading, new keywords, a new file, a deleted file.
    p = kb_dir / "retrieval/rerank.md"
    text = p.read_text().replace("候选数不宜超过 35。", "候选数不宜超过 20。")
    p.write_text(text.replace("## 交叉编码器", "## 双塔与交叉编码器"), "utf-8")
    q = kb_dir / "rag/chunking.md"
    q.write_text(q.read_text().replace("keywords: [切块, chunking]", "keywords: [分块]"), "utf-8")
    (kb_dir / "faq.md").write_text("# 常见问题\n\n索引多久更新一次？每晚。\n", "utf-8")
    (kb_dir / "evaluation/metrics.md").unlink()
    report = _build(kb_dir, idx)
    assert not report.full_rebuild and report.removed == 5 and report.added == 3
    _build(kb_dir, tmp_path / "fresh")
    _assert_same_index(_index_contents(idx), _index_contents(tmp_path / "fresh"))
    # ... and again after a second update on top of the first.
    (kb_dir / "faq.md").unlink()
    _build(kb_dir, idx)
    _build(kb_dir, tmp_path / "fresh2")
    _assert_same_index(_index_contents(idx), _index_contents(tmp_path / "fresh2"))
    assert recounted == []  # the counts were patched, not recounted from the table


def test_unchanged_files_are_not_hashed_again(
    kb_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import engine.index_plan as index_plan

    _build(kb_dir, tmp_path / "idx")
    p = kb_dir / "rag/chunking.md"
    p.write_text(p.read_text() + "\n补充。\n", "utf-8")
    hashed: list[str] = []
    real = index_plan.node_hashes
    monkeypatch.setattr(
        index_plan, "node_hashes", lambda n, *a, **k: hashed.append(n.node_id) or real(n, *a, **k)
    )
    report = _build(kb_dir, tmp_path / "idx")
    assert report.updated == 1
    assert sorted(hashed) == sorted(n for n in parse_kb(kb_dir).nodes if n.startswith("rag/"))


def test_index_written_before_update_caches_is_updated_by_recounting(
    kb_dir: Path, tmp_path: Path
) -> None:
    from dataclasses import replace

    idx = tmp_path / "idx"
    _build(kb_dir, idx)
    loc = Location(str(idx))
    m = read_manifest(loc)
    old = replace(
        m, title_terms=None, lexical_stats_file="", files={}, hash_context=""
    )  # no stats file and no title terms: nothing to patch
    loc.write_text(MANIFEST, old.to_json())
    (kb_dir / "faq.md").write_text("# 常见问题\n\n索引多久更新一次？每晚。\n", "utf-8")
    report = _build(kb_dir, idx)
    assert not report.full_rebuild and report.added == 2 and report.embedded == 2
    _build(kb_dir, tmp_path / "fresh")
    _assert_same_index(_index_contents(idx), _index_contents(tmp_path / "fresh"))


@pytest.mark.slow
def test_worker_processes_build_the_same_index(
    kb_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import engine.table_write as table_write

    monkeypatch.setattr(table_write, "ROW_BATCH", 5)  # 3 batches over 2 workers: order matters
    build_index(
        parse_kb(kb_dir), HASH_CFG, str(tmp_path / "one"), embedder=CountingEmbedder(), workers=1
    )
    build_index(
        parse_kb(kb_dir), HASH_CFG, str(tmp_path / "two"), embedder=CountingEmbedder(), workers=2
    )
    _assert_same_index(_index_contents(tmp_path / "one"), _index_contents(tmp_path / "two"))


def _edit_one_chapter(kb_dir: Path, n: int) -> None:
    p = kb_dir / "retrieval/rerank.md"
    p.write_text(p.read_text() + f"\n补充第 {n} 段：延迟预算。\n", "utf-8")


def test_an_update_writes_a_delta_and_keeps_the_base(kb_dir: Path, tmp_path: Path) -> None:
    idx = tmp_path / "idx"
    _build(kb_dir, idx)
    loc = Location(str(idx))
    first = read_manifest(loc)
    base_bytes = (idx / first.lexical_file).read_bytes()
    for n in (1, 2):
        _edit_one_chapter(kb_dir, n)
        report = _build(kb_dir, idx)
        assert not report.full_rebuild and report.updated == 1
        m = read_manifest(loc)
        # The base files are the first build's, untouched; only a new delta was written.
        assert (m.lexical_file, m.crumbs_file, m.lexical_stats_file) == (
            first.lexical_file,
            first.crumbs_file,
            first.lexical_stats_file,
        )
        assert (idx / m.lexical_file).read_bytes() == base_bytes
        assert m.lexical_delta_file and m.lexical_delta_file != first.lexical_delta_file
        # The manifest records the changed node hashes, not all of them.
        data = json.loads((idx / MANIFEST).read_text())
        assert data["hashes_file"] == first.hashes_file and "nodes" not in data
        assert list(data["nodes_changed"]) == ["retrieval/rerank#重排/延迟"]
        assert list(data["files_changed"]) == ["retrieval/rerank.md"]
        assert set(loc.names()) == {
            MANIFEST,
            first.hashes_file,  # the node hashes' base stays too: the manifest has the change
            m.lexical_file,
            m.crumbs_file,
            m.lexical_stats_file,
            m.lexical_delta_file,
            m.vocab_terms_file,
            m.vocab_vectors_file,
        }
    _build(kb_dir, tmp_path / "fresh")
    _assert_same_index(_index_contents(idx), _index_contents(tmp_path / "fresh"))


def test_an_update_keeps_the_vocabulary_files_when_its_terms_do_not_change(
    kb_dir: Path, tmp_path: Path
) -> None:
    idx = tmp_path / "idx"
    _build(kb_dir, idx)
    first = read_manifest(Location(str(idx)))
    p = kb_dir / "retrieval/rerank.md"
    p.write_text(p.read_text().replace("候选数不宜超过 35。", "候选数不宜超过 36。"), "utf-8")
    emb = CountingEmbedder()
    report = _build(kb_dir, idx, emb)
    m = read_manifest(Location(str(idx)))
    assert report.updated == 1 and len(emb.chapter_texts) == 1  # no vocabulary term embedded
    assert (m.vocab_terms_file, m.vocab_vectors_file) == (
        first.vocab_terms_file,
        first.vocab_vectors_file,
    )
    _build(kb_dir, tmp_path / "fresh")
    _assert_same_index(_index_contents(idx), _index_contents(tmp_path / "fresh"))


def test_a_big_delta_is_compacted_into_a_new_base(
    kb_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import engine.lexical_delta as lexical_delta

    idx = tmp_path / "idx"
    _build(kb_dir, idx)
    _edit_one_chapter(kb_dir, 1)
    _build(kb_dir, idx)
    loc = Location(str(idx))
    with_delta = read_manifest(loc)
    assert with_delta.lexical_delta_file
    monkeypatch.setattr(lexical_delta, "COMPACT_MIN_ROWS", 1)  # 2 changed rows > 1
    _edit_one_chapter(kb_dir, 2)
    report = _build(kb_dir, idx)
    assert not report.full_rebuild
    m = read_manifest(loc)
    assert m.lexical_delta_file == "" and m.lexical_file != with_delta.lexical_file
    assert with_delta.lexical_file not in loc.names()  # the old base is dropped
    _build(kb_dir, tmp_path / "fresh")
    _assert_same_index(_index_contents(idx), _index_contents(tmp_path / "fresh"))


def test_a_crash_before_the_manifest_switch_leaves_the_previous_index_readable(
    kb_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import engine.indexer as indexer

    idx = tmp_path / "idx"
    _build(kb_dir, idx)
    _edit_one_chapter(kb_dir, 1)
    _build(kb_dir, idx)  # an index with a delta
    before = _index_contents(idx)
    loc = Location(str(idx))
    m_before = (idx / MANIFEST).read_bytes()

    def crash(*_a: object, **_k: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(indexer, "write_manifest", crash)
    _edit_one_chapter(kb_dir, 2)
    with pytest.raises(OSError, match="disk full"):
        _build(kb_dir, idx)
    assert (idx / MANIFEST).read_bytes() == m_before
    assert any(
        n.endswith(".delta.npz") and n != read_manifest(loc).lexical_delta_file for n in loc.names()
    )
    _assert_same_index(_index_contents(idx), before)  # the old base + delta, as they were
    monkeypatch.undo()
    report = _build(kb_dir, idx)  # the next update starts from the manifest's version
    assert report.updated == 1
    _build(kb_dir, tmp_path / "fresh")
    _assert_same_index(_index_contents(idx), _index_contents(tmp_path / "fresh"))


def test_an_index_without_the_stats_file_is_updated_from_its_manifest_title_terms(
    kb_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An index written before the counts had a base and delta (title terms in the
    manifest, no stats file) is patched as before; its update writes a base."""
    from dataclasses import replace

    import engine.indexer as indexer
    from engine.index_caches import current_title_terms

    idx = tmp_path / "idx"
    _build(kb_dir, idx)
    loc = Location(str(idx))
    m = read_manifest(loc)
    titles = current_title_terms(loc, m)
    data = json.loads(replace(m, title_terms=titles).to_json())
    for key in ("lexical_stats_file", "lexical_delta_file", "hashes_file"):
        data.pop(key)
    for key in ("nodes_changed", "nodes_removed", "files_changed", "files_removed"):
        data.pop(key)
    data["nodes"] = {k: list(v) for k, v in m.nodes.items()}  # inline, as it was
    data["files"] = dict(m.files)
    for name in (m.lexical_stats_file, m.hashes_file):
        loc.delete(name)
    loc.write_text(MANIFEST, json.dumps(data))
    assert read_manifest(loc).nodes == m.nodes
    assert Engine.from_kb(parse_kb(kb_dir), str(idx), HASH_CFG, embedder=CountingEmbedder())
    recounted: list[str] = []
    real = indexer.lexical_from_table
    monkeypatch.setattr(indexer, "lexical_from_table", lambda *a: recounted.append("x") or real(*a))
    for n in (1, 2):  # the first update writes a base, the second a delta on it
        _edit_one_chapter(kb_dir, n)
        _build(kb_dir, idx)
        _build(kb_dir, tmp_path / f"fresh{n}")
        _assert_same_index(_index_contents(idx), _index_contents(tmp_path / f"fresh{n}"))
    m2 = read_manifest(loc)
    assert m2.lexical_stats_file and m2.lexical_delta_file and m2.title_terms is None
    assert m2.hashes_file and m2.hashes_file in loc.names()
    assert recounted == []


def test_a_manifest_whose_hashes_file_is_gone_says_how_to_fix(kb_dir: Path, tmp_path: Path) -> None:
    from engine.errors import EngineError

    idx = tmp_path / "idx"
    _build(kb_dir, idx)
    loc = Location(str(idx))
    loc.delete(read_manifest(loc).hashes_file)
    with pytest.raises(EngineError, match=r"is missing.*wikirag index --force"):
        read_manifest(loc)


def test_a_serving_engine_reads_base_plus_delta_without_recounting(
    kb_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import engine.snapshot as snapshot

    idx = tmp_path / "idx"
    _build(kb_dir, idx)
    p = kb_dir / "retrieval/rerank.md"
    p.write_text(p.read_text() + "\n补充：蒸馏小模型可降低延迟。\n", "utf-8")
    _build(kb_dir, idx)
    assert read_manifest(Location(str(idx))).lexical_delta_file
    got: list = []
    real = snapshot.current_counts
    monkeypatch.setattr(snapshot, "current_counts", lambda *a: got.append(real(*a)) or got[-1])
    eng = Engine.from_kb(parse_kb(kb_dir), str(idx), HASH_CFG, embedder=CountingEmbedder())
    snap = eng._shared.current().snapshot
    assert snap.manifest.nodes == {}  # the snapshot keeps the manifest's header only
    assert len(got) == 1 and got[0] is not None and got[0].ids == snap.ids
    hits = eng.search("蒸馏", mode="keyword").results
    assert hits and hits[0].node_id == "retrieval/rerank#重排/延迟"
