"""Sign-bit codes of unit vectors: a cheap first pass over many vectors, re-scored exactly.

With passage vectors a chapter has several vectors (its own and its passages'), and an
exact scan reads every one: on the 14k-chapter TiDB docs, 63,767 x 512 float32 (130 MB) took
~23 ms a query on one core, most of a hybrid search. A code keeps one bit per dimension,
whether the vector lies above or below the mean vector in it (64 bytes at 512 dims, 4 MB for
those 63,767); the Hamming distance between a query's code and a vector's tracks their angle.
The nearest ``candidates`` by Hamming distance are then scored exactly: a chapter scores the
exact cosine of its best vector among them. What is approximate is which vectors get scored
(a chapter whose best passage was not picked scores by its next best, or is missed).

Measured on the TiDB docs (195 FAQ questions, the vector channel's pool of 30 chapters
against the exact scan's): 2,000 candidates kept recall@30 0.995 and the exact top 10 inside
the 30 for 0.9995 of them (1,000: 0.985 / 0.997; 500: 0.954 / 0.991).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Vectors re-scored exactly per query. The same number whatever the pool asked for, so a
# search's pool of 30 is the first 30 of the deeper pool evaluation retrieves and caches:
# an evaluated config ranks as it searches. A pool deeper than the chapters those vectors
# cover comes back shorter.
RESCORE_CANDIDATES = 2000


@dataclass(frozen=True)
class SignCodes:
    """Sign-bit codes of a matrix's rows, around the rows' mean (``center``)."""

    center: np.ndarray  # float32 (dims,)
    # uint64 (ceil(dims / 64), rows): word-major, so a query XORs each word of every row as
    # one contiguous run (row-major, broadcasting 8 words a row: 1.4 vs 0.7 ms at 63,767 rows)
    codes: np.ndarray

    @classmethod
    def of(cls, *mats: np.ndarray) -> SignCodes:
        """Codes of the rows of ``mats`` stacked in order (row i of the second matrix is
        code ``len(mats[0]) + i``), without stacking the float rows."""
        rows = sum(len(m) for m in mats)
        center = (sum(m.sum(axis=0, dtype=np.float64) for m in mats) / max(rows, 1)).astype(
            np.float32
        )
        parts = [_pack(m - center) for m in mats]
        codes = np.concatenate(parts) if parts else np.zeros((0, 1), np.uint64)
        return cls(center, np.ascontiguousarray(codes.T))

    @property
    def rows(self) -> int:
        return int(self.codes.shape[1])

    def nearest(self, q: np.ndarray, n: int) -> np.ndarray:
        """Row indices, ascending, of the codes at most as far from ``q``'s (Hamming) as the
        ``n``-th nearest: at least ``n`` rows (all when there are fewer), every tie of the
        ``n``-th included, so the choice does not depend on a partition's order."""
        if n >= self.rows:
            return np.arange(self.rows)
        qc = _pack((np.asarray(q, np.float32) - self.center)[None, :])[0]
        # Word by word: each step's temporaries (one word of every row, 0.5 MB) stay in
        # cache, where XOR of the whole matrix at once wrote and re-read a 4 MB temporary:
        # 1.81 vs 2.52 ms at 63,767 rows (TiDB docs, interleaved, same results).
        dist = np.bitwise_count(self.codes[0] ^ qc[0]).astype(np.uint16)
        for word, qword in zip(self.codes[1:], qc[1:], strict=True):
            dist += np.bitwise_count(word ^ qword)
        # The n-th smallest distance from a histogram (distances are 0..bits): one pass,
        # cheaper than a partition (0.2 vs 0.5 ms at 63,767 rows).
        cumulative = np.cumsum(np.bincount(dist, minlength=64 * len(self.codes) + 1))
        return np.flatnonzero(dist <= int(np.searchsorted(cumulative, n)))


def _pack(centered: np.ndarray) -> np.ndarray:
    """One bit per dimension (1 where above the center), packed into uint64 words."""
    bits = np.packbits(centered > 0, axis=1)
    pad = (-bits.shape[1]) % 8
    if pad:
        bits = np.pad(bits, ((0, 0), (0, pad)))
    return np.ascontiguousarray(bits).view(np.uint64)


__all__ = ["RESCORE_CANDIDATES", "SignCodes"]
