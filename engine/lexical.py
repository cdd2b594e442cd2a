"""jieba tokenizer and BM25 over a scipy.sparse term-document matrix.

``SparseBM25`` scores exactly like rank_bm25's ``BM25Okapi`` (same idf, same epsilon floor
for negative idf, same length normalisation) but keeps the per-(term, doc) weights in a
term-major CSR matrix, so a query costs one row slice per query term instead of a Python
loop over every document. rank_bm25 stays available as ``backend: rank_bm25`` to check it.
"""

from __future__ import annotations

import io
import json
import re
import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

import numpy as np
import scipy.sparse as sp

from engine.topn import top_n

TOKENIZER_MODES = ("jieba-search", "jieba")

# Function words that carry no topic: dropped from documents and queries alike so a question
# like "如何…？" does not rank chapters by how often they say "如何".
_STOP_TEXT = """
    的 了 是 在 和 与 及 或 也 就 都 而 把 被 对 为 从 以 之 其 这 那 有 吗 呢 吧 啊 呀 么
    我 你 他 她 它 我们 你们 他们 什么 怎么 怎样 如何 哪些 哪个 为什么 是否 可以 一个 一些
    很多 一下 哪里 多少 还是 还有 应该 需要 时候 这个 那个 这些 那些 所以 但是 因为 如果
    a an the of to in on at by for with and or is are was were be been it this that these
    those as from what which how why do does can
    i me my we us our you your he she his her they them their its not no yes will would
    should could may might must shall has have had did so if then than there here when
    where who whom whose into about over under up down out just only also very more most
    many much few some any all each every other such own same too both between after
    before while because through during without within per via etc
"""
STOP_WORDS = frozenset(_STOP_TEXT.split())

_PUNCT_ONLY = re.compile(r"^[\W_]+$")
_jieba_lock = threading.Lock()
_jieba_ready = False


def _jieba() -> Any:
    """Import and initialise jieba once, without its "Building prefix dict" chatter."""
    global _jieba_ready
    import jieba

    if not _jieba_ready:
        with _jieba_lock:
            if not _jieba_ready:
                jieba.setLogLevel(60)
                jieba.initialize()
                _jieba_ready = True
    return jieba


def warm_up() -> None:
    """Load jieba's dictionary now (about 0.5 s) instead of during the first query."""
    _jieba()


def tokenize(text: str, mode: str = "jieba-search") -> list[str]:
    """Segment ``text`` with jieba; lowercase; drop whitespace, punctuation and stop words."""
    if mode not in TOKENIZER_MODES:
        raise ValueError(f"tokenizer must be one of {', '.join(TOKENIZER_MODES)}; got {mode!r}")
    jieba = _jieba()
    lowered = text.lower()
    raw = jieba.cut_for_search(lowered) if mode == "jieba-search" else jieba.cut(lowered)
    out = []
    for tok in raw:
        tok = tok.strip()
        if not tok or tok in STOP_WORDS or _PUNCT_ONLY.match(tok):
            continue
        out.append(tok)
    return out


class BM25Index(Protocol):
    """What the search engine needs from a BM25 backend."""

    n_docs: int

    def top_n(
        self, query_tokens: Sequence[str], n: int, allowed_mask: np.ndarray | None = None
    ) -> list[tuple[int, float]]: ...

    def get_scores(self, query_tokens: Sequence[str]) -> np.ndarray: ...


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


class SparseBM25:
    """BM25Okapi scores (rank_bm25 0.2.2 formulas) from a sparse term-document matrix.

    idf(t) = ln(N - df + 0.5) - ln(df + 0.5); a negative idf is replaced by
    epsilon * mean(idf) (rank_bm25's floor). score(q, d) = sum over query tokens t (repeats
    count) of idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * |d| / avgdl)).
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
    ) -> None:
        if (docs_tokens is None) == (counts is None):
            raise ValueError("pass either docs_tokens or counts= with terms=")
        if counts is None:
            counts, terms = count_matrix(docs_tokens or [])
        if terms is None or len(terms) != counts.shape[1]:
            raise ValueError("terms= must name every column of counts=")
        self.k1, self.b, self.epsilon = float(k1), float(b), float(epsilon)
        self.counts: sp.csr_matrix = counts
        self.terms: list[str] = list(terms)
        self.term_index = {t: i for i, t in enumerate(self.terms)}
        self.n_docs = counts.shape[0]
        self.doc_len = np.asarray(counts.sum(axis=1)).ravel()
        self.avgdl = float(self.doc_len.sum() / self.n_docs) if self.n_docs else 0.0
        df = np.bincount(counts.indices, minlength=counts.shape[1]).astype(np.float64)
        idf = np.log(self.n_docs - df + 0.5) - np.log(df + 0.5)
        avg_idf = float(idf.mean()) if len(idf) else 0.0
        idf[idf < 0] = self.epsilon * avg_idf
        self.idf = idf
        self._weights_cache: sp.csr_matrix | None = None

    @property
    def _weights(self) -> sp.csr_matrix:
        # Computed on first query: k1/b sweeps build several of these from shared counts.
        # A race only computes the same matrix twice.
        if self._weights_cache is None:
            self._weights_cache = self._term_major_weights()
        return self._weights_cache

    def _term_major_weights(self) -> sp.csr_matrix:
        c = self.counts
        if self.avgdl == 0.0:
            return sp.csr_matrix((c.shape[1], c.shape[0]), dtype=np.float64)
        row_of = np.repeat(np.arange(c.shape[0]), np.diff(c.indptr))
        tf = c.data
        norm = self.k1 * (1 - self.b + self.b * self.doc_len[row_of] / self.avgdl)
        w = tf * (self.k1 + 1) / (tf + norm)
        weighted = sp.csr_matrix((w, c.indices, c.indptr), shape=c.shape)
        return weighted.T.tocsr()  # term-major: row t lists the docs containing t

    def _accumulate(self, query_tokens: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        scores = np.zeros(self.n_docs, dtype=np.float64)
        touched: list[np.ndarray] = []
        wt = self._weights
        for tok, qf in Counter(query_tokens).items():
            t = self.term_index.get(tok)
            if t is None:
                continue
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
        buf = io.BytesIO()
        c = self.counts
        np.savez(
            buf,
            data=c.data,
            indices=c.indices,
            indptr=c.indptr,
            shape=np.array(c.shape, dtype=np.int64),
            terms=np.frombuffer(json.dumps(self.terms, ensure_ascii=False).encode(), np.uint8),
        )
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, payload: bytes, k1: float, b: float) -> SparseBM25:
        z = np.load(io.BytesIO(payload))
        counts = sp.csr_matrix(
            (z["data"], z["indices"], z["indptr"]), shape=tuple(int(x) for x in z["shape"])
        )
        terms = json.loads(z["terms"].tobytes().decode())
        return cls(counts=counts, terms=terms, k1=k1, b=b)

    def with_params(self, k1: float, b: float) -> SparseBM25:
        """Same corpus, other k1/b (shares the count matrix; recomputes the weights)."""
        return SparseBM25(counts=self.counts, terms=self.terms, k1=k1, b=b, epsilon=self.epsilon)


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
