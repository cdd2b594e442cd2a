"""BM25 / BM25F over a scipy.sparse term-document matrix (tokens from engine/tokenizer.py).

``SparseBM25`` scores exactly like rank_bm25's ``BM25Okapi`` (same idf, same epsilon floor
for negative idf, same length normalisation) but keeps the per-(term, doc) weights in a
term-major CSR matrix, so a query costs one row slice per query term instead of a Python
loop over every document. rank_bm25 stays available as ``backend: rank_bm25`` to check it.

With a second field (the chapter's breadcrumb titles) and ``title_weight > 0`` it scores
BM25F: per-field length-normalised term frequencies, weighted and summed before the k1
saturation. At ``title_weight == 0`` it is the plain BM25 above, bit for bit.
``engine.bm25_batch.BatchScorer`` scores many queries at once for many parameter settings.
"""

from __future__ import annotations

import bisect
import io
import itertools
import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import scipy.sparse as sp

from engine.tokenizer import (
    STEM_SUFFIX,
    STOP_WORDS,
    TOKENIZER_MODES,
    parse_tokenizer_spec,
    stem_word,
    tokenize,
    tokenizer_spec,
    warm_up,
)
from engine.topn import top_n


class BM25Index(Protocol):
    """What the search engine needs from a BM25 backend."""

    n_docs: int

    def top_n(
        self, query_tokens: Sequence[str], n: int, allowed_mask: np.ndarray | None = None
    ) -> list[tuple[int, float]]: ...

    def get_scores(self, query_tokens: Sequence[str]) -> np.ndarray: ...


def title_tokens(
    breadcrumbs: Iterable[Sequence[str]], mode: str = "jieba-search"
) -> list[list[str]]:
    """The title field of each chapter: its breadcrumb titles, segmented.

    Each distinct title is segmented once: a document's title heads every one of its
    chapters' breadcrumbs, so this is far cheaper than segmenting whole breadcrumbs.
    """
    seen: dict[str, list[str]] = {}
    out: list[list[str]] = []
    for crumb in breadcrumbs:
        toks: list[str] = []
        for part in crumb:
            got = seen.get(part)
            if got is None:
                got = seen[part] = tokenize(part, mode)
            toks.extend(got)
        out.append(toks)
    return out


def aligned_counts(docs_tokens: Sequence[Sequence[str]], terms: Sequence[str]) -> sp.csr_matrix:
    """Doc x term counts over an existing term list; tokens outside it are dropped.

    The title field is counted over the body's terms: the body text holds the titles too, so
    a title token missing from the body vocabulary only arises from segmenting a title in
    context differently, and dropping it keeps idf (computed on the body) unchanged.
    """
    index = {t: i for i, t in enumerate(terms)}
    rows: list[int] = []
    cols: list[int] = []
    for i, doc in enumerate(docs_tokens):
        for tok in doc:
            j = index.get(tok)
            if j is not None:
                rows.append(i)
                cols.append(j)
    data = np.ones(len(rows), dtype=np.float64)
    shape = (len(docs_tokens), len(terms))
    counts = sp.coo_matrix((data, (rows, cols)), shape=shape).tocsr()
    counts.sum_duplicates()
    counts.sort_indices()
    return counts


def count_matrix(docs_tokens: Iterable[Sequence[str]]) -> tuple[sp.csr_matrix, list[str]]:
    """Documents -> (doc x term CSR matrix of term counts, term list)."""
    vocab: dict[str, int] = {}
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    n_docs = 0
    for i, doc in enumerate(docs_tokens):
        n_docs = i + 1
        if not doc:
            continue
        ids = np.fromiter((vocab.setdefault(t, len(vocab)) for t in doc), dtype=np.int64)
        cols.append(ids)
        rows.append(np.full(len(ids), i, dtype=np.int64))
    r = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
    c = np.concatenate(cols) if cols else np.zeros(0, dtype=np.int64)
    data = np.ones(len(r), dtype=np.float64)
    # coo -> csr sums duplicate (doc, term) pairs into counts.
    counts = sp.coo_matrix((data, (r, c)), shape=(n_docs, len(vocab))).tocsr()
    counts.sum_duplicates()
    counts.sort_indices()
    return counts, list(vocab)


@dataclass(frozen=True)
class BM25Params:
    """Scoring parameters applied to stored counts (none needs re-indexing).

    ``k1``/``b`` as in BM25 (``b`` is the body field's length normalisation);
    ``title_weight``/``title_b`` weight and length-normalise the title field (BM25F).
    """

    k1: float = 1.5
    b: float = 0.75
    title_weight: float = 0.0
    title_b: float = 0.75


def field_weights(
    body: sp.csr_matrix,
    title: sp.csr_matrix | None,
    body_len: np.ndarray,
    title_len: np.ndarray | None,
    p: BM25Params,
) -> sp.csr_matrix:
    """Term-major (term x doc) BM25 / BM25F weights of term-major count matrices.

    BM25F (Robertson, Zaragoza & Taylor 2004, "Simple BM25 extension to multiple weighted
    fields"; Zaragoza et al. 2004 at TREC-13): tf~ = sum_f w_f * tf_f / B_f with
    B_f = 1 - b_f + b_f * len_f / avglen_f, weight = tf~ * (k1 + 1) / (tf~ + k1); the body
    weight is 1. Without a title field (or at weight 0) this is written as rank_bm25 does,
    tf * (k1 + 1) / (tf + k1 * B), so plain BM25 scores stay bit-identical.
    """
    n_docs = len(body_len)
    avgdl = float(body_len.sum() / n_docs) if n_docs else 0.0
    if avgdl == 0.0:
        return sp.csr_matrix(body.shape, dtype=np.float64)
    k1, b = p.k1, p.b
    norm_body = 1 - b + b * body_len / avgdl
    tf = body.data
    if title is None or title_len is None or p.title_weight == 0.0 or title.nnz == 0:
        w = tf * (k1 + 1) / (tf + k1 * norm_body[body.indices])
        return sp.csr_matrix((w, body.indices, body.indptr), shape=body.shape)
    avg_title = float(title_len.sum() / n_docs)
    norm_title = 1 - p.title_b + p.title_b * title_len / avg_title
    pseudo = sp.csr_matrix((tf / norm_body[body.indices], body.indices, body.indptr), body.shape)
    ttf = title.data * (p.title_weight / norm_title[title.indices])
    pseudo = pseudo + sp.csr_matrix((ttf, title.indices, title.indptr), shape=title.shape)
    x = pseudo.data
    pseudo.data = x * (k1 + 1) / (x + k1)
    return pseudo


def replace_rows(
    ids: Sequence[str],
    counts: sp.csr_matrix,
    terms: Sequence[str],
    drop: Iterable[str],
    new_ids: Sequence[str],
    new_counts: sp.csr_matrix,
    new_terms: Sequence[str],
) -> tuple[list[str], sp.csr_matrix, list[str]]:
    """Update a count matrix whose rows are sorted ``ids``: rows in ``drop`` go, new rows come.

    Returns (ids, counts, terms) with rows in id order and every term that no row uses any
    more dropped, so the BM25 statistics (N, df, avgdl, mean idf) equal those of a matrix
    counted from scratch over the same documents; only the column order may differ.
    Costs one copy of the matrix (the kept rows move as runs between the changed ones),
    not a re-tokenization of the corpus.
    """
    gone = set(drop)
    if new_counts.shape[0] != len(new_ids):
        raise ValueError(f"{new_counts.shape[0]} count rows for {len(new_ids)} new ids")
    keep = np.fromiter((i not in gone for i in ids), dtype=bool, count=len(ids))
    kept_ids = [i for i, k in zip(ids, keep, strict=True) if k] if gone else list(ids)
    kept = set(kept_ids)
    if len(set(new_ids)) != len(new_ids) or any(i in kept for i in new_ids):
        raise ValueError("a new row's id is already in the matrix; drop it first")
    all_terms = list(terms)
    wanted = set(new_terms)  # a dict over every term of the corpus cost more than the rest
    index = {t: i for i, t in enumerate(all_terms) if t in wanted}
    for t in new_terms:
        if t not in index:
            index[t] = len(all_terms)
            all_terms.append(t)
    width = len(all_terms)
    col = np.array([index[t] for t in new_terms], dtype=np.int64)
    nc = new_counts.tocsr()
    new = sp.csr_matrix(
        (nc.data, col[nc.indices] if len(col) else nc.indices, nc.indptr),
        shape=(nc.shape[0], width),
    )
    new.sort_indices()
    if all(a < b for a, b in itertools.pairwise(kept_ids)):
        out_ids, out = _merged_rows(kept_ids, counts, np.flatnonzero(keep), new_ids, new, width)
    else:  # not in id order (never written so by the indexer): sort everything
        old = counts if keep.all() else counts[np.flatnonzero(keep)]
        old = sp.csr_matrix((old.data, old.indices, old.indptr), shape=(old.shape[0], width))
        merged = kept_ids + list(new_ids)
        order = sorted(range(len(merged)), key=merged.__getitem__)
        out = sp.vstack([old, new], format="csr")[np.array(order, dtype=np.int64)]
        out_ids = [merged[i] for i in order]
    df = np.bincount(out.indices, minlength=width)
    if (df == 0).any():
        used = df > 0
        new_col = np.cumsum(used) - 1
        out = sp.csr_matrix(
            (out.data, new_col[out.indices], out.indptr), shape=(out.shape[0], int(used.sum()))
        )
        all_terms = [t for t, u in zip(all_terms, used, strict=True) if u]
    out.sort_indices()
    return out_ids, out, all_terms


def _merged_rows(
    kept_ids: list[str],
    counts: sp.csr_matrix,
    kept_rows: np.ndarray,
    new_ids: Sequence[str],
    new: sp.csr_matrix,
    width: int,
) -> tuple[list[str], sp.csr_matrix]:
    """Rows ``kept_rows`` of ``counts`` (ids ``kept_ids``, sorted) with ``new``'s rows
    inserted where their ids sort, as one CSR matrix ``width`` columns wide."""
    at_of = [
        (at, j)
        for at, _, j in sorted(
            (bisect.bisect_left(kept_ids, nid), nid, j) for j, nid in enumerate(new_ids)
        )
    ]
    # Cut the kept rows where ``counts`` skips a dropped row and where a new row goes in:
    # between cuts they are consecutive rows of ``counts``, copied as one slice.
    skips = (np.flatnonzero(np.diff(kept_rows) != 1) + 1).tolist()
    cuts = sorted({0, len(kept_ids), *skips, *(at for at, _ in at_of)})
    pieces: list[tuple[sp.csr_matrix, int, int]] = []  # (matrix, first row, end row)
    out_ids: list[str] = []
    k = 0
    for a, b in itertools.pairwise(cuts):
        while k < len(at_of) and at_of[k][0] == a:
            j = at_of[k][1]
            pieces.append((new, j, j + 1))
            out_ids.append(new_ids[j])
            k += 1
        first = int(kept_rows[a])
        pieces.append((counts, first, first + b - a))
        out_ids.extend(kept_ids[a:b])
    for _, j in at_of[k:]:  # after the last kept row (or into an empty matrix)
        pieces.append((new, j, j + 1))
        out_ids.append(new_ids[j])
    nnz = sum(int(m.indptr[b] - m.indptr[a]) for m, a, b in pieces)
    idx = np.int32 if max(nnz, width) < 2**31 else np.int64
    dtype = np.result_type(counts.data, new.data)
    data = np.empty(nnz, dtype=dtype)
    indices = np.empty(nnz, dtype=idx)
    indptr = np.empty(len(out_ids) + 1, dtype=idx)
    indptr[0] = row = pos = 0
    for m, a, b in pieces:
        s, e = int(m.indptr[a]), int(m.indptr[b])
        data[pos : pos + e - s] = m.data[s:e]
        indices[pos : pos + e - s] = m.indices[s:e]
        indptr[row + 1 : row + 1 + b - a] = m.indptr[a + 1 : b + 1] - s + pos
        pos, row = pos + e - s, row + b - a
    return out_ids, sp.csr_matrix((data, indices, indptr), shape=(len(out_ids), width))


def counts_payload(
    counts: sp.csr_matrix, terms: Sequence[str], title_counts: sp.csr_matrix | None = None
) -> bytes:
    """``SparseBM25.to_bytes`` without building the scorer (an index build only saves it)."""
    buf = io.BytesIO()
    arrays: dict[str, np.ndarray] = {
        "data": counts.data,
        "indices": counts.indices,
        "indptr": counts.indptr,
        "shape": np.array(counts.shape, dtype=np.int64),
        "terms": np.frombuffer(json.dumps(list(terms), ensure_ascii=False).encode(), np.uint8),
    }
    if title_counts is not None:
        t = title_counts
        arrays |= {"title_data": t.data, "title_indices": t.indices, "title_indptr": t.indptr}
    np.savez(buf, **arrays)  # type: ignore[arg-type]
    return buf.getvalue()


def read_counts_payload(
    payload: bytes,
) -> tuple[sp.csr_matrix, list[str], sp.csr_matrix | None]:
    """(counts, terms, title counts or None) saved by ``counts_payload``."""
    z = np.load(io.BytesIO(payload))
    shape = tuple(int(x) for x in z["shape"])
    counts = sp.csr_matrix((z["data"], z["indices"], z["indptr"]), shape=shape)
    title = None
    if "title_data" in z.files:
        title = sp.csr_matrix((z["title_data"], z["title_indices"], z["title_indptr"]), shape=shape)
    terms: list[str] = json.loads(z["terms"].tobytes().decode())
    return counts, terms, title


class SparseBM25:
    """BM25Okapi scores (rank_bm25 0.2.2 formulas) from a sparse term-document matrix.

    idf(t) = ln(N - df + 0.5) - ln(df + 0.5); a negative idf is replaced by
    epsilon * mean(idf) (rank_bm25's floor). score(q, d) = sum over query tokens t (repeats
    count) of idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * |d| / avgdl)).

    ``title_counts`` (doc x term, same columns) adds the title field; with
    ``title_weight > 0`` the tf above becomes BM25F's pseudo-frequency (see
    ``field_weights``). idf stays the body's: the body text holds the titles too.
    """

    def __init__(
        self,
        docs_tokens: Sequence[Sequence[str]] | None = None,
        k1: float = 1.5,
        b: float = 0.75,
        epsilon: float = 0.25,
        *,
        counts: sp.csr_matrix | None = None,
        terms: Sequence[str] | None = None,
        title_counts: sp.csr_matrix | None = None,
        title_tokens: Sequence[Sequence[str]] | None = None,
        title_weight: float = 0.0,
        title_b: float = 0.75,
    ) -> None:
        if (docs_tokens is None) == (counts is None):
            raise ValueError("pass either docs_tokens or counts= with terms=")
        if counts is None:
            counts, terms = count_matrix(docs_tokens or [])
        if terms is None or len(terms) != counts.shape[1]:
            raise ValueError("terms= must name every column of counts=")
        if title_tokens is not None:
            if title_counts is not None:
                raise ValueError("pass title_tokens= or title_counts=, not both")
            title_counts = aligned_counts(title_tokens, terms)
        if title_counts is not None and title_counts.shape != counts.shape:
            raise ValueError(
                f"title_counts= must have the shape of counts= {counts.shape}; "
                f"got {title_counts.shape}"
            )
        if title_weight < 0 or not 0 <= title_b <= 1:
            raise ValueError("title_weight must be >= 0 and title_b within [0, 1]")
        self.params = BM25Params(float(k1), float(b), float(title_weight), float(title_b))
        self.k1, self.b, self.epsilon = float(k1), float(b), float(epsilon)
        self.counts: sp.csr_matrix = counts
        self.title_counts: sp.csr_matrix | None = title_counts
        self.terms: list[str] = list(terms)
        self.term_index = {t: i for i, t in enumerate(self.terms)}
        self.n_docs = counts.shape[0]
        self.doc_len = np.asarray(counts.sum(axis=1)).ravel()
        self.title_len = (
            np.asarray(title_counts.sum(axis=1)).ravel() if title_counts is not None else None
        )
        self.avgdl = float(self.doc_len.sum() / self.n_docs) if self.n_docs else 0.0
        df = np.bincount(counts.indices, minlength=counts.shape[1]).astype(np.float64)
        idf = np.log(self.n_docs - df + 0.5) - np.log(df + 0.5)
        avg_idf = float(idf.mean()) if len(idf) else 0.0
        idf[idf < 0] = self.epsilon * avg_idf
        self.idf = idf
        self._weights_cache: sp.csr_matrix | None = None
        self._term_major_cache: tuple[sp.csr_matrix, sp.csr_matrix | None] | None = None

    @property
    def has_title(self) -> bool:
        return self.title_counts is not None

    @property
    def _weights(self) -> sp.csr_matrix:
        # Computed on first query: k1/b sweeps build several of these from shared counts.
        # A race only computes the same matrix twice.
        if self._weights_cache is None:
            # Term-major counts made only for this are not kept: a serving process needs
            # the weights alone (the counts are kept when term_major_counts() was asked for).
            body, title = self._term_major_cache or self._term_major()
            self._weights_cache = field_weights(
                body, title, self.doc_len, self.title_len, self.params
            )
        return self._weights_cache

    def term_major_counts(self) -> tuple[sp.csr_matrix, sp.csr_matrix | None]:
        """(body, title) counts as term x doc CSR (row t lists the docs containing t)."""
        if self._term_major_cache is None:
            self._term_major_cache = self._term_major()
        return self._term_major_cache

    def _term_major(self) -> tuple[sp.csr_matrix, sp.csr_matrix | None]:
        title = self.title_counts.T.tocsr() if self.title_counts is not None else None
        return self.counts.T.tocsr(), title

    def _accumulate(self, query_tokens: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        scores = np.zeros(self.n_docs, dtype=np.float64)
        touched: list[np.ndarray] = []
        wt = self._weights
        # Terms in column order, as a sparse product sums them: BatchScorer gives the same bits.
        qf_of = Counter(t for t in map(self.term_index.get, query_tokens) if t is not None)
        for t, qf in sorted(qf_of.items()):
            s, e = wt.indptr[t], wt.indptr[t + 1]
            docs = wt.indices[s:e]
            scores[docs] += (qf * self.idf[t]) * wt.data[s:e]
            touched.append(docs)
        hit = np.unique(np.concatenate(touched)) if touched else np.zeros(0, dtype=np.int64)
        return scores, hit

    def get_scores(self, query_tokens: Sequence[str]) -> np.ndarray:
        """Scores of every document (like ``BM25Okapi.get_scores``)."""
        return self._accumulate(query_tokens)[0]

    def top_n(
        self, query_tokens: Sequence[str], n: int, allowed_mask: np.ndarray | None = None
    ) -> list[tuple[int, float]]:
        """Best ``n`` (doc index, score) with score > 0; ties by doc index ascending."""
        scores, hit = self._accumulate(query_tokens)
        return _top(scores, hit, n, allowed_mask)

    def to_bytes(self) -> bytes:
        """The term counts (not k1/b, which are applied at load) as an .npz payload."""
        return counts_payload(self.counts, self.terms, self.title_counts)

    @classmethod
    def from_bytes(cls, payload: bytes, k1: float, b: float) -> SparseBM25:
        """Counts saved by ``to_bytes``; ``has_title`` is False for payloads saved without."""
        counts, terms, title = read_counts_payload(payload)
        return cls(counts=counts, terms=terms, k1=k1, b=b, title_counts=title)

    def with_title(self, title_counts: sp.csr_matrix) -> SparseBM25:
        """Same corpus and parameters with this title field (counts over ``self.terms``)."""
        p = self.params
        return SparseBM25(
            counts=self.counts,
            terms=self.terms,
            k1=p.k1,
            b=p.b,
            epsilon=self.epsilon,
            title_counts=title_counts,
            title_weight=p.title_weight,
            title_b=p.title_b,
        )

    def with_params(
        self, k1: float, b: float, title_weight: float = 0.0, title_b: float = 0.75
    ) -> SparseBM25:
        """Same corpus, other parameters (shares the count matrices; recomputes the weights)."""
        out = SparseBM25(
            counts=self.counts,
            terms=self.terms,
            k1=k1,
            b=b,
            epsilon=self.epsilon,
            title_counts=self.title_counts,
            title_weight=title_weight,
            title_b=title_b,
        )
        out._term_major_cache = self._term_major_cache
        return out


class RankBM25Reference:
    """rank_bm25's BM25Okapi behind the same interface (the reference; O(N) per query)."""

    def __init__(self, docs_tokens: Sequence[Sequence[str]], k1: float = 1.5, b: float = 0.75):
        from rank_bm25 import BM25Okapi

        self.n_docs = len(docs_tokens)
        self._docs = [list(d) for d in docs_tokens]
        # BM25Okapi divides by the corpus size and the mean length: guard the empty cases.
        self._bm = BM25Okapi(self._docs, k1=k1, b=b) if any(self._docs) else None

    def get_scores(self, query_tokens: Sequence[str]) -> np.ndarray:
        if self._bm is None:
            return np.zeros(self.n_docs)
        return np.asarray(self._bm.get_scores(list(query_tokens)), dtype=np.float64)

    def top_n(
        self, query_tokens: Sequence[str], n: int, allowed_mask: np.ndarray | None = None
    ) -> list[tuple[int, float]]:
        scores = self.get_scores(query_tokens)
        return _top(scores, np.arange(self.n_docs), n, allowed_mask)


def make_bm25(
    docs_tokens: Sequence[Sequence[str]], k1: float, b: float, backend: str = "sparse"
) -> BM25Index:
    if backend == "sparse":
        return SparseBM25(docs_tokens, k1=k1, b=b)
    if backend == "rank_bm25":
        return RankBM25Reference(docs_tokens, k1=k1, b=b)
    raise ValueError(f"lexical.backend must be sparse or rank_bm25; got {backend!r}")


def _top(
    scores: np.ndarray, cand: np.ndarray, n: int, allowed_mask: np.ndarray | None
) -> list[tuple[int, float]]:
    if n <= 0 or len(cand) == 0:
        return []
    if allowed_mask is not None:
        cand = cand[allowed_mask[cand]]
    cand = cand[scores[cand] > 0]
    if len(cand) == 0:
        return []
    cand, s = top_n(cand, scores[cand], n)
    return [(int(c), float(x)) for c, x in zip(cand, s, strict=True)]


# The tokenizer's names stay importable from here (engine/tokenizer.py owns them).
__all__ = [
    "STEM_SUFFIX",
    "STOP_WORDS",
    "TOKENIZER_MODES",
    "BM25Index",
    "BM25Params",
    "RankBM25Reference",
    "SparseBM25",
    "aligned_counts",
    "count_matrix",
    "field_weights",
    "make_bm25",
    "parse_tokenizer_spec",
    "replace_rows",
    "stem_word",
    "title_tokens",
    "tokenize",
    "tokenizer_spec",
    "warm_up",
]
