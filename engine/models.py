"""The process's one cache of loaded models: each embedder or reranker model loads once.

Engines for different configs (``Engine.with_config``), the evaluator, the server and the
UI all reach models through here, so a model is never held twice. Keys name the kind of
model first (``("embedder", ...)``, ``("reranker", ...)``): one local folder may hold a
model usable as either.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from engine.errors import ProviderError

T = TypeVar("T")
C = TypeVar("C")
_MODELS: dict[tuple[str, ...], Any] = {}
_LOCK = threading.Lock()


def shared_model(key: tuple[str, ...], load: Callable[[], T]) -> T:
    """The model under ``key``, loaded by ``load`` on first use; concurrent first callers
    wait for one load."""
    with _LOCK:
        if key not in _MODELS:
            _MODELS[key] = load()
        return _MODELS[key]  # type: ignore[no-any-return]


def choose_provider(
    setting: str,
    name: str,
    factories: Mapping[str, Callable[[C], T]],
    cfg: C,
    also: Sequence[str] = (),
) -> T:
    """The provider ``factories[name]`` builds from ``cfg``; for an unknown name, a
    ProviderError naming ``setting`` and the choices (``also``: those handled before)."""
    factory = factories.get(name)
    if factory is None:
        choices = " or ".join([*also, f"one of {', '.join(factories)}"])
        raise ProviderError(f"unknown {setting} {name!r}; choose {choices}")
    return factory(cfg)


def loaded_models() -> list[tuple[str, ...]]:
    """Keys of the models loaded so far (for stats and tests)."""
    with _LOCK:
        return list(_MODELS)


def local_model_folder(model: str, hint: str) -> str:
    """``model`` as a resolved local folder, or ProviderError ``hint`` (nothing downloads)."""
    path = Path(model).expanduser() if model else None
    if path is None or not path.is_dir():
        raise ProviderError(f"{hint} (got {model!r})")
    return str(path.resolve())


def load_sentence_transformers(kind: str, path: str, *, setting: str, what: str, files: str) -> Any:
    """``sentence_transformers.<kind>`` (SentenceTransformer or CrossEncoder) from a local
    folder, on CPU; a folder it cannot load is a ProviderError saying what to point
    ``setting`` at (``what`` names the model, ``files`` what the folder holds)."""
    provider = setting.split(".")[0]  # "embedding" or "rerank"
    try:
        import sentence_transformers
    except ImportError as exc:  # pragma: no cover - it is a core dependency
        raise ProviderError(
            f"{provider}.provider 'sentence-transformers' needs the sentence-transformers package"
        ) from exc
    try:
        return getattr(sentence_transformers, kind)(path, device="cpu", local_files_only=True)
    except Exception as exc:
        raise ProviderError(
            f"could not load a {what} from {path} "
            f"({type(exc).__name__}: {str(exc).rstrip('.')}); point {setting} at a "
            f"folder saved by {kind}.save() ({files})"
        ) from exc
