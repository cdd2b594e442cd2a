"""Passage vectors: how a chapter is cut, what the index stores, how the vector channel scores."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.config import EngineConfig
from engine.embedding import HashEmbedder
from engine.indexer import build_index
from engine.manifest import read_manifest
from engine.passages import _cut, passage_texts, sentences, size, split_passages
from engine.search import Engine
from engine.store import PASSAGES, Location, Store, passages_of
from engine.tree import parse_kb
from tests.engine.engine_kit import HASH_CFG, write_kb

TEXT = st.text(alphabet=st.sampled_from(list("检索增强生成 abc。！？.\n")), max_size=400)


@given(TEXT, st.integers(1, 60), st.integers(0, 30))
def test_windows_fit_their_size_and_keep_every_sentence(
    text: str, window: int, overlap: int
) -> None:
    out = split_passages(text, window, overlap)
    assert all(size(p) <= window + 0.5 for p in out)
    # Nothing is lost: every sentence (or, if too long, each of its pieces) is in a window.
    for sentence in sentences(text):
        for piece in _cut(sentence, window):
            assert any(piece in p for p in out)
    assert (out == []) == (not sentences(text))


def test_windows_are_whole_sentences_and_the_next_repeats_the_last() -> None:
    text = "第一句话。第二句话比较长一些！第三句？第四句。"
    out = split_passages(text, 12, 5)
    assert out == ["第一句话。", "第二句话比较长一些！", "第三句？ 第四句。"]
    assert split_passages("甲乙。丙丁。戊己。", 6, 3) == ["甲乙。 丙丁。", "丙丁。 戊己。"]


def test_an_english_letter_weighs_half_an_ideograph() -> None:
    assert size("检索") == 2 and size("ab") == 1 and size("检a") == 1.5
    assert split_passages("a" * 30, 10, 0) == ["a" * 20, "a" * 10]


def test_blank_text_or_no_window_gives_no_passages() -> None:
    assert split_passages("", 150, 40) == [] and split_passages(" \n ", 150, 40) == []
    assert split_passages("有内容。", 0, 40) == []


def test_a_passage_carries_its_chapter_title(tmp_path: Path) -> None:
    node = parse_kb(write_kb(tmp_path / "kb")).nodes["retrieval/rerank#重排/延迟"]
    texts = passage_texts(node, 150, 40)
    assert texts and all(t.startswith("重排 > 延迟\n") for t in texts)


def _stored_passages(idx: Path) -> dict[str, np.ndarray]:
    manifest = read_manifest(Location(str(idx)))
    assert manifest is not None
    got = Store.read(Store(str(idx)).open_table(manifest.table), ["id", PASSAGES])
    return dict(zip(got.column("id").to_pylist(), passages_of(got), strict=True))


def test_the_index_stores_each_chapters_passage_vectors(tmp_path: Path) -> None:
    kb = parse_kb(write_kb(tmp_path / "kb"))
    build_index(kb, HASH_CFG, str(tmp_path / "idx"))
    stored = _stored_passages(tmp_path / "idx")
    emb = HashEmbedder()
    cfg = HASH_CFG.index
    for nid, node in kb.nodes.items():
        texts = passage_texts(node, cfg.passage_chars, cfg.passage_overlap)
        want = emb.embed_documents(texts) if texts else np.zeros((0, 256))
        np.testing.assert_allclose(stored[nid], want, atol=1e-6)
    assert any(len(v) for v in stored.values())


def test_without_passages_nothing_is_stored_and_the_key_is_as_before(tmp_path: Path) -> None:
    cfg = HASH_CFG.with_overrides({"index.passage_chars": 0})
    build_index(parse_kb(write_kb(tmp_path / "kb")), cfg, str(tmp_path / "idx"))
    assert all(len(v) == 0 for v in _stored_passages(tmp_path / "idx").values())
    assert "passage_chars" not in cfg.index_identity()["index"]


def test_a_chapter_scores_as_its_best_vector(tmp_path: Path) -> None:
    kb_dir = write_kb(tmp_path / "kb")
    kb = parse_kb(kb_dir)
    build_index(kb, HASH_CFG, str(tmp_path / "idx"))
    eng = Engine.open(kb_dir, tmp_path / "idx", HASH_CFG)
    emb = HashEmbedder()
    query = "候选数不宜超过 35"
    q = emb.embed_query(query)
    hits = dict(eng.candidates(query, pool=50, mode="vector").vector)
    for nid, node in kb.nodes.items():
        from engine.rows import embed_text

        chapter = float(emb.embed_documents([embed_text(node, 1500)])[0] @ q)
        texts = passage_texts(node, 150, 40)
        best = max([chapter, *(emb.embed_documents(texts) @ q).tolist()]) if texts else chapter
        assert abs(hits[nid] - best) < 1e-5


def test_an_edit_past_the_embedded_head_re_embeds_the_passages(tmp_path: Path) -> None:
    kb_dir = write_kb(tmp_path / "kb")
    cfg = HASH_CFG.with_overrides({"index.content_chars": 50})
    build_index(parse_kb(kb_dir), cfg, str(tmp_path / "idx"))
    page = kb_dir / "retrieval" / "rerank.md"
    page.write_text(
        page.read_text(encoding="utf-8").replace(
            "候选数不宜超过 35。", "候选数不宜超过 35。" + "补充说明。" * 20 + "结尾新增一句。"
        ),
        encoding="utf-8",
    )
    report = build_index(parse_kb(kb_dir), cfg, str(tmp_path / "idx"))
    assert report.full_rebuild is False and report.embedded == 1
    fresh = tmp_path / "fresh"
    build_index(parse_kb(kb_dir), cfg, str(fresh))
    a, b = _stored_passages(tmp_path / "idx"), _stored_passages(fresh)
    assert a.keys() == b.keys()
    for nid in a:
        np.testing.assert_allclose(a[nid], b[nid], atol=1e-6)


def test_a_config_saved_before_passages_keeps_one_vector_per_chapter() -> None:
    saved = EngineConfig().to_dict()
    del saved["index"]["passage_chars"]
    assert EngineConfig.from_dict(saved).index.passage_chars == 0


def test_an_index_built_before_passages_is_rebuilt_when_they_are_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine import store

    kb = parse_kb(write_kb(tmp_path / "kb"))
    new_schema = store.chapter_schema
    monkeypatch.setattr(
        store,
        "chapter_schema",
        lambda dims: new_schema(dims).remove(new_schema(dims).get_field_index(PASSAGES)),
    )
    build_index(kb, HASH_CFG, str(tmp_path / "idx"))
    monkeypatch.setattr(store, "chapter_schema", new_schema)
    report = build_index(kb, HASH_CFG, str(tmp_path / "idx"))
    assert report.full_rebuild is True
    assert any("no passage vectors" in w for w in report.warnings)
    assert any(len(v) for v in _stored_passages(tmp_path / "idx").values())
