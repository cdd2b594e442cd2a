"""``chapter_trees.json``: export a parsed KB in the seed system's schema, and read it back.

Schema (version "1.0")::

    {
      "generatedAt": "2025-01-01T00:00:00Z",          # ISO 8601, UTC
      "version": "1.0",
      "root": "wiki",                                  # KB folder it was parsed from (extra)
      "statistics": {"totalDocuments", "totalChapters", "maxDepth"},
      "documents": [{
        "docId", "filePath", "frontmatter",
        "title", "line", "summary", "content_hash",    # the document node (extra keys)
        "chapters": [{"id", "node_id", "title", "level", "ordinal", "parentId", "line",
                      "anchor", "summary", "breadcrumb", "file_path", "children_ids",
                      "content_hash"}]
      }],
      "problems": [{"file_path", "line", "what", "todo", "severity"}]
    }

Decision: ``chapters`` lists heading nodes only (level >= 1) and ``totalChapters`` counts
them (as ``KnowledgeBase.stats`` does); the document node (level 0) is described by the
document entry itself, and top-level chapters have ``parentId`` = ``docId``. ``id`` and
``node_id`` are the same stable node id. Node content is not exported (it is the source
file's text), so an imported KB has empty ``content``.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

from engine.chapters import Document, KnowledgeBase, Node, Problem
from engine.errors import EngineError

SCHEMA_VERSION = "1.0"
_FIX = "re-create it with `wikirag tree --kb DIR --out FILE`"


def export_chapter_trees(kb: KnowledgeBase) -> dict[str, Any]:
    """The KB's chapter trees as a JSON-ready dict in the ``chapter_trees.json`` schema."""
    now = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    return {
        "generatedAt": now.isoformat().replace("+00:00", "Z"),
        "version": SCHEMA_VERSION,
        "root": kb.root,
        "statistics": kb.stats(),
        "documents": [_export_document(doc) for doc in kb.documents],
        "problems": [p.to_dict() for p in kb.problems],
    }


def _export_document(doc: Document) -> dict[str, Any]:
    head = doc.nodes[0]
    return {
        "docId": doc.doc_id,
        "filePath": doc.file_path,
        "frontmatter": dict(doc.frontmatter),
        "title": head.title,
        "line": head.line,
        "summary": head.summary,
        "content_hash": head.content_hash,
        "chapters": [
            {
                "id": n.node_id,
                "node_id": n.node_id,
                "title": n.title,
                "level": n.level,
                "ordinal": n.ordinal,
                "parentId": n.parent_id,
                "line": n.line,
                "anchor": n.anchor,
                "summary": n.summary,
                "breadcrumb": list(n.breadcrumb),
                "file_path": n.file_path,
                "children_ids": list(n.children_ids),
                "content_hash": n.content_hash,
            }
            for n in doc.nodes[1:]
        ],
    }


def import_chapter_trees(data_or_path: dict[str, Any] | str | Path) -> KnowledgeBase:
    """Read a ``chapter_trees.json`` (a path or the loaded dict) back into a KnowledgeBase.

    Raises EngineError naming the first malformed entry.
    """
    if isinstance(data_or_path, dict):
        data, source = data_or_path, "chapter trees"
    else:
        path = Path(data_or_path)
        source = str(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise EngineError(f"{source} not found; {_FIX}") from None
        except UnicodeDecodeError:
            raise EngineError(f"{source} is not UTF-8 text; {_FIX}") from None
        except json.JSONDecodeError as exc:
            raise EngineError(
                f"{source} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); {_FIX}"
            ) from None
    reader = _Reader(source)
    return reader.knowledge_base(data)


class _Reader:
    """Validates while converting, so an error can say exactly where the file is wrong."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, where: str, msg: str) -> EngineError:
        return EngineError(f"{self.source}: {where} {msg}; {_FIX}")

    def get(self, obj: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
        if key not in obj:
            raise self.fail(where, f"lacks '{key}'")
        value = obj[key]
        # bool is an int subclass; a level of `true` is still malformed
        if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _as_tuple(kind)):
            raise self.fail(where, f"has '{key}' of type {type(value).__name__}")
        return value

    def knowledge_base(self, data: Any) -> KnowledgeBase:
        if not isinstance(data, dict):
            raise self.fail("the top level", f"is a {type(data).__name__}, not an object")
        version = self.get(data, "version", str, "the top level")
        if version.split(".")[0] != SCHEMA_VERSION.split(".")[0]:
            raise self.fail("the top level", f"has version {version!r}; this reader knows 1.x")
        docs_raw = self.get(data, "documents", list, "the top level")
        problems = [
            self.problem(p, f"problems[{i}]") for i, p in enumerate(data.get("problems") or [])
        ]
        by_file: dict[str, list[Problem]] = {}
        for p in problems:
            by_file.setdefault(p.file_path, []).append(p)
        documents = []
        seen: set[str] = set()
        for i, d in enumerate(docs_raw):
            doc = self.document(d, f"documents[{i}]", by_file)
            for n in doc.nodes:
                if n.node_id in seen:
                    raise self.fail(f"documents[{i}]", f"repeats node id {n.node_id!r}")
                seen.add(n.node_id)
            documents.append(doc)
        root = data.get("root")
        return KnowledgeBase(
            root=root if isinstance(root, str) else "",
            documents=tuple(documents),
            problems=tuple(problems),
        )

    def problem(self, p: Any, where: str) -> Problem:
        if not isinstance(p, dict):
            raise self.fail(where, "is not an object")
        return Problem(
            file_path=self.get(p, "file_path", str, where),
            line=self.get(p, "line", int, where),
            what=self.get(p, "what", str, where),
            todo=str(p.get("todo") or ""),
            severity=str(p.get("severity") or "warning"),
        )

    def document(self, d: Any, where: str, problems: dict[str, list[Problem]]) -> Document:
        if not isinstance(d, dict):
            raise self.fail(where, "is not an object")
        doc_id = self.get(d, "docId", str, where)
        file_path = self.get(d, "filePath", str, where)
        frontmatter = d.get("frontmatter") or {}
        if not isinstance(frontmatter, dict):
            raise self.fail(where, "has a 'frontmatter' that is not an object")
        chapters = self.get(d, "chapters", list, where)
        title = d.get("title")
        if not isinstance(title, str):
            fm_title = frontmatter.get("title")
            title = str(fm_title) if fm_title else Path(file_path).stem

        rows: list[dict[str, Any]] = []
        for j, c in enumerate(chapters):
            cw = f"{where}.chapters[{j}]"
            if not isinstance(c, dict):
                raise self.fail(cw, "is not an object")
            node_id = c.get("node_id", c.get("id"))
            if not isinstance(node_id, str) or not node_id:
                raise self.fail(cw, "lacks 'node_id'")
            level = self.get(c, "level", int, cw)
            if not 1 <= level <= 6:
                raise self.fail(cw, f"has level {level}; chapters have levels 1 to 6")
            parent = c.get("parentId")
            if not isinstance(parent, str):
                raise self.fail(cw, "lacks 'parentId' (the docId for a top-level chapter)")
            breadcrumb = self.get(c, "breadcrumb", list, cw)
            rows.append(
                {
                    "node_id": node_id,
                    "title": self.get(c, "title", str, cw),
                    "level": level,
                    "ordinal": self.get(c, "ordinal", int, cw),
                    "parent_id": parent,
                    "line": self.get(c, "line", int, cw),
                    "anchor": str(c.get("anchor") or ""),
                    "summary": str(c.get("summary") or ""),
                    "breadcrumb": tuple(str(t) for t in breadcrumb),
                    "children_ids": c.get("children_ids"),
                    "content_hash": str(c.get("content_hash") or ""),
                    "where": cw,
                }
            )

        known = {doc_id} | {r["node_id"] for r in rows}
        derived: dict[str, list[str]] = {k: [] for k in known}
        for r in rows:
            if r["parent_id"] not in known:
                raise self.fail(
                    r["where"], f"has parentId {r['parent_id']!r}, not in this document"
                )
            derived[r["parent_id"]].append(r["node_id"])

        def children(node_id: str, given: Any, cw: str) -> tuple[str, ...]:
            if given is None:
                return tuple(derived[node_id])
            if not isinstance(given, list) or sorted(map(str, given)) != sorted(derived[node_id]):
                raise self.fail(cw, "has children_ids that disagree with the chapters' parentId")
            return tuple(given)

        head = Node(
            node_id=doc_id,
            doc_id=doc_id,
            title=title,
            level=0,
            ordinal=0,
            parent_id=None,
            children_ids=tuple(derived[doc_id]),
            breadcrumb=(title,),
            line=d["line"] if isinstance(d.get("line"), int) else 1,
            anchor="",
            content="",
            summary=str(d.get("summary") or ""),
            file_path=file_path,
            frontmatter=dict(frontmatter),
            content_hash=str(d.get("content_hash") or ""),
        )
        nodes = [head]
        for r in rows:
            where_c = r.pop("where")
            given = r.pop("children_ids")
            nodes.append(
                Node(
                    doc_id=doc_id,
                    children_ids=children(r["node_id"], given, where_c),
                    content="",
                    file_path=file_path,
                    frontmatter=dict(frontmatter),
                    **r,
                )
            )
        return Document(
            doc_id=doc_id,
            file_path=file_path,
            frontmatter=dict(frontmatter),
            nodes=tuple(nodes),
            problems=tuple(problems.get(file_path, ())),
        )


def _as_tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)
