"""BM25 term-count matrices of a whole index, assembled from row batches (pure, in memory).

A full build stacks the count matrices of its row batches (each over its own term list)
into one over a shared term list; an update patches the stored matrices instead
(``patched``). Either way rows end in sorted id order, as the saved caches keep them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from engine.rows import RowBatch
from engine.sparse_counts import replace_rows

# (data, column indices, indptr) of one CSR block whose columns are already remapped.
_Block = tuple[np.ndarray, np.ndarray, np.ndarray]


@dataclass
class LexicalCounts:
    """BM25 term counts (rows in sorted id order) and the title/keyword term row counts."""

    ids: list[str]
    counts: sp.csr_matrix
    terms: list[str]
    title_terms: dict[str, int]
    crumb_counts: sp.csr_matrix  # the title field over ``crumb_terms`` (not yet aligned)
    crumb_terms: list[str]


class CountsBuilder:
    """Stacks batches' count matrices into one over a shared term list (rows in KB order)."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.index: dict[str, int] = {}
        self.parts: list[_Block] = []
        self.title_terms: Counter[str] = Counter()
        self.crumb_index: dict[str, int] = {}
        self.crumb_parts: list[_Block] = []

    def add(self, batch: RowBatch, ids: Sequence[str] | None = None) -> None:
        """Add ``batch``'s rows; ``ids``: its ids (the caller's own strings) if at hand."""
        self.crumb_parts.append(_remapped(batch.crumb_counts, batch.crumb_terms, self.crumb_index))
        self.parts.append(_remapped(batch.counts, batch.terms, self.index))
        self.ids.extend(batch.ids if ids is None else ids)
        self.title_terms.update(batch.title_terms)

    def result(self) -> LexicalCounts:
        order = sorted(range(len(self.ids)), key=self.ids.__getitem__)
        row_at = np.empty(len(order), dtype=np.int64)  # KB-order row -> sorted-id row
        row_at[order] = np.arange(len(order), dtype=np.int64)
        # Each matrix is written straight into id order, its batch parts released as they
        # are copied: at 1M chapters stacking and then permuting held two more copies.
        crumbs = _in_row_order(self.crumb_parts, row_at, len(self.crumb_index))
        counts = _in_row_order(self.parts, row_at, len(self.index))
        return LexicalCounts(
            ids=[self.ids[i] for i in order],
            counts=counts,
            terms=list(self.index),
            title_terms=dict(sorted(self.title_terms.items())),
            crumb_counts=crumbs,
            crumb_terms=list(self.crumb_index),
        )


def lexical_of(batches: Iterable[RowBatch]) -> LexicalCounts:
    """The BM25 counts and title/keyword term counts of row batches (any order)."""
    counts = CountsBuilder()
    for batch in batches:
        counts.add(batch)
    return counts.result()


def _remapped(c: sp.csr_matrix, terms: Sequence[str], index: dict[str, int]) -> _Block:
    """``c``'s columns renumbered into ``index`` (new terms appended to it)."""
    col = np.fromiter(
        (index.setdefault(t, len(index)) for t in terms), dtype=np.int64, count=len(terms)
    )
    # int32 while the term list fits (it always has so far): parts are held for the whole
    # build, and int64 column numbers made them a third bigger.
    dtype = np.int32 if len(index) < 2**31 else np.int64
    return (c.data, col[c.indices].astype(dtype) if len(col) else c.indices, c.indptr)


def _in_row_order(parts: list[_Block], row_at: np.ndarray, width: int) -> sp.csr_matrix:
    """The parts stacked (rows in part order) with row ``r`` moved to ``row_at[r]``; empties
    ``parts`` as it copies them. Equal to ``vstack(parts)[argsort(row_at)]``, sorted
    indices, index arrays int32 where they fit (as scipy makes them)."""
    n = len(row_at)
    lengths = np.empty(n, dtype=np.int64)
    lengths[row_at] = np.concatenate([np.diff(p) for _, _, p in parts]) if parts else []
    nnz = int(lengths.sum())
    idx = np.int32 if max(nnz, width, n) < 2**31 else np.int64
    indptr = np.zeros(n + 1, dtype=idx)
    np.cumsum(lengths, out=indptr[1:])
    dtype = parts[0][0].dtype if parts else np.float64
    data = np.empty(nnz, dtype=dtype)
    indices = np.empty(nnz, dtype=idx)
    first = 0  # KB-order row of the part's first row
    parts.reverse()  # pop() from the end = the first part
    while parts:
        d, i, p = parts.pop()
        k = len(p) - 1
        local = np.repeat(np.arange(k), np.diff(p))  # each stored cell's row in the part
        dest = indptr[row_at[first : first + k]].astype(np.int64)[local]
        dest += np.arange(len(d), dtype=np.int64) - p[local]
        data[dest] = d
        indices[dest] = i
        first += k
        del d, i, p, local, dest
    out = sp.csr_matrix((data, indices, indptr), shape=(n, width))
    out.sort_indices()
    return out


def patched(
    prev: LexicalCounts,
    stale: Sequence[str],
    stale_titles: Mapping[str, int],
    rows: RowBatch,
) -> LexicalCounts:
    """``prev`` with the rows ``stale`` (whose title terms were ``stale_titles``) replaced
    by ``rows``: equal to counting the resulting corpus from scratch."""
    _, crumb_counts, crumb_terms = replace_rows(
        prev.ids,
        prev.crumb_counts,
        prev.crumb_terms,
        stale,
        rows.ids,
        rows.crumb_counts,
        rows.crumb_terms,
    )
    new_ids, counts, terms = replace_rows(
        prev.ids, prev.counts, prev.terms, stale, rows.ids, rows.counts, rows.terms
    )
    # Touch only the changed rows' terms: copying, sorting or filtering the whole map cost
    # seconds at 100k chapters (its order does not matter: the manifest sorts its keys).
    titles = dict(prev.title_terms)
    for t, n in stale_titles.items():
        titles[t] = titles.get(t, 0) - n
    for t, n in rows.title_terms.items():
        titles[t] = titles.get(t, 0) + n
    for t in {*stale_titles, *rows.title_terms}:
        if titles[t] <= 0:
            del titles[t]
    return LexicalCounts(new_ids, counts, terms, titles, crumb_counts, crumb_terms)


def aligned(counts: sp.csr_matrix, terms: Sequence[str], to_terms: Sequence[str]) -> sp.csr_matrix:
    """``counts`` over ``to_terms``' columns; terms not in ``to_terms`` are dropped (as
    ``sparse_counts.aligned_counts`` does for the title field)."""
    wanted = set(terms)  # usually far fewer than ``to_terms``: index only those
    index = {t: i for i, t in enumerate(to_terms) if t in wanted}
    col = np.array([index.get(t, -1) for t in terms], dtype=np.int64)
    c = counts.tocoo()
    cols = col[c.col] if len(col) else c.col
    keep = cols >= 0
    out = sp.coo_matrix(
        (c.data[keep], (c.row[keep], cols[keep])), shape=(counts.shape[0], len(to_terms))
    ).tocsr()
    out.sum_duplicates()
    out.sort_indices()
    return out
