"""The process's one cache of loaded models: each embedder or reranker model loads once.

Engines for different configs (``Engine.with_config``), the evaluator, the server and the
UI all reach models through here, so a model is never held twice. Keys name the kind of
model first (``("embedder", ...)``, ``("reranker", ...)``): one local folder may hold a
model usable as either.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
_MODELS: dict[tuple[str, ...], Any] = {}
_LOCK = threading.Lock()


def shared_model(key: tuple[str, ...], load: Callable[[], T]) -> T:
    """The model under ``key``, loaded by ``load`` on first use; concurrent first callers
    wait for one load."""
    with _LOCK:
        if key not in _MODELS:
            _MODELS[key] = load()
        return _MODELS[key]  # type: ignore[no-any-return]


def loaded_models() -> list[tuple[str, ...]]:
    """Keys of the models loaded so far (for stats and tests)."""
    with _LOCK:
        return list(_MODELS)
