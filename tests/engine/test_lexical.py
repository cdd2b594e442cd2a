from __future__ import annotations

import math
import random
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rank_bm25 import BM25Okapi

from engine.bm25_batch import BatchScorer
from engine.lexical import BM25Params, RankBM25Reference, SparseBM25, make_bm25, title_tokens
from engine.sparse_counts import aligned_counts, count_matrix, replace_rows
from engine.tokenizer import TOKENIZER_MODES, parse_tokenizer_spec, tokenize, tokenizer_spec

CORPUS = [
    "检索增强生成把检索到的章节放进提示词。",
    "向量检索用余弦相似度召回候选章节。",
    "BM25 是关键词检索的经典算法，检索效果稳定。",
    "重排模型对候选章节做精排。",
    "切块策略决定检索的最小单位。",
    "黄金集用于评估检索系统的召回率。",
    "上下文打包需要控制 token 预算。",
    "查询扩展用知识库自己的词表。",
]
QUERIES = [
    "检索",
    "向量检索 召回",
    "检索 检索 章节",  # repeated token counts twice, as in rank_bm25
    "BM25 算法",
    "完全无关的词",
    "重排 精排 候选 章节",
]


def test_tokenize_lowercases_and_drops_punctuation_and_stop_words() -> None:
    assert tokenize("RAG 的切块策略，有哪些？") == ["rag", "切块", "策略"]
    assert tokenize("  ，。！  ") == []
    assert tokenize("") == []


def test_tokenize_search_mode_adds_sub_words() -> None:
    precise = tokenize("中华人民共和国", "jieba")
    search = tokenize("中华人民共和国", "jieba-search")
    assert precise == ["中华人民共和国"]
    assert {"中华", "人民", "共和国", "中华人民共和国"} <= set(search)


def test_tokenize_rejects_unknown_mode() -> None:
    with pytest.raises(ValueError, match="tokenizer must be one of"):
        tokenize("x", "whitespace")


def test_hand_computed_bm25_score() -> None:
    docs = [["a", "b"], ["a", "a", "c"], ["d"]]
    bm = SparseBM25(docs, k1=1.5, b=0.75)
    # N=3, avgdl=2. idf(c) = ln(3-1+.5) - ln(1+.5) = ln(2.5/1.5).
    # idf(a) = ln(3-2+.5) - ln(2.5) < 0 -> floor eps * mean(idf of a, b, c, d).
    idf_c = math.log(2.5) - math.log(1.5)
    idf_a_raw = math.log(1.5) - math.log(2.5)
    mean_idf = (idf_a_raw + 3 * idf_c) / 4
    idf_a = 0.25 * mean_idf
    # doc 1: |d|=3, tf(c)=1, tf(a)=2
    norm = 1.5 * (1 - 0.75 + 0.75 * 3 / 2)
    expected = idf_c * (1 * 2.5) / (1 + norm) + idf_a * (2 * 2.5) / (2 + norm)
    assert bm.get_scores(["c", "a"])[1] == pytest.approx(expected, abs=1e-12)
    assert bm.get_scores(["zzz"]).tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize(("k1", "b"), [(1.5, 0.75), (1.2, 0.3), (2.0, 1.0), (0.9, 0.0)])
def test_scores_identical_to_rank_bm25(k1: float, b: float) -> None:
    docs = [tokenize(t) for t in CORPUS]
    ref = BM25Okapi(docs, k1=k1, b=b)
    ours = SparseBM25(docs, k1=k1, b=b)
    for q in QUERIES:
        qt = tokenize(q)
        np.testing.assert_allclose(ours.get_scores(qt), ref.get_scores(qt), rtol=0, atol=1e-9)


def _synthetic_corpus(n: int, seed: int = 7) -> list[list[str]]:
    rng = random.Random(seed)
    words = [f"词{i}" for i in range(400)] + ["检索", "向量", "重排", "切块", "召回", "评估"]
    weights = [1.0 / (i + 1) for i in range(len(words))]  # Zipf-like, so idf varies
    return [rng.choices(words, weights, k=rng.randint(5, 60)) for _ in range(n)]


def test_top10_agreement_with_rank_bm25_on_a_few_hundred_docs() -> None:
    docs = _synthetic_corpus(400)
    ref = RankBM25Reference(docs)
    ours = SparseBM25(docs)
    rng = random.Random(1)
    vocab = sorted({t for d in docs for t in d})
    agree = []
    for _ in range(50):
        q = rng.sample(vocab, 3)
        a = [i for i, _ in ours.top_n(q, 10)]
        b = [i for i, _ in ref.top_n(q, 10)]
        agree.append(len(set(a) & set(b)) / max(1, len(b)))
        assert a == b  # same scores and the same tie-break => identical lists
    assert sum(agree) / len(agree) == 1.0


def test_top_n_excludes_zero_scores_and_breaks_ties_by_index() -> None:
    docs = [["x"], ["y"], ["x"], ["z"], ["x"], ["q"], ["r"]]  # idf(x) = ln(4.5/3.5) > 0
    bm = SparseBM25(docs)
    top = bm.top_n(["x"], 10)
    assert [i for i, _ in top] == [0, 2, 4]  # equal scores: index ascending
    assert all(s > 0 for _, s in top)
    assert [i for i, _ in bm.top_n(["x"], 2)] == [0, 2]
    assert bm.top_n(["nothing"], 5) == []
    assert bm.top_n(["x"], 0) == []


def test_top_n_allowed_mask() -> None:
    docs = [["x"], ["x", "x"], ["x", "y"], ["y"], ["z"], ["w"], ["v"]]
    bm = SparseBM25(docs)
    mask = np.array([True, False, True, True])
    assert 1 not in [i for i, _ in bm.top_n(["x"], 10, mask)]
    assert [i for i, _ in bm.top_n(["x"], 10, mask)] == [
        i for i, _ in bm.top_n(["x"], 10) if mask[i]
    ]


def test_serialisation_round_trip_and_with_params() -> None:
    docs = [tokenize(t) for t in CORPUS]
    bm = SparseBM25(docs)
    back = SparseBM25.from_bytes(bm.to_bytes(), k1=1.5, b=0.75)
    q = tokenize("向量检索 召回")
    np.testing.assert_array_equal(back.get_scores(q), bm.get_scores(q))
    other = bm.with_params(1.2, 0.5)
    np.testing.assert_allclose(
        other.get_scores(q), SparseBM25(docs, k1=1.2, b=0.5).get_scores(q), atol=1e-12
    )


def test_empty_corpus_and_empty_documents() -> None:
    assert SparseBM25([]).top_n(["x"], 5) == []
    bm = SparseBM25([[], [], []])
    assert bm.top_n(["x"], 5) == []
    assert RankBM25Reference([[], []]).top_n(["x"], 5) == []
    mixed = SparseBM25([[], ["x"], ["y"]])
    assert [i for i, _ in mixed.top_n(["x"], 5)] == [1]


def test_make_bm25_backends_agree() -> None:
    docs = [tokenize(t) for t in CORPUS]
    a = make_bm25(docs, 1.5, 0.75, "sparse")
    b = make_bm25(docs, 1.5, 0.75, "rank_bm25")
    for q in QUERIES:
        qt = tokenize(q)
        assert [i for i, _ in a.top_n(qt, 5)] == [i for i, _ in b.top_n(qt, 5)]
    with pytest.raises(ValueError, match=r"lexical\.backend"):
        make_bm25(docs, 1.5, 0.75, "elastic")


@pytest.mark.slow
def test_sparse_bm25_top_n_is_exact_at_100k_documents() -> None:
    # Speed at this size is a benchmark's job (wikirag bench), not a timed test: under load a
    # time limit fails for no reason. What must hold at scale is exactness.
    docs = _synthetic_corpus(100_000, seed=3)
    bm = SparseBM25(docs)
    for q in (["检索", "向量"], ["词5", "词17", "召回"], ["重排"]):
        scores = bm.get_scores(q)
        top = bm.top_n(q, 10)
        assert len(top) == 10
        got = [s for _, s in top]
        assert got == sorted(got, reverse=True)
        assert got == pytest.approx(sorted(scores, reverse=True)[:10])


_tok = st.sampled_from(["检索", "向量", "重排", "切块", "a", "b", "c"])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(_tok, max_size=8), min_size=1, max_size=12),
    st.lists(_tok, min_size=1, max_size=4),
    st.floats(0.01, 3.0),  # k1 = 0: rank_bm25 computes 0/0 = nan for absent terms; we give 0
    st.floats(0.0, 1.0),
)
def test_property_equals_bm25okapi(docs: list, query: list, k1: float, b: float) -> None:
    if not any(docs):  # BM25Okapi divides by the mean document length
        return
    ref = BM25Okapi(docs, k1=k1, b=b).get_scores(query)
    # rank_bm25 computes 0/0 = nan for an empty document when b = 1 (its length-normalised
    # denominator is 0); such a document matches nothing, so we score it 0.
    ref = np.nan_to_num(ref, nan=0.0)
    np.testing.assert_allclose(SparseBM25(docs, k1=k1, b=b).get_scores(query), ref, atol=1e-9)


def test_title_tokens_segment_each_breadcrumb_title() -> None:
    assert title_tokens([["检索手册", "查询扩展"], [], ["检索手册"]]) == [
        ["检索", "手册", "查询", "扩展"],
        [],
        ["检索", "手册"],
    ]


def test_aligned_counts_drop_terms_outside_the_body_vocabulary() -> None:
    counts = aligned_counts([["a", "zz", "a"], ["b"]], ["a", "b"])
    assert counts.toarray().tolist() == [[2.0, 0.0], [0.0, 1.0]]


def test_title_weight_zero_is_plain_bm25_bit_for_bit() -> None:
    docs = [tokenize(t) for t in CORPUS]
    titles = [tokenize(t[:4]) for t in CORPUS]
    plain = SparseBM25(docs, k1=1.2, b=0.6)
    fielded = SparseBM25(docs, k1=1.2, b=0.6, title_tokens=titles, title_weight=0.0)
    ref = BM25Okapi(docs, k1=1.2, b=0.6)
    for q in QUERIES:
        toks = tokenize(q)
        assert np.array_equal(fielded.get_scores(toks), plain.get_scores(toks))
        np.testing.assert_allclose(fielded.get_scores(toks), ref.get_scores(toks), atol=1e-9)


def test_hand_computed_bm25f_score() -> None:
    # Title field: doc 0 says "a" once (its body too), doc 1 has an empty title.
    docs = [["a", "b"], ["c", "d", "e", "f"], ["g", "h"]]
    bm = SparseBM25(
        docs, k1=1.5, b=0.5, title_tokens=[["a"], [], ["g"]], title_weight=2.0, title_b=1.0
    )
    idf = math.log(2.5 / 1.5)  # N=3, df(a)=1
    # body: len 2, avgdl 8/3 -> B = 0.5 + 0.5 * 2 / (8/3) = 0.875; tf/B = 1/0.875.
    # title: len 1, avg 2/3 -> B_t = 1 / (2/3) = 1.5; weighted 2 * 1 / 1.5.
    tf = 1 / 0.875 + 2 * 1 / 1.5
    expected = idf * tf * 2.5 / (tf + 1.5)
    assert bm.get_scores(["a"])[0] == pytest.approx(expected, rel=1e-12)
    assert bm.get_scores(["a"])[1] == 0.0


def test_title_weight_lifts_a_chapter_whose_title_matches() -> None:
    # Chapter 0 mentions 监控 twice in passing; chapter 1 is *about* it (title) once.
    docs = [["部署", "监控", "监控", "集群"], ["监控", "告警"], ["备份"], ["恢复"], ["升级"]]
    titles = [["部署"], ["监控"], ["备份"], ["恢复"], ["升级"]]
    plain = SparseBM25(docs, title_tokens=titles)
    assert [d for d, _ in plain.top_n(["监控"], 2)] == [0, 1]
    weighted = plain.with_params(1.5, 0.75, title_weight=3.0)
    assert [d for d, _ in weighted.top_n(["监控"], 2)] == [1, 0]


def test_title_counts_survive_serialisation_and_with_params() -> None:
    docs = [tokenize(t) for t in CORPUS]
    titles = [tokenize(t[:4]) for t in CORPUS]
    bm = SparseBM25(docs, title_tokens=titles)
    back = SparseBM25.from_bytes(bm.to_bytes(), k1=1.5, b=0.75)
    assert back.has_title
    a = bm.with_params(1.1, 0.4, title_weight=2.5, title_b=0.3)
    b = back.with_params(1.1, 0.4, title_weight=2.5, title_b=0.3)
    for q in QUERIES:
        assert np.array_equal(a.get_scores(tokenize(q)), b.get_scores(tokenize(q)))
    plain = SparseBM25(docs)
    assert not SparseBM25.from_bytes(plain.to_bytes(), k1=1.5, b=0.75).has_title


def test_title_field_rejects_bad_shapes_and_params() -> None:
    bm = SparseBM25([["a"], ["b"]])
    with pytest.raises(ValueError, match="shape"):
        bm.with_title(aligned_counts([["a"]], ["a", "b"]))
    with pytest.raises(ValueError, match="title_weight"):
        SparseBM25([["a"]], title_tokens=[["a"]], title_weight=-1.0)


@pytest.mark.parametrize(
    "params",
    [
        BM25Params(),
        BM25Params(k1=0.9, b=0.3),
        BM25Params(k1=1.2, b=0.75, title_weight=2.0, title_b=0.5),
        BM25Params(k1=2.0, b=1.0, title_weight=0.5, title_b=0.0),
    ],
)
def test_batch_scorer_equals_the_per_query_scorer(params: BM25Params) -> None:
    rng = random.Random(7)
    vocab = [f"w{i}" for i in range(60)]
    docs = [rng.choices(vocab, k=rng.randint(0, 30)) for _ in range(300)]
    titles = [rng.choices(vocab, k=rng.randint(0, 4)) for _ in range(300)]
    queries = [rng.choices([*vocab, "unknown"], k=rng.randint(0, 5)) for _ in range(80)]
    bm = SparseBM25(docs, title_tokens=titles)
    single = bm.with_params(params.k1, params.b, params.title_weight, params.title_b)
    mask = np.array([rng.random() < 0.8 for _ in range(300)])
    batch = BatchScorer(bm, queries)
    for allowed in (None, mask):
        got = batch.top_n(params, 10, allowed)
        assert got == [single.top_n(q, 10, allowed) for q in queries]


def _tokenize_before_stemming(text: str, mode: str) -> list[str]:
    """``tokenize`` as it was before the ``+stem`` spec (copied), the unstemmed reference."""
    import jieba

    from engine.tokenizer import _PUNCT_ONLY, STOP_WORDS

    lowered = text.lower()
    raw = jieba.cut_for_search(lowered) if mode == "jieba-search" else jieba.cut(lowered)
    out = []
    for tok in raw:
        tok = tok.strip()
        if not tok or tok in STOP_WORDS or _PUNCT_ONLY.match(tok):
            continue
        out.append(tok)
    return out


def test_stemming_maps_inflections_to_one_token() -> None:
    spec = tokenizer_spec("jieba-search", stem=True)
    assert spec == "jieba-search+stem"
    assert tokenize("databases", spec) == tokenize("database", spec) == ["databas"]
    assert tokenize("running", spec) == tokenize("run", spec) == tokenize("runs", spec) == ["run"]
    assert tokenize("Deploying the deployments", spec) == ["deploy", "deploy"]
    # Unstemmed, the inflections stay apart (the reason for stemming).
    assert tokenize("databases") != tokenize("database")


def test_stemming_leaves_chinese_digits_and_mixed_tokens_alone() -> None:
    text = "数据库的备份策略 sha256 k8s 2024 中华人民共和国"
    assert tokenize(text, "jieba-search+stem") == tokenize(text, "jieba-search")
    mixed = tokenize("重排 databases 配置", "jieba+stem")
    assert mixed == ["重排", "databas", "配置"]


def test_stem_off_reproduces_the_unstemmed_tokens_exactly() -> None:
    from pathlib import Path

    files = sorted((Path(__file__).parents[2] / "wiki").rglob("*.md"))[:40]
    assert files, "the bundled wiki is part of the repository"
    for path in files:
        text = path.read_text(encoding="utf-8")
        for mode in TOKENIZER_MODES:
            assert tokenize(text, mode) == _tokenize_before_stemming(text, mode), path


def test_tokenizer_spec_parses_back_and_matches_the_config_property() -> None:
    from engine.config import EngineConfig

    for mode in TOKENIZER_MODES:
        for stem in (False, True):
            spec = tokenizer_spec(mode, stem)
            assert parse_tokenizer_spec(spec) == (mode, stem)
            cfg = EngineConfig().with_overrides({"lexical.tokenizer": mode, "lexical.stem": stem})
            assert cfg.lexical.tokenizer_spec == spec
    with pytest.raises(ValueError, match="optionally \\+stem"):
        parse_tokenizer_spec("whitespace+stem")


def _bm25_of(ids: list[str], docs: dict[str, list[str]]) -> SparseBM25:
    counts, terms = count_matrix(docs[i] for i in ids)
    return SparseBM25(counts=counts, terms=terms)


def test_replace_rows_gives_the_scores_of_a_recount() -> None:
    rng = random.Random(5)
    words = [f"w{i}" for i in range(40)] + ["检索", "召回", "重排"]
    docs = {f"d{i:03d}": rng.choices(words, k=rng.randint(0, 12)) for i in range(60)}
    ids = sorted(docs)
    before = _bm25_of(ids, docs)
    drop = ["d003", "d010", "d059"]  # d010 comes back with new text; the others go
    fresh = {"d010": ["全新", "检索"], "d100": ["w1", "w1", "独有"], "a000": []}
    new_ids = list(fresh)
    new_counts, new_terms = count_matrix(fresh[i] for i in new_ids)
    got_ids, counts, terms = replace_rows(
        ids, before.counts, before.terms, drop, new_ids, new_counts, new_terms
    )
    after_docs = {k: v for k, v in docs.items() if k not in drop} | fresh
    want_ids = sorted(after_docs)
    assert got_ids == want_ids
    want = _bm25_of(want_ids, after_docs)
    got = SparseBM25(counts=counts, terms=terms)
    assert sorted(got.terms) == sorted(want.terms)  # words only d003/d059 used are gone
    for q in (["检索"], ["w1", "独有"], ["全新", "w7", "w7"], ["召回", "重排"]):
        np.testing.assert_allclose(got.get_scores(q), want.get_scores(q), rtol=1e-12)


def test_replace_rows_rejects_an_id_that_is_still_there() -> None:
    counts, terms = count_matrix([["a"], ["b"]])
    new, new_terms = count_matrix([["c"]])
    with pytest.raises(ValueError, match="already in the matrix"):
        replace_rows(["x", "y"], counts, terms, [], ["y"], new, new_terms)


def test_replace_rows_equals_a_recount_for_random_edits() -> None:
    # Drops, re-added ids, new ids before/between/after the kept ones, several new rows at
    # one insertion point, empty rows and an emptied matrix: every row and term as counted.
    rng = random.Random(1)
    for _ in range(200):
        words = [f"w{i}" for i in range(rng.randint(1, 30))]
        docs = {
            f"d{i:03d}": rng.choices(words, k=rng.randint(0, 8))
            for i in rng.sample(range(200), rng.randint(0, 40))
        }
        ids = sorted(docs)
        counts, terms = count_matrix(docs[i] for i in ids)
        drop = rng.sample(ids, rng.randint(0, len(ids)))
        new_ids = [d for d in drop if rng.random() < 0.5]
        new_ids += [f"d{i:03d}" for i in rng.sample(range(200, 260), rng.randint(0, 5))]
        new_ids += ["a0"] if rng.random() < 0.3 else []
        rng.shuffle(new_ids)
        fresh = {i: rng.choices([*words, "新"], k=rng.randint(0, 6)) for i in new_ids}
        new_counts, new_terms = count_matrix(fresh[i] for i in new_ids)
        got_ids, got, got_terms = replace_rows(
            ids, counts, terms, drop, new_ids, new_counts, new_terms
        )
        after = {k: v for k, v in docs.items() if k not in drop} | fresh
        assert got_ids == sorted(after)
        assert got.has_sorted_indices
        rows = [
            {got_terms[c]: v for c, v in zip(r.indices, r.data, strict=True)}
            for r in (got.getrow(i) for i in range(got.shape[0]))
        ]
        assert rows == [dict(Counter(after[i])) for i in got_ids]
        assert set(got_terms) == {w for v in after.values() for w in v}


def test_counts_read_from_an_offset_equal_the_plain_payload() -> None:
    # The lexical cache file is a JSON id line followed by the .npz: read in place, no copy.
    bm = SparseBM25([tokenize(t) for t in CORPUS], title_tokens=[tokenize(t[:4]) for t in CORPUS])
    prefix = b'["a","b"]\n'
    back = SparseBM25.from_bytes(prefix + bm.to_bytes(), k1=1.5, b=0.75, start=len(prefix))
    assert back.terms == bm.terms and back.has_title
    assert (back.counts != bm.counts).nnz == 0
    for q in QUERIES:
        assert np.array_equal(back.get_scores(tokenize(q)), bm.get_scores(tokenize(q)))


def test_counts_written_to_a_file_equal_the_in_memory_payload(tmp_path: Path) -> None:
    # The index writes its BM25 counts streamed into the file (not built as bytes first).
    from engine.sparse_counts import counts_payload, read_counts_payload, write_counts_payload

    bm = SparseBM25([tokenize(t) for t in CORPUS], title_tokens=[tokenize(t[:4]) for t in CORPUS])
    with open(tmp_path / "c.npz", "wb") as fh:
        write_counts_payload(fh, bm.counts, bm.terms, bm.title_counts)
    streamed = read_counts_payload((tmp_path / "c.npz").read_bytes())
    in_memory = read_counts_payload(counts_payload(bm.counts, bm.terms, bm.title_counts))
    assert streamed[1] == in_memory[1] == bm.terms
    assert (streamed[0] != in_memory[0]).nnz == 0 and (streamed[2] != bm.title_counts).nnz == 0
