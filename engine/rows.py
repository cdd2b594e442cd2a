"""Chapter rows: the texts, tokens, hashes and metadata of a node, built in batches.

Pure (no LanceDB): ``build_rows`` runs in worker processes during a big build, so this
module imports only what a worker needs. A batch comes back as an Arrow table of every
column but the vector (the embedder adds that in the main process), the batch's BM25 term
counts with its own term list, and how many rows each title/keyword term appears in (the
expansion vocabulary keeps those terms whatever their frequency).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import scipy.sparse as sp

from engine.chapters import Node
from engine.config import EngineConfig
from engine.lexical import title_tokens
from engine.passages import passage_texts
from engine.sparse_counts import count_matrix
from engine.tokenizer import tokenize

# Bump when the embedded/lexical text layout changes: every row hash changes with it.
TEXT_LAYOUT = "v1"

# Every column of a chapter row except "vector", in the table's order (store.chapter_schema).
ROW_FIELDS: tuple[tuple[str, pa.DataType], ...] = (
    ("id", pa.string()),
    ("text", pa.string()),
    ("tokens", pa.string()),
    ("doc_id", pa.string()),
    ("title", pa.string()),
    ("level", pa.int32()),
    ("ordinal", pa.int32()),
    ("parent_id", pa.string()),
    ("breadcrumb", pa.string()),
    ("file_path", pa.string()),
    ("line", pa.int32()),
    ("anchor", pa.string()),
    ("category", pa.string()),
    ("priority", pa.string()),
    ("doc_type", pa.string()),
    ("keywords", pa.list_(pa.string())),
    ("content_hash", pa.string()),
    ("row_hash", pa.string()),
)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:20]


def embed_text(node: Node, content_chars: int, summary: str | None = None) -> str:
    """The text a chapter is embedded as (path, breadcrumb title, summary, head of content).

    ``summary`` replaces the node's own (extractive) summary: an LLM summary, see
    ``index.use_summaries``.
    """
    return (
        f"path: {node.file_path}\n"
        f"title: {' > '.join(node.breadcrumb)}\n"
        f"summary: {node.summary if summary is None else summary}\n"
        f"{node.content[:content_chars]}"
    )


def lexical_text(node: Node, summary: str | None = None) -> str:
    """The text BM25 sees: the same header as the embedded text, with the whole content."""
    return (
        f"path: {node.file_path}\n"
        f"title: {' > '.join(node.breadcrumb)}\n"
        f"summary: {node.summary if summary is None else summary}\n"
        f"{node.content}"
    )


def summary_key(node: Node) -> str:
    """The key of a chapter in the LLM summary cache (workbench/answer/summaries.py): its content hash."""
    return node.content_hash or hashlib.sha256(node.content.encode("utf-8")).hexdigest()[:16]


def node_summary(node: Node, summaries: Mapping[str, str] | None) -> str | None:
    return summaries.get(summary_key(node)) if summaries else None


def row_meta(node: Node) -> dict[str, Any]:
    return {
        "doc_id": node.doc_id,
        "title": node.title,
        "level": int(node.level),
        "ordinal": int(node.ordinal),
        "parent_id": node.parent_id,
        "breadcrumb": json.dumps(list(node.breadcrumb), ensure_ascii=False),
        "file_path": node.file_path,
        "line": int(node.line),
        "anchor": node.anchor,
        "category": node.category,
        "priority": node.priority,
        "doc_type": node.doc_type,
        "keywords": list(node.keywords),
    }


def node_hashes(
    node: Node, cfg: EngineConfig, summaries: Mapping[str, str] | None = None
) -> tuple[str, str]:
    """(hash of the embedded text, hash of everything else the row holds)."""
    summary = node_summary(node, summaries)
    meta = json.dumps(row_meta(node), ensure_ascii=False, sort_keys=True, default=str)
    row = "\x00".join([TEXT_LAYOUT, cfg.lexical.tokenizer_spec, lexical_text(node, summary), meta])
    embedded = embed_text(node, cfg.index.content_chars, summary)
    passages = node_passages(node, cfg)
    if passages:  # the passages are embedded too: a change to them re-embeds the chapter
        embedded = "\x00".join([embedded, *passages])
    return _sha(embedded), _sha(row)


def node_passages(node: Node, cfg: EngineConfig) -> list[str]:
    """The texts of a chapter's passage vectors (none when ``index.passage_chars`` is 0)."""
    return passage_texts(node, cfg.index.passage_chars, cfg.index.passage_overlap)


def title_terms(node: Node, memo: dict[str, list[str]] | None = None) -> set[str]:
    """Terms of the node's title and keywords (always offered to query expansion).

    Segmented in jieba's search mode whatever ``lexical.tokenizer`` says, as the vocabulary
    always was.
    """
    return title_terms_of(node.title, node.keywords, memo)


def title_terms_of(
    title: str | None, keywords: Sequence[str] | None, memo: dict[str, list[str]] | None = None
) -> set[str]:
    """``title_terms`` from a stored row's title and keywords."""
    memo = {} if memo is None else memo
    out: set[str] = set()
    for text in (title or "", *(keywords or ())):
        toks = memo.get(text)
        if toks is None:
            toks = memo[text] = tokenize(text)
        out.update(toks)
    return out


@dataclass(frozen=True)
class RowBatch:
    """Rows of a batch of nodes (in the nodes' order) without their vectors."""

    columns: pa.Table  # ROW_FIELDS
    counts: sp.csr_matrix  # row i = node i; columns = ``terms``
    terms: list[str]
    title_terms: Counter[str]  # term -> rows of this batch whose title/keywords give it
    embed_texts: list[str]
    passage_texts: list[list[str]]  # each node's passages (engine/passages.py), maybe none
    # The BM25 title field (breadcrumb tokens), over its own term list: it is aligned to the
    # body's terms only when saved, so an update can patch it like the body.
    crumb_counts: sp.csr_matrix
    crumb_terms: list[str]

    @property
    def ids(self) -> list[str]:
        return self.columns.column("id").to_pylist()  # type: ignore[no-any-return]


def build_rows(
    nodes: Sequence[Node],
    cfg: EngineConfig,
    summaries: Mapping[str, str] | None = None,
    hashes: Sequence[tuple[str, str]] | None = None,
) -> RowBatch:
    """Texts, jieba tokens, hashes and metadata of ``nodes`` (hashes computed if not given)."""
    cols: dict[str, list[Any]] = {name: [] for name, _ in ROW_FIELDS}
    docs: list[list[str]] = []
    texts: list[str] = []
    passages: list[list[str]] = []
    title_count: Counter[str] = Counter()
    memo: dict[str, list[str]] = {}
    tokenizer = cfg.lexical.tokenizer_spec
    for i, node in enumerate(nodes):
        summary = node_summary(node, summaries)
        tokens = tokenize(lexical_text(node, summary), tokenizer)
        docs.append(tokens)
        text = embed_text(node, cfg.index.content_chars, summary)
        texts.append(text)
        passages.append(node_passages(node, cfg))
        h = hashes[i] if hashes is not None else node_hashes(node, cfg, summaries)
        row = {
            "id": node.node_id,
            "text": text,
            "tokens": " ".join(tokens),
            **row_meta(node),
            "content_hash": h[0],
            "row_hash": h[1],
        }
        for name in cols:
            cols[name].append(row[name])
        title_count.update(title_terms(node, memo))
    table = pa.table(
        {name: pa.array(cols[name], type=typ) for name, typ in ROW_FIELDS},
        schema=pa.schema([pa.field(n, t) for n, t in ROW_FIELDS]),
    )
    counts, terms = count_matrix(docs)
    crumbs, crumb_terms = count_matrix(title_tokens([n.breadcrumb for n in nodes], tokenizer))
    return RowBatch(table, counts, terms, title_count, texts, passages, crumbs, crumb_terms)
