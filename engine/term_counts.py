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

    def add(self, batch: RowBatch) -> None:
        self.crumb_parts.append(_remapped(batch.crumb_counts, batch.crumb_terms, self.crumb_index))
        self.parts.append(_remapped(batch.counts, batch.terms, self.index))
        self.ids.extend(batch.ids)
        self.title_terms.update(batch.title_terms)

    def result(self) -> LexicalCounts:
        crumbs = _stacked(self.crumb_parts, len(self.crumb_index))
        self.crumb_parts = []
        stacked = _stacked(self.parts, len(self.index))
        self.parts = []
        order = sorted(range(len(self.ids)), key=self.ids.__getitem__)
        take = np.array(order, dtype=np.int64)
        counts = stacked[take]
        counts.sort_indices()
        crumbs = crumbs[take]
        crumbs.sort_indices()
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
    return (c.data, col[c.indices] if len(col) else c.indices, c.indptr)


def _stacked(parts: Sequence[_Block], width: int) -> sp.csr_matrix:
    mats = [sp.csr_matrix((d, i, p), shape=(len(p) - 1, width)) for d, i, p in parts]
    if not mats:
        return sp.csr_matrix((0, width), dtype=np.float64)
    return sp.vstack(mats, format="csr")


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
    ``lexical.aligned_counts`` does for the title field)."""
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
