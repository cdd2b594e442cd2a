from __future__ import annotations

import numpy as np
import pytest

from engine.config import ExpansionConfig
from engine.expansion import (
    Vocabulary,
    embed_vocabulary,
    expand,
    expand_query,
    fallback_expand,
    query_terms,
    vocabulary_terms,
)
from engine.types import EmbedderSignature


def _unit(*xs: float) -> np.ndarray:
    v = np.array(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


# Hand-placed 3-d vectors: cos(检索, 召回) = 0.9, cos(检索, 搜索) = 0.8, cos(向量, 嵌入) = 0.95.
VECS = {
    "检索": _unit(1, 0, 0),
    "召回": np.array([0.9, np.sqrt(1 - 0.81), 0], dtype=np.float32),
    "搜索": np.array([0.8, 0, 0.6], dtype=np.float32),
    "向量": _unit(0, 0, 1),
    "嵌入": np.array([0, np.sqrt(1 - 0.95**2), 0.95], dtype=np.float32),
    "延迟": _unit(0, 1, 0),
}


class TableEmbedder:
    """Looks vectors up in VECS (unknown terms -> zero); counts embed_documents calls."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    @property
    def signature(self) -> EmbedderSignature:
        return EmbedderSignature("table", "test", 3)

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return np.stack([VECS.get(t, np.zeros(3, np.float32)) for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        return VECS.get(text, np.zeros(3, np.float32))


def _vocab(terms: list[str]) -> Vocabulary:
    return Vocabulary(tuple(terms), np.stack([VECS[t] for t in terms]), "table/test/3")


def test_expand_best_first_threshold_and_one_batched_call() -> None:
    emb = TableEmbedder()
    vocab = _vocab(["召回", "搜索", "嵌入", "延迟", "检索"])
    got = expand("向量检索", emb, vocab, threshold=0.75, max_terms=6)
    # 嵌入 0.95 (via 向量) > 召回 0.9 > 搜索 0.8; 延迟 is below; 检索 is in the query.
    assert got == ["嵌入", "召回", "搜索"]
    assert len(emb.calls) == 1
    # One call, for the query terms the vocabulary lacks (检索 reuses its stored vector).
    assert {"向量", "检索"} <= set(query_terms("向量检索"))
    assert emb.calls == [[t for t in query_terms("向量检索") if t != "检索"]]
    assert expand("检索", emb, vocab, threshold=0.75, max_terms=6) == ["召回", "搜索"]
    assert len(emb.calls) == 1  # every term known: no embed call at all


def test_expand_threshold_and_max_terms() -> None:
    emb = TableEmbedder()
    vocab = _vocab(["召回", "搜索", "嵌入"])
    assert expand("向量检索", emb, vocab, threshold=0.85, max_terms=6) == ["嵌入", "召回"]
    assert expand("向量检索", emb, vocab, threshold=0.75, max_terms=1) == ["嵌入"]
    assert expand("向量检索", emb, vocab, threshold=0.75, max_terms=0) == []


def test_expand_skips_terms_that_contain_a_query_term() -> None:
    # "检索系统" is as close to "检索" as it gets, but jieba already indexes "检索" inside it.
    vocab = Vocabulary(("检索系统", "召回"), np.stack([VECS["检索"], VECS["召回"]]), "t")
    assert expand("检索", TableEmbedder(), vocab, 0.75, 6) == ["召回"]


def test_expand_accepts_a_plain_function_and_handles_no_vocab() -> None:
    vocab = _vocab(["召回"])
    fn = TableEmbedder().embed_documents
    assert expand("检索", fn, vocab, 0.75, 6) == ["召回"]
    assert expand("检索", fn, None, 0.75, 6) == []
    assert expand("？", fn, vocab, 0.75, 6) == []


def test_vocabulary_terms_rules() -> None:
    docs = [["检索", "向量", "a", "2025"], ["检索", "重排"], ["检索", "向量"], ["孤词"]]
    terms = vocabulary_terms(docs, always=["标题词", "x"])
    # 标题词 (always) first; then by document frequency: 检索 (3) > 向量 (2); 重排/孤词 once.
    assert terms == ["标题词", "检索", "向量"]
    assert vocabulary_terms(docs, cap=1) == ["检索"]


def test_embed_vocabulary_reuses_vectors_of_the_same_embedder() -> None:
    emb = TableEmbedder()
    first = embed_vocabulary(["检索", "召回"], emb)
    assert emb.calls == [["检索", "召回"]]
    second = embed_vocabulary(["检索", "召回", "搜索"], emb, reuse=first)
    assert emb.calls[-1] == ["搜索"]
    np.testing.assert_array_equal(second.vectors[0], VECS["检索"])
    assert second.terms == ("检索", "召回", "搜索")


def test_vocabulary_file_round_trip() -> None:
    v = _vocab(["检索", "召回"])
    back = Vocabulary.from_files(v.terms_json(), v.vectors_npy())
    assert back.terms == v.terms and back.signature == v.signature
    np.testing.assert_array_equal(back.vectors, v.vectors)
    with pytest.raises(ValueError):
        Vocabulary(("a",), np.zeros((2, 3), np.float32))


def test_fallback_dictionary() -> None:
    got = fallback_expand("重排模型怎么选", 10)
    assert got == ["rerank", "精排", "重排序", "reranker"]
    assert fallback_expand("Chunking 的粒度", 10)[:3] == ["切块", "分块", "切分"]
    assert fallback_expand("重排模型怎么选", 2) == ["rerank", "精排"]
    assert fallback_expand("公司年会", 5) == []


def test_expand_query_chooses_vocabulary_then_dictionary() -> None:
    emb = TableEmbedder()
    cfg = ExpansionConfig(enabled=True)  # off by default
    vocab = _vocab(["召回", "搜索"])
    assert expand_query("检索", cfg, emb, vocab) == ["召回", "搜索"]
    assert expand_query("检索", cfg, emb, None)[:2] == ["搜索", "召回"]  # dictionary
    no_dict = ExpansionConfig(enabled=True, use_fallback_dictionary=False)
    assert expand_query("检索", no_dict, emb, None) == []
    assert expand_query("检索", ExpansionConfig(enabled=False), emb, vocab) == []


def test_vocabulary_from_counts_equals_vocabulary_from_df() -> None:
    # Ties at the cap, numbers and 1-char terms (never kept), title terms rare or frequent.
    import random

    import numpy as np

    from engine.expansion import vocabulary_from_counts, vocabulary_from_df

    rng = random.Random(3)
    for _ in range(300):
        terms = [
            rng.choice(["检索", "召回", "a", "42", "x1", "重排", "bm25"]) + str(i)
            for i in range(50)
        ]
        terms += ["1", "3.5", "z"]
        df = np.array([rng.choice([0, 1, 2, 2, 3, 5, 5, 9]) for _ in terms])
        always = rng.sample(terms, rng.randint(0, 6)) + ["标题词"] * rng.randint(0, 1)
        cap = rng.randint(1, 60)
        want = vocabulary_from_df(dict(zip(terms, df.tolist(), strict=True)), always, cap=cap)
        assert vocabulary_from_counts(terms, df, always, cap=cap) == want
