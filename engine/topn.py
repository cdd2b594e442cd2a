"""Exact top-n selection shared by the BM25 and vector channels."""

from __future__ import annotations

import numpy as np


def top_n(cand: np.ndarray, scores: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``n`` best of ``cand`` (row indices) by ``scores``: score descending, then index
    ascending, so equal scores always come out in the same order.

    An O(len) partition keeps every candidate tied with the n-th best before the exact
    sort, so the tie-break stays exact without sorting everything.
    """
    if n <= 0 or len(cand) == 0:
        return cand[:0], scores[:0]
    if len(cand) > n:
        kth = np.partition(scores, len(scores) - n)[len(scores) - n]
        keep = scores >= kth
        cand, scores = cand[keep], scores[keep]
    order = np.lexsort((cand, -scores))[:n]
    return cand[order], scores[order]
