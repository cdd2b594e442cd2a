"""Many BM25 queries at once under many parameter settings: one sparse product per setting.

What the optimizer and the evaluator use to re-score a question set per k1/b (the live
channel scores one query at a time with ``SparseBM25.top_n``; scores are equal bit for bit).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp

from engine.lexical import BM25Params, SparseBM25, field_weights


class BatchScorer:
    """Top-n of many queries under many parameter settings, one sparse product per setting.

    The query terms' rows of the term-major counts are cut once; a setting re-weights only
    those rows and multiplies the (query x term) matrix of qf * idf by them. Scores equal
    ``SparseBM25.with_params(...).top_n`` bit for bit (same terms summed in the same order).
    """

    def __init__(self, bm25: SparseBM25, queries: Sequence[Sequence[str]]) -> None:
        self.bm25 = bm25
        self.n_queries = len(queries)
        rows: list[int] = []
        cols: list[int] = []
        for qi, q in enumerate(queries):
            for tok in q:
                t = bm25.term_index.get(tok)
                if t is not None:
                    rows.append(qi)
                    cols.append(t)
        used = np.unique(np.asarray(cols, dtype=np.int64))
        local = np.searchsorted(used, np.asarray(cols, dtype=np.int64))
        qf = sp.coo_matrix(
            (np.ones(len(rows)), (np.asarray(rows, dtype=np.int64), local)),
            shape=(self.n_queries, len(used)),
        ).tocsr()
        qf.sum_duplicates()
        qf.sort_indices()
        qf.data = qf.data * bm25.idf[used][qf.indices]
        self._query = qf
        body, title = bm25.term_major_counts()
        self._body = body[used]
        self._title = title[used] if title is not None else None

    def top_n(
        self, params: BM25Params, n: int, allowed_mask: np.ndarray | None = None
    ) -> list[list[tuple[int, float]]]:
        """Per query, the best ``n`` (doc index, score) with score > 0, ties by doc index."""
        b = self.bm25
        weights = field_weights(self._body, self._title, b.doc_len, b.title_len, params)
        out: list[list[tuple[int, float]]] = []
        # Common query terms touch most chapters, so the score matrix is nearly dense: select
        # on dense blocks of rows (bounded memory) with one vectorised partition per block
        # instead of a Python-level top-n per query (which took most of the time).
        step = max(1, _BLOCK_CELLS // max(1, b.n_docs))
        for start in range(0, self.n_queries, step):
            block = (self._query[start : start + step] @ weights).toarray()
            out.extend(_block_top(block, n, allowed_mask))
        return out


_BLOCK_CELLS = 4_000_000  # score cells per dense block (32 MB of float64)


def _block_top(
    scores: np.ndarray, n: int, allowed_mask: np.ndarray | None
) -> list[list[tuple[int, float]]]:
    """Row-wise ``_top``: score > 0, allowed, score descending then column ascending."""
    n_rows, n_cols = scores.shape
    if n <= 0 or n_cols == 0:
        return [[] for _ in range(n_rows)]
    if allowed_mask is not None:
        scores[:, ~allowed_mask] = 0.0
    keep = scores > 0
    if n_cols > n:
        # Everything tied with the n-th best stays in, so the exact tie-break below holds.
        kth = np.partition(scores, n_cols - n, axis=1)[:, n_cols - n]
        keep &= scores >= kth[:, None]
    rows, cols = np.nonzero(keep)
    vals = scores[rows, cols]
    order = np.lexsort((cols, -vals, rows))
    rows, cols, vals = rows[order], cols[order], vals[order]
    bounds = np.searchsorted(rows, np.arange(n_rows + 1))
    cut = [(s, min(s + n, e)) for s, e in itertools.pairwise(bounds.tolist())]
    return [list(zip(cols[s:m].tolist(), vals[s:m].tolist(), strict=True)) for s, m in cut]


__all__ = ["BatchScorer"]
