"""The search engine: ``Engine.open(kb_dir, index_uri, config).search(query)``.

Per query: expansion (BM25 side only) -> vector channel and BM25 channel
(engine/channels.py, over the in-memory index of engine/snapshot.py) ->
``engine.pipeline.compose`` (fusion, rerank merge, parent-child injection, cut) -> results
with result expansion (engine/response.py). ``candidates`` and ``rerank_scores`` expose
the model-dependent stages so the evaluator can cache them and call the same ``compose``.
Engines derived with ``with_config`` share one loaded index and one set of models
(engine/shared.py), so they are thread-safe for concurrent queries and rebuilds.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict, Unpack

import numpy as np

from engine.channels import (
    Filters,
    check_query,
    elapsed_ms,
    keyword_hits,
    retrieve,
)
from engine.chapters import KnowledgeBase, Node
from engine.config import EXPAND_MODES, EngineConfig
from engine.embedding import make_embedder
from engine.errors import ConfigError, EngineError, ProviderError
from engine.heap import release_free_heap
from engine.index_plan import freshness
from engine.indexer import IndexReport, build_index, drop_stale_tables
from engine.manifest import read_manifest
from engine.parse_cache import ParseCache
from engine.pipeline import Candidates, bm25_scale, compose, pool_size
from engine.rerank import make_reranker, reranker_input
from engine.response import index_stats, lookup_node, to_result
from engine.scripts import query_script_share
from engine.shared import SharedIndex, State, rerank_key
from engine.tokenizer import parse_tokenizer_spec, warm_up
from engine.tree import parse_kb
from engine.types import Embedder, ProgressFn, Reranker, SearchResponse


class EngineParts(TypedDict, total=False):
    """What ``Engine.open`` / ``Engine.from_kb`` may be handed instead of building it from
    the config (tests, benchmarks, a shared model); a part left out is built as configured."""

    embedder: Embedder | None  # None: built from config.embedding
    reranker: Reranker | None  # None: no reranking, whatever rerank.provider says
    vector_backend: str  # one of shared.VECTOR_BACKENDS (default "numpy")


class Engine:
    """Hybrid chapter search over one KB and its index. Thread-safe for concurrent queries."""

    def __init__(self, shared: SharedIndex, config: EngineConfig) -> None:
        self._shared = shared
        self.config = config

    @classmethod
    def open(
        cls,
        kb_dir: str | Path,
        index_uri: str | Path,
        config: EngineConfig | None = None,
        storage_options: Mapping[str, str] | None = None,
        **parts: Unpack[EngineParts],
    ) -> Engine:
        """Parse the KB folder and open its index (IndexMissingError if there is none)."""

        cache = ParseCache()
        kb = parse_kb(kb_dir, cache=cache)
        engine = cls.from_kb(kb, index_uri, config, storage_options, kb_dir=str(kb_dir), **parts)
        engine._shared.parse_cache = cache
        return engine

    @classmethod
    def from_kb(
        cls,
        kb: KnowledgeBase,
        index_uri: str | Path,
        config: EngineConfig | None = None,
        storage_options: Mapping[str, str] | None = None,
        *,
        kb_dir: str | None = None,
        **parts: Unpack[EngineParts],
    ) -> Engine:
        """Open the index for an already parsed KB (``parts`` override the config's)."""
        cfg = config or EngineConfig()
        warm_up()
        backend = parts.get("vector_backend", "numpy")
        shared = SharedIndex(str(index_uri), storage_options, kb_dir, backend)
        if (embedder := parts.get("embedder")) is not None:
            shared.embedders[cfg.embedding] = embedder
        if "reranker" in parts:
            shared.rerankers[rerank_key(cfg.rerank)] = parts["reranker"]
        with shared.swap_lock:
            shared.load(kb, cfg)
        engine = cls(shared, cfg)
        engine._check_signature()
        engine._check_stemming()
        return engine

    def with_config(self, config: EngineConfig) -> Engine:
        """An engine for another config sharing this one's index, snapshot and models."""
        if config == self.config:
            return self
        engine = Engine(self._shared, config)
        if config.embedding != self.config.embedding:
            engine._check_signature()
        if config.lexical.stem != self.config.lexical.stem:
            engine._check_stemming()
        return engine

    @property
    def kb(self) -> KnowledgeBase:
        return self._shared.current().kb

    @property
    def index_fingerprint(self) -> str:
        """Identifies the index contents (table version); keys evaluation caches."""
        return self._shared.current().snapshot.manifest.build_id

    @property
    def codes_agreement(self) -> float | None:
        """The sign-bit codes' self-check once a search used them (engine/sign_codes.py;
        below ``FAITHFUL_AGREEMENT`` the exact scan serves); None before or without them."""
        return self._shared.current().snapshot.codes_agreement

    def query_script_share(self, query: str) -> float:
        """Share of this index's chapters written in a script ``query`` uses (below one half
        the query is cross-lingual; engine/scripts.py)."""
        return query_script_share(query, self._shared.current().snapshot.script_shares)

    @property
    def reranker_name(self) -> str | None:
        r = self._reranker()
        return r.name if r is not None else None

    def warm_up(self) -> None:
        """Load models, jieba's dictionary and the vocabulary now, not in the first search
        (and, past ``search.exact_vector_rows``, the sign-bit codes and their self-check:
        ~0.5 s at 64k vectors)."""
        self._embedder().embed_query("warm up")
        with contextlib.suppress(EngineError):  # e.g. a filter-free search on an empty KB
            self.candidates("warm up 预热", pool=1, mode="keyword")
        self._shared.current().snapshot.warm_codes(self.config.search.exact_vector_rows)
        reranker = self._reranker()
        if reranker is not None:
            with contextlib.suppress(ProviderError):  # search() reports them per query
                reranker.score("warm up", ["warm up"])
        # The first keyword search built the BM25 weights through term-major temporaries.
        release_free_heap()

    def vocabulary_similarity(self, terms: Sequence[str]) -> list[float] | None:
        """Per term, the best cosine to a term of the KB's vocabulary (1.0 for a term in it),
        under the index's embedder; None when the index has no vocabulary. A question's terms
        that nothing in the KB resembles are a sign the KB cannot answer it (the chat's
        refusal judge); literal absence alone also flags colloquial words the KB phrases
        differently."""
        vocab = self._shared.current().snapshot.vocab
        if vocab is None or len(vocab) == 0:
            return None
        out: list[float | None] = [1.0 if t in vocab.row_of else None for t in terms]
        todo = [t for t, v in zip(terms, out, strict=True) if v is None]
        if todo:
            vecs = np.asarray(self._embedder().embed_documents(list(todo)), dtype=np.float32)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True) + 1e-12
            best = iter((vecs @ np.asarray(vocab.vectors, dtype=np.float32).T).max(axis=1))
            out = [float(next(best)) if v is None else v for v in out]
        return [float(v) for v in out if v is not None]

    def _embedder(self) -> Embedder:
        key = self.config.embedding
        with self._shared.models_lock:
            emb = self._shared.embedders.get(key)
            if emb is None:
                emb = make_embedder(key)
                self._shared.embedders[key] = emb
            return emb

    def _reranker(self) -> Reranker | None:
        key = rerank_key(self.config.rerank)
        with self._shared.models_lock:
            if key not in self._shared.rerankers:
                self._shared.rerankers[key] = make_reranker(self.config.rerank)
            return self._shared.rerankers[key]

    def _check_signature(self) -> None:
        have = self._shared.current().snapshot.manifest.embedder_signature
        want = self._embedder().signature
        if have != want:
            raise ConfigError(
                f"the index was built with embedder {have.provider}/{have.model}/{have.dims} "
                f"but the config uses {want.provider}/{want.model}/{want.dims}; "
                "run `wikirag index` to rebuild it for this embedder"
            )

    def _check_stemming(self) -> None:
        # Stemmed query tokens never match unstemmed chapter tokens (and the reverse), and the
        # stored text is the embedded text, not the keyword text: refuse rather than re-segment.
        have = self._shared.current().snapshot.manifest.tokenizer
        want = self.config.lexical.tokenizer_spec
        if parse_tokenizer_spec(have)[1] != self.config.lexical.stem:
            raise ConfigError(
                f"the index's keyword tokens were built with tokenizer {have!r} but the config "
                f"uses {want!r} (lexical.stem={str(self.config.lexical.stem).lower()}); "
                "run `wikirag index` to rebuild it with this config"
            )

    def candidates(
        self,
        query: str,
        *,
        pool: int,
        filters: Filters | None = None,
        mode: str = "hybrid",
    ) -> Candidates:
        """Expansion + both retrieval channels, each cut to ``pool`` (what evaluation caches)."""
        return self._candidates(self._shared.current(), check_query(query), pool, filters, mode)

    def _candidates(
        self, state: State, query: str, pool: int, filters: Filters | None, mode: str
    ) -> Candidates:
        return retrieve(
            state.snapshot,
            self.config,
            query,
            pool=pool,
            filters=filters,
            mode=mode,
            embedder=self._embedder,
            executor=self._shared.executor,
            vector_backend=self._shared.vector_backend,
        )

    def keyword_channel(
        self, token_lists: Sequence[Sequence[str]], *, pool: int
    ) -> list[list[tuple[str, float]]]:
        """The BM25 channel of many queries under this config's lexical settings, no filters.

        ``token_lists`` as ``query_tokens`` builds them. The optimizer re-scores a whole
        question set per BM25 setting this way, without re-running expansion or embedding.
        """
        snap = self._shared.current().snapshot
        return keyword_hits(snap, self.config.lexical, token_lists, pool)

    def rerank_scores(self, query: str, node_ids: Sequence[str]) -> dict[str, float]:
        """Cross-encoder scores for these nodes (ProviderError if the provider fails)."""
        return self._rerank_scores(self._shared.current(), check_query(query), node_ids)

    def _rerank_scores(self, state: State, query: str, node_ids: Sequence[str]) -> dict[str, float]:
        reranker = self._reranker()
        if reranker is None:
            raise ConfigError("rerank.provider is none; set rerank.provider to rerank")

        ids = [n for n in dict.fromkeys(node_ids) if n in state.kb]
        if not ids:
            return {}
        chars = self.config.rerank.content_chars
        passages = [reranker_input(state.kb.nodes[n], chars) for n in ids]
        scores = reranker.score(query, passages)
        if len(scores) != len(ids):
            raise ProviderError(
                f"reranker {reranker.name} returned {len(scores)} scores for {len(ids)} passages"
            )
        return {n: float(s) for n, s in zip(ids, scores, strict=True)}

    def search(
        self,
        query: str,
        *,
        top_k: int | None = None,
        mode: str | None = None,
        rerank: bool | None = None,
        filters: Filters | None = None,
        expand: str | None = None,
    ) -> SearchResponse:
        """Search the KB. ``rerank=None`` reranks when ``rerank.provider`` is not none."""
        t_start = time.perf_counter()
        query = check_query(query)
        cfg = self.config
        top_k = cfg.search.top_k if top_k is None else int(top_k)
        if top_k < 1:
            raise EngineError("top_k must be >= 1")
        mode = mode or cfg.search.mode
        expand_mode = expand or cfg.search.expand
        if expand_mode not in EXPAND_MODES:
            raise EngineError(
                f"expand must be one of {', '.join(EXPAND_MODES)}; got {expand_mode!r}"
            )
        warnings: list[str] = []
        use_rerank = cfg.rerank.provider != "none" if rerank is None else bool(rerank)
        if use_rerank and cfg.rerank.provider == "none":
            warnings.append(
                "rerank was requested but rerank.provider is none; results are not reranked "
                "(set rerank.provider, e.g. --set rerank.provider=onnx-cross-encoder)"
            )
            use_rerank = False

        state = self._shared.current()
        cands = self._candidates(state, query, pool_size(cfg, top_k, use_rerank), filters, mode)

        rerank_s = [0.0]

        def rerank_head(head: Sequence[str]) -> Mapping[str, float] | None:
            t0 = time.perf_counter()
            try:
                return self._rerank_scores(state, query, head)
            except ProviderError as exc:
                warnings.append(f"rerank failed, results are not reranked: {exc}")
                return None
            finally:
                rerank_s[0] += time.perf_counter() - t0

        kb = state.kb
        inject_s = [0.0]

        def children_of(node_id: str) -> Sequence[str]:
            t0 = time.perf_counter()
            node = kb.get(node_id)
            inject_s[0] += time.perf_counter() - t0
            return node.children_ids if node is not None else ()

        t = time.perf_counter()
        composed = compose(
            cands,
            cfg,
            top_k=top_k,
            mode=mode,
            rerank=rerank_head if use_rerank else None,
            children_of=children_of,
        )
        ranked = composed.ranked
        rank_ms = elapsed_ms(t) - rerank_s[0] * 1000
        rerank_ms = rerank_s[0] * 1000
        total = len(composed.fused)

        results = [to_result(kb, state.snapshot, r, expand_mode) for r in ranked]
        stale = sum(1 for r in ranked if r.node_id not in kb)
        if stale:
            warnings.append(
                f"{stale} result(s) are no longer in the KB (the index is stale); "
                "run `wikirag index` to update it"
            )
        timings = {
            **{k: round(v, 3) for k, v in cands.timings.items()},
            "fusion": round(rank_ms - inject_s[0] * 1000, 3),
            "rerank": round(rerank_ms, 3),
            "inject": round(inject_s[0] * 1000, 3),
        }
        return SearchResponse(
            query=query,
            results=results,
            total=total,
            took_ms=round(elapsed_ms(t_start), 3),
            timings=timings,
            index_stats=index_stats(state.snapshot, state.freshness["fresh"]),
            config_hash=cfg.hash,
            expansion_terms=list(cands.expansion_terms),
            warnings=warnings,
            bm25_scale=bm25_scale(cands, cfg) if mode == "hybrid" else 1.0,
        )

    def chapter(self, node_id: str) -> Node:
        return lookup_node(self.kb, node_id)

    def children(self, node_id: str) -> list[Node]:
        kb = self.kb
        lookup_node(kb, node_id)
        return kb.children(node_id)

    def siblings(self, node_id: str) -> list[Node]:
        kb = self.kb
        lookup_node(kb, node_id)
        return kb.siblings(node_id)

    def parent(self, node_id: str) -> Node | None:
        kb = self.kb
        lookup_node(kb, node_id)
        return kb.parent(node_id)

    def stats(self) -> dict[str, Any]:
        """KB size, index size and freshness (new/changed/deleted nodes vs the manifest)."""
        state = self._shared.current()
        m = state.snapshot.manifest
        kb_stats = state.kb.stats()
        return {
            "kb": state.kb.root,
            "documents": kb_stats["totalDocuments"],
            "chapters": kb_stats["totalChapters"],
            "nodes": len(state.kb.nodes),
            "index": {
                "uri": self._shared.index_uri,
                "table": m.table,
                "version": m.version,
                "rows": state.snapshot.rows,
                "build_id": m.build_id,
                "created_at": m.created_at,
                "updated_at": m.updated_at,
                "vocabulary_terms": len(state.snapshot.vocab or ()),
                "vector_backend": self._shared.vector_backend,
            },
            "embedder": m.signature,
            "freshness": dict(state.freshness),
            "config_hash": self.config.hash,
        }

    def refresh(self, reparse_kb: bool = True) -> bool:
        """Pick up an index rebuilt elsewhere (e.g. by `wikirag index`). True if it changed."""
        with self._shared.swap_lock:
            current = self._shared.current()
            m = read_manifest(self._shared.loc)
            kb = current.kb
            if reparse_kb and self._shared.kb_dir:
                kb = parse_kb(self._shared.kb_dir, cache=self._shared.parse_cache)
            if m is not None and m.build_id == current.snapshot.manifest.build_id:
                if kb is not current.kb:
                    fresh = freshness(kb, self.config, m)  # the snapshot keeps no node hashes
                    self._shared.state = State(kb, current.snapshot, fresh)
                return False
            self._shared.load(kb, self.config)
            return True

    def rebuild(
        self,
        *,
        force: bool = False,
        progress: ProgressFn | None = None,
        kb: KnowledgeBase | None = None,
    ) -> IndexReport:
        """Re-index (incrementally unless ``force``) and switch searches to the result.

        Searches keep using the previous snapshot until the new one is loaded; superseded
        tables are dropped only after the switch.
        """
        with self._shared.swap_lock:
            if kb is None:
                if self._shared.kb_dir:
                    kb = parse_kb(self._shared.kb_dir, cache=self._shared.parse_cache)
                else:
                    kb = self._shared.current().kb
            report = build_index(
                kb,
                self.config,
                self._shared.index_uri,
                progress,
                force,
                embedder=self._embedder(),
                storage_options=self._shared.storage_options,
                drop_old=False,
            )
            self._shared.load(kb, self.config)
        drop_stale_tables(self._shared.index_uri, self._shared.storage_options)
        return report


__all__ = [
    "Engine",
]
