"""Query expansion: the KB's own terms that an embedder finds close to the query's terms.

At index time the KB vocabulary (distinct jieba terms that recur, plus the terms of titles
and frontmatter keywords) is embedded once and saved with the index. At query time each
jieba term of the query is embedded (one batched call) and matched against it by cosine
similarity. The expanded query feeds BM25 only; the vector channel sees the original query.
When there is no vocabulary, a small built-in RAG-domain synonym dictionary stands in.
"""

from __future__ import annotations

import io
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

import numpy as np

from engine.config import ExpansionConfig
from engine.tokenizer import STOP_WORDS, tokenize
from engine.types import Embedder

DEFAULT_VOCAB_CAP = 20_000
MIN_TERM_CHARS = 2
MIN_TERM_DOCS = 2

_NUMERIC = re.compile(r"^[\d.,:%+\-/]+$")

# Groups of interchangeable terms in the RAG domain (Chinese and English). Lowercase.
FALLBACK_SYNONYMS: tuple[tuple[str, ...], ...] = (
    ("检索", "搜索", "召回", "retrieval", "search"),
    ("向量", "embedding", "嵌入", "向量化"),
    ("重排", "rerank", "精排", "重排序", "reranker"),
    ("切块", "分块", "切分", "chunking", "chunk"),
    ("知识库", "wiki", "文档库"),
    ("大模型", "llm", "大语言模型", "语言模型"),
    ("提示词", "prompt", "提示模板"),
    ("评估", "评测", "evaluation"),
    ("黄金集", "golden set", "标注集", "测试集"),
    ("召回率", "recall"),
    ("准确率", "precision", "精确率"),
    ("上下文", "context"),
    ("关键词", "keyword", "bm25", "全文检索"),
    ("幻觉", "hallucination"),
    ("引用", "citation", "出处"),
    ("智能体", "agent"),
    ("工具调用", "tool calling", "function calling"),
    ("查询扩展", "query expansion", "查询改写", "query rewrite"),
    ("融合", "fusion", "rrf"),
    ("父子", "parent-child", "父子块"),
)


def is_vocab_term(term: str) -> bool:
    """A term worth offering as an expansion: 2+ characters and not just a number."""
    return len(term) >= MIN_TERM_CHARS and not _NUMERIC.match(term)


@dataclass(frozen=True)
class Vocabulary:
    """KB terms and their unit-length embeddings (row i embeds terms[i])."""

    terms: tuple[str, ...]
    vectors: np.ndarray  # float32 (len(terms), dims)
    signature: str = ""  # "provider/model/dims" of the embedder that made the vectors

    row_of: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.vectors.shape[0] != len(self.terms):
            raise ValueError("Vocabulary needs one vector per term")
        object.__setattr__(self, "row_of", {t: i for i, t in enumerate(self.terms)})

    def __len__(self) -> int:
        return len(self.terms)

    def terms_json(self) -> str:
        return json.dumps(
            {"signature": self.signature, "terms": list(self.terms)}, ensure_ascii=False
        )

    def vectors_npy(self) -> bytes:
        buf = io.BytesIO()
        np.save(buf, np.asarray(self.vectors, dtype=np.float32))
        return buf.getvalue()

    @classmethod
    def from_files(cls, terms_json: str, vectors_npy: bytes) -> Vocabulary:
        meta = json.loads(terms_json)
        vectors = np.load(io.BytesIO(vectors_npy))
        return cls(tuple(meta["terms"]), vectors, meta.get("signature", ""))


def vocabulary_terms(
    docs_tokens: Iterable[Sequence[str]],
    always: Iterable[str] = (),
    *,
    min_docs: int = MIN_TERM_DOCS,
    cap: int = DEFAULT_VOCAB_CAP,
) -> list[str]:
    """Distinct terms in >= ``min_docs`` documents, plus ``always`` (title/keyword terms).

    Capped at the ``cap`` most frequent by document frequency (ties alphabetical);
    ``always`` terms count as frequent as the most frequent term, so they are kept first.
    """
    df: Counter[str] = Counter()
    for doc in docs_tokens:
        df.update({t for t in doc if is_vocab_term(t)})
    return vocabulary_from_df(df, always, min_docs=min_docs, cap=cap)


def vocabulary_from_df(
    df: Mapping[str, int],
    always: Iterable[str] = (),
    *,
    min_docs: int = MIN_TERM_DOCS,
    cap: int = DEFAULT_VOCAB_CAP,
) -> list[str]:
    """``vocabulary_terms`` from document frequencies already counted (e.g. a BM25 matrix).

    Terms that are not vocabulary terms (``is_vocab_term``) are ignored, whatever their df.
    """
    keep = {t: n for t, n in df.items() if n >= min_docs and n > 0 and is_vocab_term(t)}
    # A kept term is at least as frequent as any term left out, so its max is the max.
    top = (
        max(keep.values())
        if keep
        else max((n for t, n in df.items() if is_vocab_term(t)), default=0)
    )
    top += 1
    for t in always:
        if is_vocab_term(t):
            keep[t] = top
    ranked = sorted(keep.items(), key=lambda kv: (-kv[1], kv[0]))
    return [t for t, _ in ranked[:cap]]


def vocabulary_from_counts(
    terms: Sequence[str],
    df: np.ndarray,
    always: Iterable[str] = (),
    *,
    min_docs: int = MIN_TERM_DOCS,
    cap: int = DEFAULT_VOCAB_CAP,
) -> list[str]:
    """``vocabulary_from_df`` for ``df[i]`` = document frequency of ``terms[i]``, same result.

    Looks only at the most frequent terms (in numpy) instead of every term of the corpus:
    at 100k chapters, 100k terms in Python took 0.4 s per index update.
    """
    firsts = sorted({t for t in always if is_vocab_term(t)})
    if len(firsts) >= cap:
        return firsts[:cap]
    need, skip = cap - len(firsts), set(firsts)
    cand = np.flatnonzero(df >= max(min_docs, 1))
    cand = cand[np.argsort(-df[cand], kind="stable")]
    picked: list[tuple[int, str]] = []
    last = None
    for i in cand.tolist():
        n = int(df[i])
        if len(picked) >= need and n != last:
            break  # every term as frequent as the last one picked is in (ties sort by term)
        t = terms[i]
        if t not in skip and is_vocab_term(t):
            picked.append((-n, t))
            last = n
    return firsts + [t for _, t in sorted(picked)[:need]]


def embed_vocabulary(
    terms: Sequence[str],
    embedder: Embedder,
    *,
    reuse: Vocabulary | None = None,
    batch: int = 512,
    progress: Callable[[int, int], None] | None = None,
) -> Vocabulary:
    """Embed ``terms`` (reusing vectors from ``reuse`` when made by the same embedder)."""
    sig = embedder.signature
    sig_text = f"{sig.provider}/{sig.model}/{sig.dims}"
    known: dict[str, np.ndarray] = {}
    if reuse is not None and reuse.signature == sig_text:
        known = {t: reuse.vectors[i] for i, t in enumerate(reuse.terms)}
    missing = [t for t in terms if t not in known]
    fresh: dict[str, np.ndarray] = {}
    for start in range(0, len(missing), batch):
        chunk = missing[start : start + batch]
        vecs = np.asarray(embedder.embed_documents(list(chunk)), dtype=np.float32)
        fresh.update(zip(chunk, vecs, strict=True))
        if progress:
            progress(min(start + batch, len(missing)), len(missing))
    rows = [fresh[t] if t in fresh else known[t] for t in terms]
    vectors = np.stack(rows) if rows else np.zeros((0, sig.dims), dtype=np.float32)
    return Vocabulary(tuple(terms), vectors.astype(np.float32), sig_text)


def query_terms(query: str, mode: str = "jieba-search") -> list[str]:
    """The distinct vocabulary-eligible jieba terms of the query, in order."""
    return list(dict.fromkeys(t for t in tokenize(query, mode) if is_vocab_term(t)))


def expand(
    query: str,
    embedder_or_fn: Embedder | Callable[[list[str]], np.ndarray],
    vocab: Vocabulary | None,
    threshold: float,
    max_terms: int,
    *,
    mode: str = "jieba-search",
) -> list[str]:
    """Vocabulary terms with cosine >= ``threshold`` to some query term, best first.

    Skipped: terms already in the query (as a token or a substring) and terms containing a
    query term ("检索系统" for "检索": jieba's search mode already indexes the sub-word, so
    it would add nothing but noise). Each candidate keeps its best similarity over the
    query terms; ties are broken alphabetically.
    Query terms already in the vocabulary reuse its vectors (same embedder, same text);
    the others are embedded in one ``embed_documents`` call.
    """
    if vocab is None or len(vocab) == 0 or max_terms <= 0:
        return []
    terms = query_terms(query, mode)
    if not terms:
        return []
    # An embedder's embed_documents, or the function given (tests pass a plain function).
    fn = cast(
        Callable[[list[str]], np.ndarray],
        getattr(embedder_or_fn, "embed_documents", embedder_or_fn),
    )
    qvecs = np.zeros((len(terms), vocab.vectors.shape[1]), dtype=np.float32)
    unknown = [i for i, t in enumerate(terms) if t not in vocab.row_of]
    for i, t in enumerate(terms):
        if t in vocab.row_of:
            qvecs[i] = vocab.vectors[vocab.row_of[t]]
    if unknown:
        qvecs[unknown] = np.asarray(fn([terms[i] for i in unknown]), dtype=np.float32)
    # (n query terms, n vocab terms); einsum avoids BLAS threads (see IndexSnapshot.vector_top)
    sims = np.einsum("ij,kj->ik", qvecs, vocab.vectors)
    best = sims.max(axis=0)
    lowered = query.lower()
    present = set(terms)
    hits = np.flatnonzero(best >= threshold)
    scored = [
        (float(best[i]), vocab.terms[i])
        for i in hits
        if not _redundant(vocab.terms[i], present, lowered)
    ]
    scored.sort(key=lambda st: (-st[0], st[1]))
    return [t for _, t in scored[:max_terms]]


def _redundant(term: str, query_terms: set[str], lowered_query: str) -> bool:
    # Stop words can sit in a vocabulary built before they joined the list.
    if term in STOP_WORDS:
        return True
    return term in query_terms or term in lowered_query or any(q in term for q in query_terms)


def fallback_expand(query: str, max_terms: int, *, mode: str = "jieba-search") -> list[str]:
    """Synonyms from ``FALLBACK_SYNONYMS`` for the groups the query mentions, in group order."""
    if max_terms <= 0:
        return []
    lowered = query.lower()
    tokens = set(tokenize(query, mode))
    out: list[str] = []
    for group in FALLBACK_SYNONYMS:
        if not any(term in tokens or term in lowered for term in group):
            continue
        for term in group:
            if term not in lowered and term not in out:
                out.append(term)
    return out[:max_terms]


def expand_query(
    query: str,
    cfg: ExpansionConfig,
    embedder_or_fn: Embedder | Callable[[list[str]], np.ndarray] | None,
    vocab: Vocabulary | None,
    *,
    mode: str = "jieba-search",
) -> list[str]:
    """Expansion terms under ``cfg``: the KB vocabulary if there is one, else the dictionary."""
    if not cfg.enabled or cfg.max_terms <= 0:
        return []
    if vocab is not None and len(vocab) > 0 and embedder_or_fn is not None:
        return expand(query, embedder_or_fn, vocab, cfg.threshold, cfg.max_terms, mode=mode)
    if cfg.use_fallback_dictionary:
        return fallback_expand(query, cfg.max_terms, mode=mode)
    return []
