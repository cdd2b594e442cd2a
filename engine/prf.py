"""Pseudo-relevance feedback for the keyword channel: RM3 over the sparse BM25 index.

A first BM25 pass ranks the chapters; the top ``prf_docs`` are taken as relevant and lend
the query the terms they share (Lavrenko & Croft 2001's relevance model, interpolated with
the original query as RM3 does: Abdul-Jaleel et al., UMass at TREC 2004). A term's
relevance weight is

    r(t) = idf(t) * sum over feedback chapters d of  p(d) * tf(t, d) / |d|

with p(d) the chapter's first-pass score over the feedback chapters' sum; the ``prf_terms``
best terms that are not the query's own (nor stop words, nor bare numbers) become
P(t|R) = r(t) / sum r. The second pass scores BM25 with query weights

    (1 - prf_weight) * qf(t) / |q|  +  prf_weight * P(t|R)

times |q| (so the scores keep the first pass's scale). Tokens are whatever the index holds
(jieba words for Chinese, optionally stemmed English), so it works alike for both.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from engine.config import LexicalConfig
from engine.lexical import BM25Index, SparseBM25
from engine.tokenizer import STOP_WORDS


def expansion_weights(
    index: SparseBM25,
    query_tokens: Sequence[str],
    feedback: Sequence[tuple[int, float]],
    n_terms: int,
) -> dict[int, float]:
    """Column -> P(t|R) of the ``n_terms`` best feedback terms (sums to 1; empty if none)."""
    scores = np.array([s for _, s in feedback], dtype=np.float64)
    if len(feedback) == 0 or n_terms <= 0 or scores.sum() <= 0:
        return {}
    docs = np.array([d for d, _ in feedback], dtype=np.int64)
    lengths = index.doc_len[docs].astype(np.float64)
    # p(d) / |d| per feedback chapter, spread over that chapter's stored counts.
    per_doc = np.divide(
        scores / scores.sum(), lengths, out=np.zeros_like(lengths), where=lengths > 0
    )
    counts = index.counts
    starts, ends = counts.indptr[docs], counts.indptr[docs + 1]
    cols = np.concatenate([counts.indices[s:e] for s, e in zip(starts, ends, strict=True)])
    if len(cols) == 0:
        return {}
    tf = np.concatenate([counts.data[s:e] for s, e in zip(starts, ends, strict=True)])
    share = np.repeat(per_doc, ends - starts)
    terms, where = np.unique(cols, return_inverse=True)
    r = np.bincount(where, weights=tf * share) * index.idf[terms]
    own = {index.term_index.get(t) for t in query_tokens}
    order = np.lexsort((terms, -r))  # best first; ties by column
    ranked: list[tuple[float, int]] = []
    for i in order:
        col = int(terms[i])
        if r[i] <= 0 or len(ranked) == n_terms:
            break
        if col not in own and _useful(index.terms[col]):
            ranked.append((float(r[i]), col))
    total = sum(w for w, _ in ranked)
    if total <= 0:
        return {}
    return {col: w / total for w, col in ranked}


def _useful(term: str) -> bool:
    # Stop words are dropped at tokenization already; an index built with an older list may
    # hold some. Bare numbers (versions, counts) rarely say what a chapter is about.
    return term not in STOP_WORDS and not term.isdigit()


def feedback_query(
    index: SparseBM25, query_tokens: Sequence[str], expansion: dict[int, float], weight: float
) -> dict[int, float]:
    """RM3's interpolated query: column -> weight (see the module docstring)."""
    qf = Counter(c for c in map(index.term_index.get, query_tokens) if c is not None)
    size = sum(qf.values())
    out = {c: (1.0 - weight) * n for c, n in qf.items()}
    for col, p in expansion.items():
        out[col] = out.get(col, 0.0) + weight * p * size
    return out


def top_n(
    index: BM25Index,
    query_tokens: Sequence[str],
    n: int,
    allowed_mask: np.ndarray | None,
    lex: LexicalConfig,
) -> list[tuple[int, float]]:
    """The keyword channel's best ``n``: BM25, then RM3 feedback when ``lex.prf_on``.

    Feedback needs the index's term counts: the reference backend (rank_bm25) is scored
    without it. With feedback off this is ``index.top_n`` itself.
    """
    if not lex.prf_on or not isinstance(index, SparseBM25):
        return index.top_n(query_tokens, n, allowed_mask)
    first = index.top_n(query_tokens, max(n, lex.prf_docs), allowed_mask)
    expansion = expansion_weights(index, query_tokens, first[: lex.prf_docs], lex.prf_terms)
    if not expansion:
        return first[:n]
    weights = feedback_query(index, query_tokens, expansion, lex.prf_weight)
    return index.top_n_weighted(weights, n, allowed_mask)


__all__ = ["expansion_weights", "feedback_query", "top_n"]
