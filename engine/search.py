"""The search engine: ``Engine.open(kb_dir, index_uri, config).search(query)``.

Per query: expansion (BM25 side only) -> vector channel (exact cosine over an in-memory
matrix) and BM25 channel (sparse) -> ``engine.pipeline.compose`` (fusion, rerank merge,
parent-child injection, cut) -> result expansion. ``candidates`` and ``rerank_scores``
expose the model-dependent stages so the evaluator can cache them and call the same
``compose``.
The two channels run one after the other with a local embedder (CPU-bound; measured
faster) and side by side with a remote one (network-bound).

Measured on this 2-core machine under heavy load from other jobs (load average ~8), the
bundled wiki (939 chapters), the default USE embedder with ``embedding.threads: 1``:
hybrid search p50 4.2 ms / p95 9 ms (embed 3.7, expand 1.2, BM25 0.4, vector 0.2,
fusion 0.1 ms). With ``embedding.threads: 2`` the same searches took p50 140-200 ms: the
query embedding's 2-thread BLAS stalls on a busy machine. Query-time dot products here use
einsum, not BLAS, for the same reason.

Concurrency: everything a query reads lives in an immutable ``_State`` (KB + index
snapshot) that is replaced as a whole when an index is rebuilt or refreshed; a query takes
one reference at its start, so a concurrent rebuild never changes what it sees. Per-config
derived data (BM25 weights for given k1/b) is memoised under a lock.

Vector path: the snapshot keeps the unit-length vectors as a float32 numpy matrix and
scores a query with one mat-vec: exact, so it equals exact search by construction.
Measured here (512 dims, clustered synthetic vectors, 2 loaded cores, top 30, p50 of 20
queries): numpy (einsum) 0.16 / 1.7 / 15 ms vs LanceDB flat
``.search(v).distance_type("cosine")`` 4.3 / 20 / 153 ms at 1k / 10k / 100k rows; with a
category prefilter LanceDB took 4.5 / 15 / 148 ms while the numpy mask adds 0.06 / 0.2 /
1.1 ms. Top-10 agreement 1.0 at every size. The cost is memory: rows x dims x 4 bytes
(205 MB at 100k x 512).
``vector_backend="lance"`` keeps the LanceDB path (prefilter via ``.where(sql,
prefilter=True)``, pinned to the snapshot's table version) for checking and comparison.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from engine.config import EngineConfig, LexicalConfig, RerankConfig
from engine.errors import ConfigError, EngineError, ProviderError, UnknownNodeError
from engine.expansion import Vocabulary, expand_query
from engine.indexer import (
    IndexReport,
    Manifest,
    ProgressFn,
    build_index,
    drop_stale_tables,
    freshness,
    read_manifest,
    require_manifest,
    split_lexical_payload,
)
from engine.lexical import (
    BatchScorer,
    BM25Index,
    BM25Params,
    RankBM25Reference,
    SparseBM25,
    aligned_counts,
    parse_tokenizer_spec,
    title_tokens,
    tokenize,
    warm_up,
)
from engine.parse_cache import ParseCache
from engine.pipeline import Candidates, Ranked, compose, pool_size
from engine.store import (
    FILTER_KEYS,
    META_COLUMNS,
    Location,
    Store,
    ann_nprobes,
    ann_search,
    filter_sql,
    vectors_of,
)
from engine.topn import top_n
from engine.tree import KnowledgeBase, Node
from engine.types import Embedder, Reranker, SearchResponse, SearchResult

MODES = ("hybrid", "vector", "keyword")
EXPAND_MODES = ("none", "children", "siblings", "parent")
VECTOR_BACKENDS = ("numpy", "lance")
REMOTE_EMBEDDERS = ("openai",)  # network-bound: candidate channels overlap their waits
Filters = Mapping[str, str | Sequence[str]]
_UNSET: Any = object()


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


def lookup_node(kb: KnowledgeBase, node_id: str) -> Node:
    """The node with this id, or UnknownNodeError naming the closest ids."""
    node = kb.get(node_id)
    if node is not None:
        return node
    close = difflib.get_close_matches(node_id, list(kb.nodes), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else "; list ids with `wikirag tree`"
    raise UnknownNodeError(f"unknown node id {node_id!r}{hint}")


@dataclass
class IndexSnapshot:
    """One index version in memory: ids (sorted), vectors, filter columns, BM25, vocabulary."""

    manifest: Manifest
    ids: list[str]
    vectors: np.ndarray  # float32 (n, dims), unit rows
    columns: dict[str, np.ndarray]  # category / priority / doc_type as object arrays
    keyword_rows: dict[str, np.ndarray]  # keyword -> sorted row indices
    meta: pa.Table  # metadata columns in row order (for results whose node left the KB)
    lexical: SparseBM25  # term counts at the index's tokenizer (k1/b applied per config)
    vocab: Vocabulary | None
    store: Store
    # With an approximate vector index (big tables) vectors stay on disk: ``vectors`` is
    # empty and the vector channel asks LanceDB's index.
    ann: bool = False
    row_of: dict[str, int] = field(init=False)
    _bm25: dict[tuple, BM25Index] = field(default_factory=dict, init=False, repr=False)
    _table: Any = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        self.row_of = {nid: i for i, nid in enumerate(self.ids)}

    @property
    def rows(self) -> int:
        return len(self.ids)

    def meta_row(self, node_id: str) -> dict[str, Any]:
        """The stored metadata of one row ({} if absent), breadcrumb decoded."""
        row = self.row_of.get(node_id)
        if row is None:
            return {}
        m = self.meta.slice(row, 1).to_pylist()[0]
        m["breadcrumb"] = json.loads(m["breadcrumb"] or "[]")
        m["keywords"] = list(m["keywords"] or [])
        return m  # type: ignore[no-any-return]

    def mask(self, filters: Mapping[str, Sequence[str]]) -> np.ndarray | None:
        """Boolean row mask for normalised filters (None = every row)."""
        if not filters:
            return None
        mask = np.ones(self.rows, dtype=bool)
        for key, values in filters.items():
            if key == "keywords":
                hit = np.zeros(self.rows, dtype=bool)
                for v in values:
                    rows = self.keyword_rows.get(v)
                    if rows is not None:
                        hit[rows] = True
                mask &= hit
            else:
                mask &= np.isin(self.columns[key], list(values))
        return mask

    def vector_top(
        self, qvec: np.ndarray, n: int, mask: np.ndarray | None
    ) -> list[tuple[str, float]]:
        """Exact cosine top-n (vectors and query are unit length); ties by id ascending.

        With an approximate index: its top-n, asked for more when a filter mask drops some.
        """
        if n <= 0 or self.rows == 0 or not np.any(qvec):
            return []
        if self.ann:
            return self._ann_top(qvec, n, mask)
        # einsum, not BLAS: multi-threaded BLAS on a busy machine (or under concurrent
        # searches) measured 16 ms for a 939 x 512 mat-vec that einsum does in 0.08 ms.
        sims = np.einsum("ij,j->i", self.vectors, np.asarray(qvec, dtype=np.float32))
        cand = np.flatnonzero(mask) if mask is not None else np.arange(self.rows)
        if len(cand) == 0:
            return []
        cand, s = top_n(cand, sims[cand], n)
        return [(self.ids[int(c)], float(x)) for c, x in zip(cand, s, strict=True)]

    def _ann_top(
        self, qvec: np.ndarray, n: int, mask: np.ndarray | None
    ) -> list[tuple[str, float]]:
        tbl = self._lance_table()
        nprobes = ann_nprobes(self.manifest.vector_index)
        if mask is None:
            return ann_search(tbl, qvec, n, nprobes=nprobes)
        allowed = int(mask.sum())
        if allowed == 0:
            return []
        # Over-ask by the inverse of the filter's share, doubling until n pass (or all did).
        want = min(self.rows, max(n, int(n * self.rows / allowed * 1.5)))
        while True:
            hits = ann_search(tbl, qvec, want, nprobes=nprobes)
            kept = [(i, s) for i, s in hits if (r := self.row_of.get(i)) is not None and mask[r]]
            if len(kept) >= n or len(hits) < want or want >= self.rows:
                return kept[:n]
            want = min(self.rows, want * 2)

    def _lance_table(self) -> Any:
        with self._lock:
            if self._table is None:
                self._table = self.store.open_table(self.manifest.table, self.manifest.version)
            return self._table

    def lance_vector_top(
        self, qvec: np.ndarray, n: int, filters: Mapping[str, Sequence[str]]
    ) -> list[tuple[str, float]]:
        """The same search through LanceDB's flat scan (pinned to this snapshot's version)."""
        return Store.vector_search(self._lance_table(), qvec, n, filter_sql(filters))

    def bm25(self, cfg: LexicalConfig) -> BM25Index:
        """The BM25 index for this lexical config (memoised; k1/b re-weight shared counts)."""
        spec = cfg.tokenizer_spec
        key = (cfg.backend, spec, cfg.k1, cfg.b, cfg.title_weight, cfg.title_b)
        with self._lock:
            hit = self._bm25.get(key)
            if hit is not None:
                return hit
        params = (cfg.k1, cfg.b, cfg.title_weight, cfg.title_b)
        if spec == self.manifest.tokenizer and cfg.backend == "sparse":
            built: BM25Index = self.lexical.with_params(*params)
        else:
            docs = self._documents(spec)
            if cfg.backend == "sparse":
                titles = title_tokens(self._breadcrumbs(), spec)
                plain = SparseBM25(docs, title_tokens=titles)
                built = plain.with_params(*params)
            else:
                # The reference is plain BM25: it checks the title_weight == 0 case only.
                built = RankBM25Reference(docs, k1=cfg.k1, b=cfg.b)
        with self._lock:
            return self._bm25.setdefault(key, built)

    def _breadcrumbs(self) -> list[list[str]]:
        """Breadcrumb titles in row order (the BM25F title field's text)."""
        return [json.loads(b or "[]") for b in self.meta.column("breadcrumb").to_pylist()]

    def _documents(self, tokenizer: str) -> list[list[str]]:
        """Token lists in row order: stored tokens, or the text re-tokenized if needed."""
        tbl = self.store.open_table(self.manifest.table, self.manifest.version)
        if tokenizer == self.manifest.tokenizer:
            data = Store.read(tbl, ["id", "tokens"])
            by_id = dict(
                zip(data.column("id").to_pylist(), data.column("tokens").to_pylist(), strict=True)
            )
            return [(by_id.get(i) or "").split() for i in self.ids]
        # Another tokenizer: re-segment the stored text (slow at scale; sweeps only).
        data = Store.read(tbl, ["id", "text"])
        by_id = dict(
            zip(data.column("id").to_pylist(), data.column("text").to_pylist(), strict=True)
        )
        return [tokenize(by_id.get(i) or "", tokenizer) for i in self.ids]


def load_snapshot(store: Store, loc: Location, manifest: Manifest) -> IndexSnapshot:
    """Read one manifest's table version and caches into memory."""
    tbl = store.open_table(manifest.table, manifest.version)
    ann = bool(manifest.vector_index)
    data = Store.read(tbl, list(META_COLUMNS) if ann else [*META_COLUMNS, "vector"])
    raw_ids = data.column("id").to_pylist()
    order = sorted(range(len(raw_ids)), key=raw_ids.__getitem__)
    ids = [raw_ids[i] for i in order]
    idx = np.array(order, dtype=np.int64)
    vectors = vectors_of(data)[idx] if len(idx) and not ann else np.zeros((0, 0), np.float32)
    if len(vectors):
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
    cols = {name: data.column(name).to_pylist() for name in META_COLUMNS}
    columns = {
        k: np.array([cols[k][i] or "" for i in order], dtype=object)
        for k in ("category", "priority", "doc_type")
    }
    keyword_lists = [cols["keywords"][i] or [] for i in order]
    kw_rows: dict[str, list[int]] = {}
    for row, kws in enumerate(keyword_lists):
        for kw in set(kws):
            kw_rows.setdefault(kw, []).append(row)
    meta = data.select([c for c in META_COLUMNS if c not in ("content_hash", "row_hash")])
    meta = meta.take(pa.array(idx)) if len(idx) else meta
    lexical = _load_lexical(loc, manifest, ids, tbl)
    if not lexical.has_title:
        # An index cached before the title field: segment the stored breadcrumbs once.
        crumbs = [json.loads(b or "[]") for b in meta.column("breadcrumb").to_pylist()]
        titles = aligned_counts(title_tokens(crumbs, manifest.tokenizer), lexical.terms)
        lexical = lexical.with_title(titles)
    vocab = None
    if manifest.vocab_terms_file and manifest.vocab_vectors_file:
        terms = loc.read_text(manifest.vocab_terms_file)
        vecs = loc.read_bytes(manifest.vocab_vectors_file)
        if terms is not None and vecs is not None:
            vocab = Vocabulary.from_files(terms, vecs)
    return IndexSnapshot(
        manifest=manifest,
        ids=ids,
        vectors=np.ascontiguousarray(vectors, dtype=np.float32),
        columns=columns,
        keyword_rows={k: np.array(v, dtype=np.int64) for k, v in kw_rows.items()},
        meta=meta,
        lexical=lexical,
        vocab=vocab,
        store=store,
        ann=ann,
    )


def _load_lexical(loc: Location, m: Manifest, ids: list[str], tbl: Any) -> SparseBM25:
    payload = loc.read_bytes(m.lexical_file) if m.lexical_file else None
    if payload is not None:
        cached_ids, body = split_lexical_payload(payload)
        if cached_ids == ids:
            return SparseBM25.from_bytes(body, k1=1.5, b=0.75)
    # Cache missing or misaligned: rebuild from the table's tokens (same result, slower).
    data = Store.read(tbl, ["id", "tokens"])
    by_id = dict(zip(data.column("id").to_pylist(), data.column("tokens").to_pylist(), strict=True))
    return SparseBM25([(by_id.get(i) or "").split() for i in ids])


@dataclass(frozen=True)
class _State:
    kb: KnowledgeBase
    snapshot: IndexSnapshot
    freshness: dict[str, Any]


class _Shared:
    """What engines derived with ``with_config`` share: the index, the state, the models."""

    def __init__(
        self,
        index_uri: str,
        storage_options: Mapping[str, str] | None,
        kb_dir: str | None,
        vector_backend: str,
    ) -> None:
        if vector_backend not in VECTOR_BACKENDS:
            raise ConfigError(f"vector_backend must be numpy or lance; got {vector_backend!r}")
        self.index_uri = str(index_uri)
        self.storage_options = dict(storage_options or {})
        self.kb_dir = kb_dir
        self.vector_backend = vector_backend
        self.loc = Location(self.index_uri, self.storage_options)
        self._store: Store | None = None
        self.state: _State | None = None
        self.swap_lock = threading.Lock()  # one state load / rebuild at a time
        self.models_lock = threading.Lock()
        self.embedders: dict[Any, Embedder] = {}
        self.rerankers: dict[Any, Reranker | None] = {}
        self._executor: ThreadPoolExecutor | None = None
        # Re-parsing the KB for a refresh or rebuild parses only the files that changed.
        self.parse_cache = ParseCache()

    @property
    def store(self) -> Store:
        """The LanceDB connection, made on first use (so opening a missing index creates
        no folder)."""
        with self.models_lock:
            if self._store is None:
                self._store = Store(self.index_uri, self.storage_options)
            return self._store

    def executor(self) -> ThreadPoolExecutor:
        """Threads for the lexical channel of hybrid searches (created on first use)."""
        with self.models_lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    max_workers=min(8, (os.cpu_count() or 2) * 2), thread_name_prefix="wikirag"
                )
            return self._executor

    def current(self) -> _State:
        state = self.state
        if state is None:  # pragma: no cover - open() always loads
            raise EngineError("engine has no index loaded")
        return state

    def load(self, kb: KnowledgeBase, cfg: EngineConfig) -> _State:
        """Load the manifest's snapshot and make it current (retrying once if it moved)."""
        hint = self.kb_dir or "DIR"
        for attempt in (1, 2):
            manifest = require_manifest(self.loc, hint)
            try:
                snap = load_snapshot(self.store, self.loc, manifest)
                break
            except (OSError, ValueError, RuntimeError) as exc:
                # A concurrent full rebuild may have dropped the table we just read about.
                if attempt == 2:
                    raise EngineError(
                        f"cannot read the index at {self.index_uri} ({exc}); "
                        f"run `wikirag index --kb {hint}`"
                    ) from exc
        state = _State(kb, snap, freshness(kb, cfg, snap.manifest))
        self.state = state
        return state


class Engine:
    """Hybrid chapter search over one KB and its index. Thread-safe for concurrent queries."""

    def __init__(self, shared: _Shared, config: EngineConfig) -> None:
        self._shared = shared
        self.config = config

    @classmethod
    def open(
        cls,
        kb_dir: str | Path,
        index_uri: str | Path,
        config: EngineConfig | None = None,
        storage_options: Mapping[str, str] | None = None,
        *,
        embedder: Embedder | None = None,
        reranker: Reranker | None = _UNSET,
        vector_backend: str = "numpy",
    ) -> Engine:
        """Parse the KB folder and open its index (IndexMissingError if there is none)."""
        from engine.tree import parse_kb

        cache = ParseCache()
        kb = parse_kb(kb_dir, cache=cache)
        engine = cls.from_kb(
            kb,
            index_uri,
            config,
            storage_options,
            embedder=embedder,
            reranker=reranker,
            vector_backend=vector_backend,
            kb_dir=str(kb_dir),
        )
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
        embedder: Embedder | None = None,
        reranker: Reranker | None = _UNSET,
        vector_backend: str = "numpy",
        kb_dir: str | None = None,
    ) -> Engine:
        """Open the index for an already parsed KB (``embedder``/``reranker`` override cfg)."""
        cfg = config or EngineConfig()
        warm_up()
        shared = _Shared(str(index_uri), storage_options, kb_dir, vector_backend)
        if embedder is not None:
            shared.embedders[cfg.embedding] = embedder
        if reranker is not _UNSET:
            shared.rerankers[_rerank_key(cfg.rerank)] = reranker
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
    def reranker_name(self) -> str | None:
        r = self._reranker()
        return r.name if r is not None else None

    def warm_up(self) -> None:
        """Load models, jieba's dictionary and the vocabulary now, not in the first search."""
        self._embedder().embed_query("warm up")
        with contextlib.suppress(EngineError):  # e.g. a filter-free search on an empty KB
            self.candidates("warm up 预热", pool=1, mode="keyword")
        reranker = self._reranker()
        if reranker is not None:
            with contextlib.suppress(ProviderError):  # search() reports them per query
                reranker.score("warm up", ["warm up"])

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
                from engine.embedding import make_embedder

                emb = make_embedder(key)
                self._shared.embedders[key] = emb
            return emb

    def _reranker(self) -> Reranker | None:
        key = _rerank_key(self.config.rerank)
        with self._shared.models_lock:
            if key not in self._shared.rerankers:
                from engine.rerank import make_reranker

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
        return self._candidates(self._shared.current(), _check_query(query), pool, filters, mode)

    def _candidates(
        self, state: _State, query: str, pool: int, filters: Filters | None, mode: str
    ) -> Candidates:
        if mode not in MODES:
            raise EngineError(f"search mode must be one of {', '.join(MODES)}; got {mode!r}")
        if pool < 1:
            raise EngineError("candidate pool must be >= 1")
        cfg = self.config
        snap = state.snapshot
        flt = normalize_filters(filters)
        mask = snap.mask(flt)
        timings: dict[str, float] = {"expand": 0.0, "embed": 0.0, "vector": 0.0, "bm25": 0.0}

        def lexical_channel() -> tuple[list[str], list[tuple[str, float]]]:
            t = time.perf_counter()
            terms = expand_query(
                query,
                cfg.expansion,
                self._embedder() if snap.vocab is not None else None,
                snap.vocab,
                mode=cfg.lexical.tokenizer_spec,
            )
            timings["expand"] = _ms(t)
            t = time.perf_counter()
            tokens = query_tokens(query, terms, cfg.lexical.tokenizer_spec)
            hits = snap.bm25(cfg.lexical).top_n(tokens, pool, mask)
            timings["bm25"] = _ms(t)
            return terms, [(snap.ids[i], s) for i, s in hits]

        def vector_channel() -> list[tuple[str, float]]:
            t = time.perf_counter()
            qvec = self._embedder().embed_query(query)
            timings["embed"] = _ms(t)
            t = time.perf_counter()
            if self._shared.vector_backend == "lance":
                out = snap.lance_vector_top(qvec, pool, flt)
            else:
                out = snap.vector_top(qvec, pool, mask)
            timings["vector"] = _ms(t)
            return out

        terms: list[str] = []
        lexical: list[tuple[str, float]] = []
        vector: list[tuple[str, float]] = []
        if mode == "hybrid" and cfg.embedding.provider in REMOTE_EMBEDDERS:
            # A remote embedder makes both channels wait on the network (the expansion may
            # embed unknown query terms): overlap the two round trips.
            future = self._shared.executor().submit(lexical_channel)
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
        )

    def keyword_channel(
        self, token_lists: Sequence[Sequence[str]], *, pool: int
    ) -> list[list[tuple[str, float]]]:
        """The BM25 channel of many queries under this config's lexical settings, no filters.

        ``token_lists`` as ``query_tokens`` builds them. The optimizer re-scores a whole
        question set per BM25 setting this way, without re-running expansion or embedding.
        """
        snap = self._shared.current().snapshot
        lex = self.config.lexical
        if lex.backend == "sparse" and lex.tokenizer == snap.manifest.tokenizer:
            # One sparse product for all queries; equal to top_n bit for bit (BatchScorer).
            params = BM25Params(lex.k1, lex.b, lex.title_weight, lex.title_b)
            hits = BatchScorer(snap.lexical, token_lists).top_n(params, pool)
        else:
            index = snap.bm25(lex)
            hits = [index.top_n(t, pool, None) for t in token_lists]
        return [[(snap.ids[i], s) for i, s in h] for h in hits]

    def rerank_scores(self, query: str, node_ids: Sequence[str]) -> dict[str, float]:
        """Cross-encoder scores for these nodes (ProviderError if the provider fails)."""
        return self._rerank_scores(self._shared.current(), _check_query(query), node_ids)

    def _rerank_scores(
        self, state: _State, query: str, node_ids: Sequence[str]
    ) -> dict[str, float]:
        reranker = self._reranker()
        if reranker is None:
            raise ConfigError("rerank.provider is none; set rerank.provider to rerank")
        from engine.rerank import reranker_input

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
        query = _check_query(query)
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
        rank_ms = _ms(t) - rerank_s[0] * 1000
        rerank_ms = rerank_s[0] * 1000
        total = len(composed.fused)

        results = [self._result(state, r, expand_mode) for r in ranked]
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
            took_ms=round(_ms(t_start), 3),
            timings=timings,
            index_stats=self._index_stats(state),
            config_hash=cfg.hash,
            expansion_terms=list(cands.expansion_terms),
            warnings=warnings,
        )

    def _result(self, state: _State, r: Ranked, expand_mode: str) -> SearchResult:
        rank_source = {"vector": r.vector_rank, "bm25": r.bm25_rank, "rerank": r.rerank_rank}
        node = state.kb.get(r.node_id)
        if node is None:
            m = state.snapshot.meta_row(r.node_id)
            return SearchResult(
                node_id=r.node_id,
                score=float(r.score),
                rank_source=rank_source,
                title=m.get("title", ""),
                breadcrumb=list(m.get("breadcrumb", [])),
                content="",
                summary="",
                metadata={k: m.get(k) for k in _META_KEYS},
                injected_from=r.injected_from,
            )
        return SearchResult(
            node_id=node.node_id,
            score=float(r.score),
            rank_source=rank_source,
            title=node.title,
            breadcrumb=list(node.breadcrumb),
            content=node.content,
            summary=node.summary,
            metadata=node_metadata(node),
            expanded=[_brief(n, rel) for n, rel in _related(state.kb, node, expand_mode)],
            injected_from=r.injected_from,
        )

    def _index_stats(self, state: _State) -> dict[str, Any]:
        m = state.snapshot.manifest
        sig = m.embedder_signature
        return {
            "rows": state.snapshot.rows,
            "table": m.table,
            "version": m.version,
            "build_id": m.build_id,
            "embedder": f"{sig.provider}/{sig.model}/{sig.dims}",
            "updated_at": m.updated_at,
            "fresh": state.freshness["fresh"],
        }

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
                from engine.tree import parse_kb

                kb = parse_kb(self._shared.kb_dir, cache=self._shared.parse_cache)
            if m is not None and m.build_id == current.snapshot.manifest.build_id:
                if kb is not current.kb:
                    fresh = freshness(kb, self.config, current.snapshot.manifest)
                    self._shared.state = _State(kb, current.snapshot, fresh)
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
                    from engine.tree import parse_kb

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


_META_KEYS = (
    "file_path",
    "line",
    "anchor",
    "level",
    "keywords",
    "doc_type",
    "priority",
    "category",
)


def node_metadata(node: Node) -> dict[str, Any]:
    return {
        "file_path": node.file_path,
        "line": node.line,
        "anchor": node.anchor,
        "level": node.level,
        "keywords": list(node.keywords),
        "doc_type": node.doc_type,
        "priority": node.priority,
        "category": node.category,
    }


def _related(kb: KnowledgeBase, node: Node, mode: str) -> list[tuple[Node, str]]:
    if mode == "children":
        return [(n, "child") for n in kb.children(node.node_id)]
    if mode == "siblings":
        return [(n, "sibling") for n in kb.siblings(node.node_id)]
    if mode == "parent":
        p = kb.parent(node.node_id)
        return [(p, "parent")] if p is not None else []
    return []


def _brief(node: Node, relation: str) -> dict[str, Any]:
    return {
        "node_id": node.node_id,
        "relation": relation,
        "title": node.title,
        "breadcrumb": list(node.breadcrumb),
        "level": node.level,
        "summary": node.summary,
        "content": node.content,
    }


def _rerank_key(cfg: RerankConfig) -> tuple:
    # Pipeline-only fields (max_candidates, weight, content_chars) do not change the model.
    return (cfg.provider, cfg.model, cfg.base_url, cfg.api_key_env, cfg.timeout_s)


def query_tokens(query: str, terms: Sequence[str], tokenizer: str) -> list[str]:
    """What the BM25 channel scores: the query's tokens, then each expansion term's."""
    tokens = tokenize(query, tokenizer)
    for term in terms:
        tokens.extend(tokenize(term, tokenizer))
    return tokens


def _check_query(query: str) -> str:
    if not isinstance(query, str) or not query.strip():
        raise EngineError("query is empty; pass a question or keywords to search for")
    return query.strip()


def _ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000.0


__all__ = [
    "Engine",
    "IndexSnapshot",
    "load_snapshot",
    "lookup_node",
    "node_metadata",
    "normalize_filters",
]
