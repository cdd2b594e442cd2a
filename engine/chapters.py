"""The chapter model: ``Node`` (one chapter), ``Document`` (one file), ``KnowledgeBase``.

Pure data with lookups; engine/tree.py builds them from Markdown. Node id scheme: see
engine/tree.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol


@dataclass(frozen=True)
class Problem:
    """A problem found in one input file. The KB still parses; the rest is kept."""

    file_path: str
    line: int  # 1-based; 0 when the problem concerns the whole file
    what: str
    todo: str  # what the user should do about it
    severity: str = "warning"  # "warning" | "error"

    def to_dict(self) -> dict[str, Any]:
        return {
            "file_path": self.file_path,
            "line": self.line,
            "what": self.what,
            "todo": self.todo,
            "severity": self.severity,
        }


# slots: no per-instance __dict__ (100k chapters are held by a serving process).
@dataclass(frozen=True, slots=True)
class Node:
    """One chapter of a document; level 0 is the document node itself."""

    node_id: str
    doc_id: str
    title: str
    level: int  # 0 = document node, 1..6 = heading level
    ordinal: int  # position of this node within its document, 0 = document node
    parent_id: str | None
    children_ids: tuple[str, ...]
    breadcrumb: tuple[str, ...]  # titles from the top (document title first) to this node
    line: int  # 1-based line of the heading (document node: first body line)
    anchor: str  # GitHub-style anchor (CJK kept), unique within the document
    content: str  # own text, heading line included, children excluded
    summary: str
    file_path: str  # relative to the KB root, POSIX
    frontmatter: dict[str, Any] = field(default_factory=dict)
    content_hash: str = ""

    @property
    def keywords(self) -> list[str]:
        kw = self.frontmatter.get("keywords") or []
        if isinstance(kw, str):
            kw = [k.strip() for k in kw.replace("，", ",").split(",")]
        elif not isinstance(kw, (list, tuple, set, dict)):
            kw = [kw]  # `keywords: 12` in front matter is one keyword, not a crash
        return [str(k).strip() for k in kw if str(k).strip()]

    @property
    def doc_type(self) -> str:
        return str(self.frontmatter.get("type") or "")

    @property
    def priority(self) -> str:
        return str(self.frontmatter.get("priority") or "")

    @property
    def category(self) -> str:
        return str(self.frontmatter.get("category") or "")


@dataclass(frozen=True)
class Document:
    doc_id: str
    file_path: str
    frontmatter: dict[str, Any]
    nodes: tuple[Node, ...]  # document order; nodes[0] is the document node
    problems: tuple[Problem, ...] = ()
    # Hash of the file's bytes: an index reuses the node hashes of a file whose bytes it has
    # seen before, so an update costs in proportion to the files that changed.
    source_hash: str = ""


class DocumentSource(Protocol):
    """Where ``parse_kb`` gets documents of unchanged files (see engine/parse_cache.py)."""

    def document(self, path: str | Path, rel_path: str) -> Document: ...

    def keep_only(self, rel_paths: set[str]) -> None: ...


@dataclass(frozen=True)
class KnowledgeBase:
    """All documents of a KB folder, in sorted path order, with node lookups."""

    root: str
    documents: tuple[Document, ...]
    problems: tuple[Problem, ...] = ()

    def __post_init__(self) -> None:
        index = {node.node_id: node for doc in self.documents for node in doc.nodes}
        object.__setattr__(self, "_index", index)

    @property
    def nodes(self) -> dict[str, Node]:
        """node_id -> Node, in document order."""
        return self._index  # type: ignore[attr-defined,no-any-return]

    def __contains__(self, node_id: object) -> bool:
        return node_id in self.nodes

    def get(self, node_id: str) -> Node | None:
        return self.nodes.get(node_id)

    def children(self, node_id: str) -> list[Node]:
        node = self.nodes.get(node_id)
        return [self.nodes[c] for c in node.children_ids] if node else []

    def parent(self, node_id: str) -> Node | None:
        node = self.nodes.get(node_id)
        return self.nodes.get(node.parent_id) if node and node.parent_id else None

    def siblings(self, node_id: str) -> list[Node]:
        parent = self.parent(node_id)
        if parent is None:
            return []
        return [self.nodes[c] for c in parent.children_ids if c != node_id]

    def ancestors(self, node_id: str) -> list[Node]:
        """Parent first, document node last."""
        out: list[Node] = []
        cur = self.parent(node_id)
        while cur is not None:
            out.append(cur)
            cur = self.parent(cur.node_id)
        return out

    def stats(self) -> dict[str, int]:
        chapters = [n for n in self.nodes.values() if n.level > 0]
        return {
            "totalDocuments": len(self.documents),
            "totalChapters": len(chapters),
            "maxDepth": max((n.level for n in chapters), default=0),
        }


__all__ = ["Document", "DocumentSource", "KnowledgeBase", "Node", "Problem"]
