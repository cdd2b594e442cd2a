"""One index version in memory: ids, vectors, filter columns, BM25 counts, vocabulary.

``load_snapshot`` reads a manifest's table version and caches; an ``IndexSnapshot`` is
immutable once loaded (per-config BM25 weights are memoised under a lock), so a query that
holds one reference sees one index version even while a rebuild loads the next.

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

import functools
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from engine import sign_codes
from engine.ann import ann_nprobes, ann_refine_candidates, ann_search
from engine.config import LexicalConfig
from engine.expansion import Vocabulary
from engine.index_caches import current_counts, split_lexical_payload
from engine.lexical import BM25Index, RankBM25Reference, SparseBM25, title_tokens
from engine.manifest import Manifest
from engine.scripts import chapter_scripts, script_shares
from engine.sign_codes import SignCodes
from engine.sparse_counts import aligned_counts
from engine.store import (
    META_COLUMNS,
    PASSAGES,
    ChapterTable,
    Location,
    Store,
    filter_sql,
    passages_of,
    vectors_of,
)
from engine.term_counts import aligned
from engine.tokenizer import tokenize
from engine.topn import top_n

# Rows per batch when streaming the vector column (~8 MB of float32 at 256 dims).
_VECTOR_BATCH_ROWS = 8192


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
    # Passage vectors (index.passage_chars): unit rows grouped by chapter, the chapter row
    # of each group's first passage and where each group starts (np.maximum.reduceat).
    passages: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    passage_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    passage_starts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    row_of: dict[str, int] = field(init=False)
    _bm25: dict[tuple[object, ...], BM25Index] = field(default_factory=dict, init=False, repr=False)
    _table: ChapterTable | None = field(default=None, init=False, repr=False)
    # (codes, each passage's chapter row); codes None when they failed their self-check
    _codes: tuple[SignCodes | None, np.ndarray] | None = field(default=None, init=False, repr=False)
    codes_agreement: float | None = field(default=None, init=False)  # set on first coded use
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    # The codes take ~0.2 s to build at 64k vectors: a lock of their own, so a first coded
    # search does not hold up a concurrent first BM25 build or table open.
    _codes_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

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

    @functools.cached_property
    def chapter_scripts(self) -> np.ndarray:
        """Each row's script code (engine/scripts.py), on first use."""
        return chapter_scripts(self.lexical.counts, self.lexical.terms)

    @functools.cached_property
    def script_shares(self) -> dict[str, float]:
        """Share of chapters written in each script (engine/scripts.py)."""
        return script_shares(self.chapter_scripts)

    def script_shares_of(self, mask: np.ndarray | None) -> dict[str, float]:
        """``script_shares`` of the rows a filter ``mask`` keeps (all rows for None)."""
        return self.script_shares if mask is None else script_shares(self.chapter_scripts, mask)

    def vector_top(
        self, qvec: np.ndarray, n: int, mask: np.ndarray | None, exact_rows: int = 0
    ) -> list[tuple[str, float]]:
        """Exact cosine top-n (vectors and query are unit length); ties by id ascending.

        With more than ``exact_rows`` vectors (chapters and passages; 0: no limit) and no
        filter, sign-bit codes pick the vectors scored exactly (engine/sign_codes.py). With
        an approximate index: its top-n, asked for more when a filter mask drops some.
        """
        if n <= 0 or self.rows == 0 or not np.any(qvec):
            return []
        if self.ann:
            return self._ann_top(qvec, n, mask)
        # einsum, not BLAS: multi-threaded BLAS on a busy machine (or under concurrent
        # searches) measured 16 ms for a 939 x 512 mat-vec that einsum does in 0.08 ms.
        q = np.asarray(qvec, dtype=np.float32)
        if mask is None and self._uses_codes(exact_rows):
            coded = self._coded_top(q, n)
            if coded is not None:
                return coded
        sims = np.einsum("ij,j->i", self.vectors, q)
        if len(self.passage_rows):
            # A chapter scores as the best of its own vector and its passages'.
            best = np.maximum.reduceat(np.einsum("ij,j->i", self.passages, q), self.passage_starts)
            sims[self.passage_rows] = np.maximum(sims[self.passage_rows], best)
        cand = np.flatnonzero(mask) if mask is not None else np.arange(self.rows)
        if len(cand) == 0:
            return []
        return self._ranked(cand, sims[cand], n)

    def _coded_top(self, q: np.ndarray, n: int) -> list[tuple[str, float]] | None:
        """Top-n of the chapters the vectors whose codes are nearest ``q``'s belong to, each
        scored by its best of those vectors, exactly (fewer when they cover fewer); None when
        the codes failed their self-check (the exact scan serves)."""
        codes, owners = self._sign_codes()
        if codes is None:
            return None
        picked = codes.nearest(q, sign_codes.RESCORE_CANDIDATES)
        chapters = picked[picked < self.rows]
        passages = picked[picked >= self.rows] - self.rows
        sims = np.full(self.rows, -np.inf, dtype=np.float32)
        sims[chapters] = np.einsum("ij,j->i", self.vectors[chapters], q)
        if len(passages):
            scored = np.einsum("ij,j->i", self.passages[passages], q)
            np.maximum.at(sims, owners[passages], scored)
        cand = np.flatnonzero(sims > -np.inf)
        return self._ranked(cand, sims[cand], n)

    def _ranked(self, rows: np.ndarray, scores: np.ndarray, n: int) -> list[tuple[str, float]]:
        """The top-n of ``rows`` by ``scores`` as (id, score); ties by row, which is id order."""
        top, s = top_n(rows, scores, n)
        return [(self.ids[int(c)], float(x)) for c, x in zip(top, s, strict=True)]

    def _uses_codes(self, exact_rows: int) -> bool:
        """Whether an unfiltered search with ``exact_rows`` goes through the sign-bit codes."""
        return not self.ann and 0 < exact_rows < self.rows + len(self.passages)

    def warm_codes(self, exact_rows: int) -> None:
        """Build the sign-bit codes (and run their self-check) now if searches past
        ``exact_rows`` vectors will use them, so the first search does not pay for it."""
        if self._uses_codes(exact_rows):
            self._sign_codes()

    def _sign_codes(self) -> tuple[SignCodes | None, np.ndarray]:
        """The codes of the chapter vectors then the passage vectors (None when they rank
        unlike the exact scan: ``sign_codes.agreement``), and each passage's chapter row.
        Built on first use: ~0.2 s at 64k vectors, the self-check ~0.3 s more."""
        with self._codes_lock:
            if self._codes is None:
                sizes = np.diff(np.append(self.passage_starts, len(self.passages)))
                owners = np.repeat(self.passage_rows, sizes)
                mats = (self.vectors, self.passages) if len(self.passages) else (self.vectors,)
                codes = SignCodes.of(*mats)
                every = np.concatenate([np.arange(self.rows), owners])
                self.codes_agreement = sign_codes.agreement(codes, mats, every)
                faithful = self.codes_agreement >= sign_codes.FAITHFUL_AGREEMENT
                self._codes = (codes if faithful else None, owners)
            return self._codes

    def _ann_top(
        self, qvec: np.ndarray, n: int, mask: np.ndarray | None
    ) -> list[tuple[str, float]]:
        tbl = self._lance_table()
        nprobes = ann_nprobes(self.manifest.vector_index)
        budget = ann_refine_candidates(self.manifest.vector_index)
        if mask is None:
            return ann_search(tbl, qvec, n, nprobes=nprobes, refine_candidates=budget)
        allowed = int(mask.sum())
        if allowed == 0:
            return []
        # Over-ask by the inverse of the filter's share, doubling until n pass (or all did).
        want = min(self.rows, max(n, int(n * self.rows / allowed * 1.5)))
        while True:
            hits = ann_search(tbl, qvec, want, nprobes=nprobes, refine_candidates=budget)
            kept = [(i, s) for i, s in hits if (r := self.row_of.get(i)) is not None and mask[r]]
            if len(kept) >= n or len(hits) < want or want >= self.rows:
                return kept[:n]
            want = min(self.rows, want * 2)

    def _lance_table(self) -> ChapterTable:
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
    # Columns become Python objects only where a query needs them (ids, keywords): the
    # serving process's peak memory is what a large index costs (issue 15).
    data = Store.read(tbl, list(META_COLUMNS))
    ids, idx = _sorted_ids(data)
    columns = {k: _str_column(data.column(k), idx) for k in ("category", "priority", "doc_type")}
    kw_rows: dict[str, list[int]] = {}
    for row, kws in enumerate(data.column("keywords").take(pa.array(idx)).to_pylist()):
        for kw in set(kws or []):
            kw_rows.setdefault(kw, []).append(row)
    meta = data.select([c for c in META_COLUMNS if c not in ("content_hash", "row_hash")])
    meta = meta.take(pa.array(idx)) if len(idx) else meta
    del data
    vectors = _unit_vectors(tbl, ids) if len(idx) and not ann else np.zeros((0, 0), np.float32)
    passages = _passage_vectors(tbl, ids) if len(idx) and not ann else None
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
        vectors=vectors,
        columns=columns,
        keyword_rows={k: np.array(v, dtype=np.int64) for k, v in kw_rows.items()},
        meta=meta,
        lexical=lexical,
        vocab=vocab,
        store=store,
        ann=ann,
        **(passages or {}),
    )


def _sorted_ids(data: pa.Table) -> tuple[list[str], np.ndarray]:
    """Row ids ascending, and the table row of each."""
    raw_ids = data.column("id").to_pylist()
    order = sorted(range(len(raw_ids)), key=raw_ids.__getitem__)
    return [raw_ids[i] for i in order], np.array(order, dtype=np.int64)


def _str_column(col: pa.ChunkedArray, idx: np.ndarray) -> np.ndarray:
    """A string column in ``idx`` order as a fixed-width numpy array (no object per row)."""
    values = col.take(pa.array(idx)).to_pylist() if len(idx) else []
    return np.array([v or "" for v in values], dtype=str)


def _unit_vectors(tbl: ChapterTable, ids: list[str]) -> np.ndarray:
    """The vector column in ``ids`` order, rows scaled to unit length (zero rows stay zero).

    Streamed in batches into one preallocated matrix: reading the whole column first held
    it twice (Arrow, then numpy) and, at 100k chapters x 256 dims, left the process ~180 MB
    above the 98 MB matrix it keeps.
    """
    row_of = {node_id: row for row, node_id in enumerate(ids)}
    vectors: np.ndarray | None = None
    seen = 0
    for batch in Store.read_batches(tbl, ["id", "vector"], _VECTOR_BATCH_ROWS):
        part = vectors_of(pa.Table.from_batches([batch]))
        if vectors is None:
            vectors = np.empty((len(ids), part.shape[1]), dtype=np.float32)
        try:
            rows = [row_of[i] for i in batch.column("id").to_pylist()]
        except KeyError as exc:  # pragma: no cover - one table version scans the same rows
            raise ValueError(f"the vector column has a row the metadata lacks: {exc}") from None
        vectors[rows] = part
        seen += len(rows)
    if vectors is None or seen != len(ids):  # pragma: no cover - same table version
        raise ValueError("the vector column's rows differ from the metadata's")
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    ok = norms > 0
    np.divide(vectors, norms, out=vectors, where=ok)
    vectors[~ok[:, 0]] = 0.0
    return vectors


def _passage_vectors(tbl: ChapterTable, ids: list[str]) -> dict[str, np.ndarray] | None:
    """The snapshot's passage fields from the passage column (None: no passages stored).

    With an approximate vector index (big tables) passages are not searched: that index
    holds the chapter vectors only.
    """
    if PASSAGES not in tbl.schema.names:
        return None  # a table written before passage vectors
    row_of = {node_id: row for row, node_id in enumerate(ids)}
    groups: list[tuple[int, np.ndarray]] = []
    for batch in Store.read_batches(tbl, ["id", PASSAGES], _VECTOR_BATCH_ROWS):
        table = pa.Table.from_batches([batch])
        for nid, mat in zip(table.column("id").to_pylist(), passages_of(table), strict=True):
            if len(mat):
                groups.append((row_of[nid], mat))
    if not groups:
        return None
    groups.sort(key=lambda g: g[0])
    mats = np.concatenate([m for _, m in groups]).astype(np.float32, copy=False)
    norms = np.linalg.norm(mats, axis=1, keepdims=True)
    np.divide(mats, norms, out=mats, where=norms > 0)
    sizes = np.array([len(m) for _, m in groups], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    rows = np.array([r for r, _ in groups], dtype=np.int64)
    return {"passages": mats, "passage_rows": rows, "passage_starts": starts}


def _load_lexical(loc: Location, m: Manifest, ids: list[str], tbl: ChapterTable) -> SparseBM25:
    if m.lexical_delta_file:  # the base with the rows changed since merged in
        full = current_counts(loc, m)
        if full is not None and full.ids == ids:
            title = aligned(full.crumb_counts, full.crumb_terms, full.terms)
            return SparseBM25(counts=full.counts, terms=full.terms, title_counts=title)
    payload = (
        loc.read_bytes(m.lexical_file) if m.lexical_file and not m.lexical_delta_file else None
    )
    if payload is not None:
        cached_ids, start = split_lexical_payload(payload)
        if cached_ids == ids:
            return SparseBM25.from_bytes(payload, k1=1.5, b=0.75, start=start)
    # Cache missing or misaligned: rebuild from the table's tokens (same result, slower).
    data = Store.read(tbl, ["id", "tokens"])
    by_id = dict(zip(data.column("id").to_pylist(), data.column("tokens").to_pylist(), strict=True))
    return SparseBM25([(by_id.get(i) or "").split() for i in ids])


__all__ = ["IndexSnapshot", "load_snapshot"]
