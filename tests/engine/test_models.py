"""engine.models: each model loads once per process, whoever asks for it and however often."""

from __future__ import annotations

import threading
import time

from engine.config import EmbeddingConfig
from engine.embedding import make_embedder
from engine.models import loaded_models, shared_model


def test_a_model_loads_once_under_concurrent_first_callers() -> None:
    calls = []

    def load() -> object:
        calls.append(1)
        time.sleep(0.05)  # long enough for the other threads to arrive while it loads
        return object()

    key = ("test", "concurrent-load")
    got: list[object] = []
    threads = [
        threading.Thread(target=lambda: got.append(shared_model(key, load))) for _ in range(8)
    ]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(calls) == 1
    assert len({id(m) for m in got}) == 1
    assert key in loaded_models()


def test_embedders_and_rerankers_of_one_folder_are_told_apart() -> None:
    shared_model(("embedder", "sentence-transformers", "/models/x"), lambda: "embedder")
    got = shared_model(("reranker", "sentence-transformers", "/models/x"), lambda: "reranker")
    assert got == "reranker"


def test_embedders_of_one_model_share_the_loaded_model() -> None:
    # Two embedder objects (e.g. two configs' engines) per USE runtime: one model each.
    for provider in ("use", "use-onnx"):
        a = make_embedder(EmbeddingConfig(provider=provider))
        b = make_embedder(EmbeddingConfig(provider=provider))
        a.embed_query("one")
        b.embed_query("two")
        assert sum(1 for k in loaded_models() if k[:2] == ("embedder", provider)) == 1
