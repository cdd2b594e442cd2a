from __future__ import annotations

import numpy as np
import pytest

from engine import prf
from engine.channels import keyword_hits, query_tokens
from engine.config import EngineConfig, LexicalConfig
from engine.errors import ConfigError
from engine.indexer import build_index
from engine.lexical import SparseBM25
from engine.search import Engine
from engine.tokenizer import tokenize
from engine.tree import parse_kb
from tests.engine.engine_kit import HASH_CFG, write_kb

PRF = LexicalConfig(prf_docs=2, prf_terms=5, prf_weight=0.5)
# Filler chapters so the topic words are rare (a positive idf) and feedback has a choice.
FILLER = [f"filler chapter number {i} about gardening soil and watering plants" for i in range(12)]


def _index(texts: list[str]) -> SparseBM25:
    return SparseBM25([tokenize(t) for t in texts])


def _rank_of(hits: list[tuple[int, float]], doc: int) -> int | None:
    return next((r for r, (d, _) in enumerate(hits, 1) if d == doc), None)


def test_feedback_finds_the_chapter_that_uses_only_a_synonym() -> None:
    texts = [
        "car engine oil change: an automobile needs fresh oil",
        "car engine maintenance keeps the automobile running",
        "automobile servicing schedule and motor oil intervals",  # the answer: no "car"
        *FILLER,
    ]
    index, q = _index(texts), tokenize("car engine")
    before = index.top_n(q, 10)
    after = prf.top_n(index, q, 10, None, PRF)
    assert _rank_of(before, 2) is None  # plain BM25 cannot see it
    assert _rank_of(after, 2) == 3  # "automobile" and "oil" came from the feedback chapters


def test_feedback_works_on_jieba_tokens() -> None:
    texts = [
        "汽车 保养 需要 定期 更换 机油，轿车 也 一样",
        "汽车 发动机 保养 与 轿车 机油",
        "轿车 机油 更换 周期",  # the answer says 轿车, the query 汽车
        *[f"园艺 土壤 浇水 第{i}章" for i in range(12)],
    ]
    index, q = _index(texts), tokenize("汽车保养")
    assert _rank_of(index.top_n(q, 10), 2) is None
    assert _rank_of(prf.top_n(index, q, 10, None, PRF), 2) == 3


def test_expansion_terms_leave_out_the_query_and_sum_to_one() -> None:
    index = _index(["car automobile oil", "car automobile motor", *FILLER])
    q = tokenize("car")
    weights = prf.expansion_weights(index, q, index.top_n(q, 2), n_terms=2)
    assert index.term_index["car"] not in weights
    assert {index.terms[c] for c in weights} == {"automobile", "oil"}
    assert sum(weights.values()) == pytest.approx(1.0)


def test_feedback_off_is_plain_bm25_bit_for_bit() -> None:
    index = _index(["car engine oil", "automobile oil", "car car wash", *FILLER])
    q = tokenize("car oil")
    for off in (LexicalConfig(), LexicalConfig(prf_docs=0, prf_terms=30, prf_weight=0.9)):
        assert prf.top_n(index, q, 10, None, off) == index.top_n(q, 10)
    # A weighted query of plain counts scores exactly as the token list does.
    counts = {index.term_index["car"]: 1, index.term_index["oil"]: 1}
    assert index.top_n_weighted(counts, 10) == index.top_n(q, 10)


def test_feedback_respects_the_allowed_mask() -> None:
    texts = ["car automobile", "car automobile oil", "automobile oil", *FILLER]
    index, q = _index(texts), tokenize("car")
    mask = np.ones(len(texts), dtype=bool)
    mask[2] = False
    hits = prf.top_n(index, q, 10, mask, PRF)
    assert 2 not in [d for d, _ in hits]


PRF_KB = {
    "cars.md": "# Cars\n\n## Oil\n\nA car engine needs oil; an automobile engine too.\n\n"
    "## Motor\n\nThe car engine and the automobile motor.\n\n"
    "## Service\n\nAutomobile servicing: motor oil intervals.\n",
    **{f"garden{i}.md": f"# Garden {i}\n\nSoil and watering plants, bed {i}.\n" for i in range(8)},
}


# Unstemmed: with stems, "car" also matches the breadcrumb "Cars" of every chapter of the file,
# and the first pass alone would find the synonym chapter the feedback is tested to add.
PLAIN_CFG = HASH_CFG.with_overrides({"lexical.stem": False})


@pytest.fixture(scope="module")
def prf_engine(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    root = tmp_path_factory.mktemp("prf")
    kb_dir = write_kb(root / "kb", PRF_KB)
    build_index(parse_kb(kb_dir), PLAIN_CFG, str(root / "idx"))
    return Engine.open(kb_dir, root / "idx", PLAIN_CFG)


def _prf_cfg(base: EngineConfig) -> EngineConfig:
    return base.with_overrides(
        {"lexical.prf_docs": 2, "lexical.prf_terms": 5, "lexical.prf_weight": 0.5}
    )


def test_the_engine_keyword_channel_gains_the_synonym_chapter(prf_engine: Engine) -> None:
    plain = [n for n, _ in prf_engine.candidates("car engine", pool=5, mode="keyword").bm25]
    fed = prf_engine.with_config(_prf_cfg(PLAIN_CFG))
    got = [n for n, _ in fed.candidates("car engine", pool=5, mode="keyword").bm25]
    assert "cars#cars/service" not in plain
    assert "cars#cars/service" in got


def test_the_optimizer_path_equals_the_live_channel_with_feedback(prf_engine: Engine) -> None:
    cfg = _prf_cfg(PLAIN_CFG)
    fed = prf_engine.with_config(cfg)
    queries = ["car engine", "automobile oil", "watering plants"]
    live = [list(fed.candidates(q, pool=5, mode="keyword").bm25) for q in queries]
    snap = prf_engine._shared.current().snapshot
    tokens = [query_tokens(q, [], cfg.lexical.tokenizer_spec) for q in queries]
    assert keyword_hits(snap, cfg.lexical, tokens, 5) == live


def test_prf_keys_are_validated() -> None:
    with pytest.raises(ConfigError, match="prf_docs must be >= 0"):
        EngineConfig().with_overrides({"lexical.prf_docs": -1})
    with pytest.raises(ConfigError, match="prf_weight must be <= 1"):
        EngineConfig().with_overrides({"lexical.prf_weight": 1.5})
    assert not EngineConfig().lexical.prf_on  # off unless asked for


def test_prf_changes_no_index_identity() -> None:
    on = _prf_cfg(EngineConfig())
    assert on.index_key == EngineConfig().index_key  # scored on the same index
    assert on.retrieval_identity() != EngineConfig().retrieval_identity()


def test_a_config_saved_before_the_prf_keys_runs_without_feedback() -> None:
    saved = EngineConfig().to_dict()
    for key in ("prf_docs", "prf_terms", "prf_weight"):
        saved["lexical"].pop(key)
    assert not EngineConfig.from_dict(saved).lexical.prf_on
