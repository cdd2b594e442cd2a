"""Shared result types and provider protocols of the engine (docs/design.md, "Data contracts")."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

# progress(done, total, stage) of a long step (index builds: embed, write, lexical, vocab).
ProgressFn = Callable[[int, int, str], None]


@dataclass(frozen=True)
class EmbedderSignature:
    """Identifies the vectors an index holds; a change forces a full rebuild."""

    provider: str
    model: str
    dims: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors of shape (n, dims)."""

    @property
    def signature(self) -> EmbedderSignature: ...

    def embed_documents(self, texts: list[str]) -> np.ndarray: ...

    def embed_query(self, text: str) -> np.ndarray: ...


@runtime_checkable
class Reranker(Protocol):
    """Scores (query, passage) pairs; higher is more relevant. ``name`` keys the score cache."""

    @property
    def name(self) -> str: ...

    def score(self, query: str, passages: list[str]) -> list[float]: ...


@dataclass
class SearchResult:
    node_id: str
    score: float
    # {"vector": rank | None, "bm25": rank | None, "rerank": rank | None}, 1-based
    rank_source: dict[str, int | None]
    title: str
    breadcrumb: list[str]
    content: str
    summary: str
    # file_path, line, anchor, level, keywords, doc_type, priority, category
    metadata: dict[str, Any]
    expanded: list[dict[str, Any]] = field(default_factory=list)
    injected_from: str | None = None  # parent node id when added by parent-child injection

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class SearchResponse:
    query: str
    results: list[SearchResult]
    total: int
    took_ms: float
    # per-stage milliseconds: expand, embed, vector, bm25, fusion, rerank, inject
    timings: dict[str, float]
    index_stats: dict[str, Any]
    config_hash: str
    expansion_terms: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # What the keyword channel's fusion weight was multiplied by for this query: the
    # config's fusion.cross_lingual_bm25 for a cross-lingual question, else 1.
    bm25_scale: float = 1.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "results": [r.to_dict() for r in self.results],
            "total": self.total,
            "took_ms": self.took_ms,
            "timings": self.timings,
            "index_stats": self.index_stats,
            "config_hash": self.config_hash,
            "expansion_terms": self.expansion_terms,
            "warnings": self.warnings,
            "bm25_scale": self.bm25_scale,
        }
