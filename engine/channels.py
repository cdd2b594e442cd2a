"""The retrieval channels of one query: expansion -> BM25 (sparse) and vector (cosine).

``retrieve`` returns each channel's candidates cut to the pool, what ``engine.pipeline``
fuses and what the evaluator caches. The two channels run one after the other with a
local embedder (CPU-bound; measured faster) and side by side with a remote one
(network-bound).

Measured on this 2-core machine under heavy load from other jobs (load average ~8), the
bundled wiki (939 chapters), the default USE embedder with ``embedding.threads: 1``:
hybrid search p50 4.2 ms / p95 9 ms (embed 3.7, expand 1.2, BM25 0.4, vector 0.2,
fusion 0.1 ms). With ``embedding.threads: 2`` the same searches took p50 140-200 ms: the
query embedding's 2-thread BLAS stalls on a busy machine. Query-time dot products use
einsum, not BLAS, for the same reason (engine/snapshot.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from engine import prf
from engine.bm25_batch import BatchScorer
from engine.config import SEARCH_MODES, EngineConfig, LexicalConfig
from engine.errors import EngineError
from engine.expansion import expand_query
from engine.lexical import BM25Params
from engine.pipeline import Candidates
from engine.scripts import query_script_share
from engine.snapshot import IndexSnapshot
from engine.store import FILTER_KEYS
from engine.tokenizer import tokenize
from engine.types import Embedder

MODES = SEARCH_MODES
REMOTE_EMBEDDERS = ("openai",)  # network-bound: candidate channels overlap their waits
Filters = Mapping[str, str | Sequence[str]]
Hits = list[tuple[str, float]]


def normalize_filters(filters: Filters | None) -> dict[str, tuple[str, ...]]:
    """``{"category": "rag", "keywords": ["a", "b"]}`` -> key -> tuple of accepted values.

    A node passes when, for every key, its value is one of the values (exact, case-sensitive,
    as written in the frontmatter); for ``keywords``, when any of its keywords is listed.
    """
    out: dict[str, tuple[str, ...]] = {}
    for key, value in (filters or {}).items():
        if key not in FILTER_KEYS:
            raise EngineError(f"unknown filter {key!r}; filter on {', '.join(FILTER_KEYS)}")
        values = [value] if isinstance(value, str) else list(value)
        values = [str(v).strip() for v in values if str(v).strip()]
        if not values:
            raise EngineError(f"filter {key!r} has no value; use {key}=VALUE")
        out[key] = tuple(dict.fromkeys(values))
    return out


def check_query(query: str) -> str:
    """The query stripped, or EngineError when there is nothing to search for."""
    if not isinstance(query, str) or not query.strip():
        raise EngineError("query is empty; pass a question or keywords to search for")
    return query.strip()


def query_tokens(query: str, terms: Sequence[str], tokenizer: str) -> list[str]:
    """What the BM25 channel scores: the query's tokens, then each expansion term's."""
    tokens = tokenize(query, tokenizer)
    for term in terms:
        tokens.extend(tokenize(term, tokenizer))
    return tokens


def retrieve(
    snap: IndexSnapshot,
    cfg: EngineConfig,
    query: str,
    *,
    pool: int,
    filters: Filters | None,
    mode: str,
    embedder: Callable[[], Embedder],
    executor: Callable[[], ThreadPoolExecutor],
    vector_backend: str = "numpy",
) -> Candidates:
    """Expansion + the channels ``mode`` asks for, each cut to ``pool``.

    ``embedder`` and ``executor`` are called only when needed (a keyword search over an
    index without a vocabulary loads no model; a local embedder starts no thread).
    """
    if mode not in MODES:
        raise EngineError(f"search mode must be one of {', '.join(MODES)}; got {mode!r}")
    if pool < 1:
        raise EngineError("candidate pool must be >= 1")
    flt = normalize_filters(filters)
    mask = snap.mask(flt)
    timings: dict[str, float] = {"expand": 0.0, "embed": 0.0, "vector": 0.0, "bm25": 0.0}

    def lexical_channel() -> tuple[list[str], Hits]:
        t = time.perf_counter()
        terms = expand_query(
            query,
            cfg.expansion,
            embedder() if snap.vocab is not None else None,
            snap.vocab,
            mode=cfg.lexical.tokenizer_spec,
        )
        timings["expand"] = elapsed_ms(t)
        t = time.perf_counter()
        tokens = query_tokens(query, terms, cfg.lexical.tokenizer_spec)
        hits = prf.top_n(snap.bm25(cfg.lexical), tokens, pool, mask, cfg.lexical)
        timings["bm25"] = elapsed_ms(t)
        return terms, [(snap.ids[i], s) for i, s in hits]

    def vector_channel() -> Hits:
        t = time.perf_counter()
        qvec = embedder().embed_query(query)
        timings["embed"] = elapsed_ms(t)
        t = time.perf_counter()
        if vector_backend == "lance":
            out = snap.lance_vector_top(qvec, pool, flt)
        else:
            out = snap.vector_top(qvec, pool, mask, cfg.search.exact_vector_rows)
        timings["vector"] = elapsed_ms(t)
        return out

    terms: list[str] = []
    lexical: Hits = []
    vector: Hits = []
    if mode == "hybrid" and cfg.embedding.provider in REMOTE_EMBEDDERS:
        # A remote embedder makes both channels wait on the network (the expansion may
        # embed unknown query terms): overlap the two round trips.
        future = executor().submit(lexical_channel)
        vector = vector_channel()
        terms, lexical = future.result()
    elif mode == "hybrid":
        # Local models are CPU-bound: on 2 cores, running BM25 beside the embedding
        # measured slower (hybrid p50 4.6-4.9 ms) than one after the other (4.2-4.4 ms).
        terms, lexical = lexical_channel()
        vector = vector_channel()
    elif mode == "keyword":
        terms, lexical = lexical_channel()
    else:
        vector = vector_channel()
    return Candidates(
        query=query,
        vector=tuple(vector),
        bm25=tuple(lexical),
        expansion_terms=tuple(terms),
        pool=pool,
        timings=timings,
        # A filter keeps chapters whose mix may differ from the index's (an English folder).
        script_share=query_script_share(query, snap.script_shares_of(mask)),
    )


def keyword_hits(
    snap: IndexSnapshot, lex: LexicalConfig, token_lists: Sequence[Sequence[str]], pool: int
) -> list[Hits]:
    """The BM25 channel of many queries under ``lex``, no filters (see Engine.keyword_channel)."""
    if lex.prf_on:
        # Feedback is a second pass per query, on that query's own first-pass chapters.
        index = snap.bm25(lex)
        hits = [prf.top_n(index, t, pool, None, lex) for t in token_lists]
    elif lex.backend == "sparse" and lex.tokenizer_spec == snap.manifest.tokenizer:
        # One sparse product for all queries; equal to top_n bit for bit (BatchScorer).
        params = BM25Params(lex.k1, lex.b, lex.title_weight, lex.title_b)
        hits = BatchScorer(snap.lexical, token_lists).top_n(params, pool)
    else:
        index = snap.bm25(lex)
        hits = [index.top_n(t, pool, None) for t in token_lists]
    return [[(snap.ids[i], s) for i, s in h] for h in hits]


def elapsed_ms(t0: float) -> float:
    """Milliseconds since ``t0`` (a ``time.perf_counter()`` reading)."""
    return (time.perf_counter() - t0) * 1000.0


__all__ = [
    "MODES",
    "Filters",
    "check_query",
    "keyword_hits",
    "normalize_filters",
    "query_tokens",
    "retrieve",
]
