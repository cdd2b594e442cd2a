"""What a search returns: ranked ids -> ``SearchResult`` with text, metadata and relatives.

Also the node lookups behind ``Engine.chapter()`` and friends, and the node -> metadata
mapping every client (CLI, HTTP API, MCP) shows.
"""

from __future__ import annotations

import difflib
from typing import Any

from engine.chapters import KnowledgeBase, Node
from engine.errors import UnknownNodeError
from engine.pipeline import Ranked
from engine.snapshot import IndexSnapshot
from engine.types import SearchResult

META_KEYS = (
    "file_path",
    "line",
    "anchor",
    "level",
    "keywords",
    "doc_type",
    "priority",
    "category",
)


def lookup_node(kb: KnowledgeBase, node_id: str) -> Node:
    """The node with this id, or UnknownNodeError naming the closest ids."""
    node = kb.get(node_id)
    if node is not None:
        return node
    close = difflib.get_close_matches(node_id, list(kb.nodes), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else "; list ids with `wikirag tree`"
    raise UnknownNodeError(f"unknown node id {node_id!r}{hint}")


def node_metadata(node: Node) -> dict[str, Any]:
    """A node's result metadata (``SearchResult.metadata``): the META_KEYS, in that order."""
    meta = {key: getattr(node, key) for key in META_KEYS}
    meta["keywords"] = list(node.keywords)  # a tuple on the node; JSON clients get a list
    return meta


def node_record(node: Node) -> dict[str, Any]:
    """A whole node as JSON-ready data: identity, place in the tree, text and metadata."""
    return {
        "node_id": node.node_id,
        "doc_id": node.doc_id,
        "title": node.title,
        "level": node.level,
        "parent_id": node.parent_id,
        "children_ids": list(node.children_ids),
        "breadcrumb": list(node.breadcrumb),
        "summary": node.summary,
        "content": node.content,
        "metadata": node_metadata(node),
    }


def to_result(kb: KnowledgeBase, snap: IndexSnapshot, r: Ranked, expand_mode: str) -> SearchResult:
    """One ranked item as a result; a node that left the KB keeps its indexed metadata."""
    rank_source = {"vector": r.vector_rank, "bm25": r.bm25_rank, "rerank": r.rerank_rank}
    node = kb.get(r.node_id)
    if node is None:
        m = snap.meta_row(r.node_id)
        return SearchResult(
            node_id=r.node_id,
            score=float(r.score),
            rank_source=rank_source,
            title=m.get("title", ""),
            breadcrumb=list(m.get("breadcrumb", [])),
            content="",
            summary="",
            metadata={k: m.get(k) for k in META_KEYS},
            injected_from=r.injected_from,
        )
    return SearchResult(
        node_id=node.node_id,
        score=float(r.score),
        rank_source=rank_source,
        title=node.title,
        breadcrumb=list(node.breadcrumb),
        content=node.content,
        summary=node.summary,
        metadata=node_metadata(node),
        expanded=[_brief(n, rel) for n, rel in related(kb, node, expand_mode)],
        injected_from=r.injected_from,
    )


def related(kb: KnowledgeBase, node: Node, mode: str) -> list[tuple[Node, str]]:
    """The nodes result expansion adds (``EXPAND_MODES``), each with its relation."""
    if mode == "children":
        return [(n, "child") for n in kb.children(node.node_id)]
    if mode == "siblings":
        return [(n, "sibling") for n in kb.siblings(node.node_id)]
    if mode == "parent":
        p = kb.parent(node.node_id)
        return [(p, "parent")] if p is not None else []
    return []


def _brief(node: Node, relation: str) -> dict[str, Any]:
    return {
        "node_id": node.node_id,
        "relation": relation,
        "title": node.title,
        "breadcrumb": list(node.breadcrumb),
        "level": node.level,
        "summary": node.summary,
        "content": node.content,
    }


def index_stats(snap: IndexSnapshot, fresh: bool) -> dict[str, Any]:
    """The index facts a response carries (``SearchResponse.index_stats``)."""
    m = snap.manifest
    sig = m.embedder_signature
    return {
        "rows": snap.rows,
        "table": m.table,
        "version": m.version,
        "build_id": m.build_id,
        "embedder": f"{sig.provider}/{sig.model}/{sig.dims}",
        "updated_at": m.updated_at,
        "fresh": fresh,
    }


__all__ = [
    "index_stats",
    "lookup_node",
    "node_metadata",
    "node_record",
    "related",
    "to_result",
]
