"""Cross-lingual queries: a query's script against the index's chapters, and what fusion
does with it (fusion.cross_lingual_bm25)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.config import EngineConfig
from engine.indexer import build_index
from engine.pipeline import Candidates, bm25_scale, fuse
from engine.scripts import (
    chapter_scripts,
    is_cross_lingual,
    query_script_share,
    script_shares,
    term_letters,
)
from engine.search import Engine
from engine.sparse_counts import count_matrix
from engine.tokenizer import CJK, LATIN, script_letters, script_of, tokenize
from engine.tree import parse_kb
from tests.engine.engine_kit import HASH_CFG, TINY_KB, write_kb


def _shares(texts: list[str]) -> dict[str, float]:
    counts, terms = count_matrix([tokenize(t) for t in texts])
    return script_shares(chapter_scripts(counts, terms))


def test_a_text_is_latin_when_its_letters_outnumber_three_per_cjk_character() -> None:
    assert script_of("How is parent-child chunking stored?") == LATIN
    assert script_of("父子块怎么存储") == CJK
    assert script_of("RAG 的父子块怎么存储") == CJK  # 3 letters vs 8 characters
    assert script_of("tikv-ctl 用法") == LATIN  # 7 letters > 3 x 2 characters
    assert script_of("2024-05-01 / 42") == ""


def test_chapter_shares_count_chapters_by_their_tokens_and_skip_those_without_letters() -> None:
    shares = _shares(
        ["检索增强生成的切块策略", "重排模型对候选做精排", "Chunking splits a page", "12 34 56"]
    )
    assert shares == {LATIN: pytest.approx(1 / 3), CJK: pytest.approx(2 / 3)}
    assert _shares([]) == {} and _shares(["123"]) == {}


def test_a_query_using_only_the_minority_script_is_cross_lingual() -> None:
    shares = {LATIN: 0.2, CJK: 0.8}
    assert query_script_share("How are chunks stored?", shares) == 0.2
    assert query_script_share("切块怎么存", shares) == 0.8
    # a Chinese question naming an error code uses both scripts: never cross-lingual
    assert query_script_share("br log resume 报 ErrBackupGCSafepointExceeded", shares) == 1.0
    assert query_script_share("404", shares) == 1.0  # no letters: nothing to weigh down
    assert query_script_share("How are chunks stored?", {}) == 1.0  # mix unknown
    assert is_cross_lingual(0.2) and not is_cross_lingual(0.5) and not is_cross_lingual(0.8)


def _cands(share: float) -> Candidates:
    vector = (("zh-a", 0.61), ("zh-b", 0.55), ("en-c", 0.40))
    bm25 = (("en-c", 9.0), ("en-d", 7.5), ("zh-a", 0.5))
    return Candidates("How are chunks stored?", vector, bm25, (), 30, script_share=share)


def test_fusion_weighs_bm25_down_only_for_a_cross_lingual_query() -> None:
    cfg = EngineConfig().with_overrides({"fusion.cross_lingual_bm25": 0.0})
    same = [nid for nid, _ in fuse(_cands(0.9), cfg, "hybrid", 30)]
    cross = [nid for nid, _ in fuse(_cands(0.1), cfg, "hybrid", 30)]
    assert same[0] == "en-c"  # BM25's English chapter wins when the KB is mostly English
    assert cross[:2] == ["zh-a", "zh-b"]  # the vector channel's order, BM25 weighed out
    assert bm25_scale(_cands(0.1), cfg) == 0.0 and bm25_scale(_cands(0.9), cfg) == 1.0
    # 1 = off: the same fused list whatever the share
    off = EngineConfig().with_overrides({"fusion.cross_lingual_bm25": 1.0})
    assert fuse(_cands(0.1), off, "hybrid", 30) == fuse(_cands(0.9), off, "hybrid", 30)
    # single-channel modes ignore weights
    assert fuse(_cands(0.1), cfg, "keyword", 30)[0][0] == "en-c"


ENGLISH_CHAPTER = {
    "api/http.md": "# HTTP API\n\nThe search endpoint returns ranked chapters as JSON.\n",
}


def test_a_search_knows_the_share_of_chapters_in_its_querys_script(tmp_path: Path) -> None:
    kb_dir = write_kb(tmp_path / "kb", {**TINY_KB, **ENGLISH_CHAPTER})
    build_index(parse_kb(kb_dir), HASH_CFG, str(tmp_path / "idx"))
    engine = Engine.open(kb_dir, tmp_path / "idx", HASH_CFG)
    english = engine.candidates("How are chunks reranked?", pool=5)
    chinese = engine.candidates("重排怎么做", pool=5)
    assert is_cross_lingual(english.script_share) and 0 < english.script_share < 0.5
    assert chinese.script_share == pytest.approx(1 - english.script_share)
    assert engine.candidates("2024", pool=5).script_share == 1.0


def test_term_letters_count_as_script_letters_does_for_every_term() -> None:
    terms = ["检索", "rerank", "", "é", "k8s", "トークン", "한국어", "v8.5", "混合hybrid", "x", ""]
    want = [script_letters(t) for t in terms]
    assert term_letters(terms).tolist() == [[float(a), float(b)] for a, b in want]
    assert term_letters([]).shape == (0, 2)


def test_a_filtered_search_weighs_by_the_mix_of_the_chapters_it_keeps(tmp_path: Path) -> None:
    english = {
        "api/http.md": "---\ncategory: api\n---\n# HTTP API\n\nThe search endpoint returns JSON.\n",
    }
    kb_dir = write_kb(tmp_path / "kb", {**TINY_KB, **english})
    build_index(parse_kb(kb_dir), HASH_CFG, str(tmp_path / "idx"))
    engine = Engine.open(kb_dir, tmp_path / "idx", HASH_CFG)
    question = "How does the search endpoint answer?"
    assert is_cross_lingual(engine.candidates(question, pool=5).script_share)
    only_api = engine.candidates(question, pool=5, filters={"category": "api"})
    assert only_api.script_share == 1.0  # every chapter it searches is English
