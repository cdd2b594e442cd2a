"""Markdown knowledge base -> chapter trees (pure; no I/O beyond reading the KB folder).

CONTRACT (implemented by the tree module owner; other modules rely on these names):

- ``Node``: one chapter (or the document node, level 0).
- ``Document``: one parsed file.
- ``KnowledgeBase``: all documents of a KB folder, with lookups.
- ``Problem``: something wrong with an input file (never raised; collected).
- ``parse_kb(root) -> KnowledgeBase`` and ``parse_document(text, rel_path) -> Document``.

Node id scheme (stable across re-indexing and edits inside a chapter):
  doc_id  = file path relative to the KB root, POSIX separators, without ".md"
  node_id = doc_id for the document node (level 0)
          = doc_id + "#" + "/".join(slug(title) for each heading on the path),
            where a heading whose slug repeats among its siblings gets "~N"
            appended (N = 2, 3, ... in document order).

The chapter model lives in engine/chapters.py, the front matter in engine/front_matter.py,
the CommonMark scan (headings, slugs, summaries) in engine/markdown_scan.py; this module
turns their output into ``Document`` trees and re-exports the names callers use.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import math
import os
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from engine.chapters import Document, DocumentSource, KnowledgeBase, Node, Problem
from engine.errors import EngineError
from engine.front_matter import decode_markdown, normalise_text, split_front_matter
from engine.markdown_scan import (
    SUMMARY_CHARS,
    Heading,
    Scan,
    scan,
    slugify,
    summarise,
    unique_slug,
)

HASH_HEX = 16
MAX_FILE_MB = 10.0  # a larger page is skipped, not parsed (WIKIRAG_MAX_FILE_MB changes it)
MAX_FILE_MB_ENV = "WIKIRAG_MAX_FILE_MB"
EMPTY_SLUG = "section"  # id segment for a heading whose slug is empty (e.g. emoji only)


def _content_hash(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8")).hexdigest()[:HASH_HEX]


def doc_id_for(rel_path: str) -> str:
    """File path relative to the KB root (POSIX) without its ".md" suffix."""
    rel = PurePosixPath(rel_path).as_posix()
    return rel[:-3] if rel.endswith(".md") else rel


def parse_document(text_or_bytes: str | bytes, rel_path: str) -> Document:
    """Parse one Markdown file into its chapter tree. Problems are collected, never raised.

    A binary file (NUL bytes) yields a document with an empty document node and an
    error problem; ``parse_kb`` leaves such files out.
    """
    rel_path = PurePosixPath(rel_path).as_posix()
    raw = (
        text_or_bytes
        if isinstance(text_or_bytes, bytes)
        else text_or_bytes.encode("utf-8", "replace")
    )
    doc = _parse_text(text_or_bytes, rel_path)
    return dataclasses.replace(doc, source_hash=source_hash(raw))


def source_hash(data: bytes) -> str:
    """The hash a ``Document`` records of its file's bytes."""
    return hashlib.sha256(data).hexdigest()[:HASH_HEX]


def _parse_text(text_or_bytes: str | bytes, rel_path: str) -> Document:
    if isinstance(text_or_bytes, bytes):
        text, problems = decode_markdown(text_or_bytes, rel_path)
    elif "\x00" in text_or_bytes:
        text, problems = decode_markdown(text_or_bytes.encode("utf-8", "replace"), rel_path)
    else:
        text, problems = normalise_text(text_or_bytes), []
    if text is None:
        return _build(rel_path, "", {}, 0, None, problems)
    frontmatter, body, fm_lines, fm_problems = split_front_matter(text, rel_path)
    problems.extend(fm_problems)
    if not body.strip():
        problems.append(
            Problem(
                rel_path,
                0,
                "file has no content" + (" besides its front matter" if fm_lines else ""),
                "write the page, or delete the file",
            )
        )
    scanned = scan(body, fm_lines)
    for line in scanned.unclosed_fence_lines:
        problems.append(
            Problem(
                rel_path,
                line + 1 + fm_lines,
                "code fence opened here is never closed; everything after it is treated as code",
                "close the fence with ```",
            )
        )
    return _build(rel_path, body, frontmatter, fm_lines, scanned, problems)


def _build(
    rel_path: str,
    body: str,
    frontmatter: dict[str, Any],
    fm_lines: int,
    scanned: Scan | None,
    problems: list[Problem],
) -> Document:
    doc_id = doc_id_for(rel_path)
    headings = scanned.headings if scanned else []
    tokens = scanned.tokens if scanned else []
    env = scanned.env if scanned else {}

    # Byte-exact slicing by line: content of node k = body[starts[k]:starts[k+1]].
    line_starts = [0, *itertools.accumulate(len(line) + 1 for line in body.split("\n"))]
    offsets = [line_starts[h.line - 1 - fm_lines] for _, h in headings]
    bounds = [0, *offsets, len(body)]

    doc_title = _document_title(frontmatter, headings, rel_path)
    fm_summary = _front_matter_summary(frontmatter)
    first_tok = headings[0][0] if headings else len(tokens)
    records: list[dict[str, Any]] = [
        {
            "node_id": doc_id,
            "title": doc_title,
            "level": 0,
            "parent_id": None,
            "breadcrumb": (doc_title,),
            "line": fm_lines + 1,
            "anchor": "",
            "content": body[bounds[0] : bounds[1]],
            "summary": fm_summary[:SUMMARY_CHARS] or summarise(tokens, 0, first_tok, env),
        }
    ]

    anchors_seen: dict[str, int] = {}
    custom_seen: dict[str, int] = {}
    sibling_segments: dict[str, dict[str, int]] = {}
    stack: list[tuple[int, int]] = []  # (level, record index) of open headings
    for k, (tok_index, h) in enumerate(headings):
        while stack and stack[-1][0] >= h.level:
            stack.pop()
        parent = records[stack[-1][1]] if stack else records[0]
        if parent["level"] == 0 and h.title == doc_title:
            breadcrumb: tuple[str, ...] = (h.title,)
        else:
            breadcrumb = (*parent["breadcrumb"], h.title)
        next_tok = headings[k + 1][0] if k + 1 < len(headings) else len(tokens)
        stack.append((h.level, len(records)))
        records.append(
            {
                "node_id": _child_node_id(parent, h.title, sibling_segments),
                "title": h.title,
                "level": h.level,
                "parent_id": parent["node_id"],
                "breadcrumb": breadcrumb,
                "line": h.line,
                "anchor": _heading_anchor(h, rel_path, anchors_seen, custom_seen, problems),
                "content": body[bounds[k + 1] : bounds[k + 2]],
                "summary": summarise(tokens, tok_index + 3, next_tok, env),
            }
        )
    return _document_from_records(doc_id, rel_path, frontmatter, records, problems)


def _document_title(
    frontmatter: dict[str, Any], headings: list[tuple[int, Heading]], rel_path: str
) -> str:
    """The front matter's title, else the first level-1 heading, else the file's stem."""
    fm_title = frontmatter.get("title")
    if isinstance(fm_title, str | int | float) and str(fm_title).strip():
        return str(fm_title).strip()
    first_h1 = next((h.title for _, h in headings if h.level == 1), None)
    return first_h1 or PurePosixPath(rel_path).stem


def _front_matter_summary(frontmatter: dict[str, Any]) -> str:
    return next(
        (
            str(frontmatter[k]).strip()
            for k in ("summary", "description")
            if isinstance(frontmatter.get(k), str)
        ),
        "",
    )


def _child_node_id(
    parent: dict[str, Any], title: str, sibling_segments: dict[str, dict[str, int]]
) -> str:
    """The parent's id plus this heading's slug; a slug repeated among siblings gets ``~N``."""
    seg = slugify(title) or EMPTY_SLUG
    counts = sibling_segments.setdefault(parent["node_id"], {})
    counts[seg] = counts.get(seg, 0) + 1
    if counts[seg] > 1:
        seg = f"{seg}~{counts[seg]}"
    sep = "#" if parent["level"] == 0 else "/"
    return f"{parent['node_id']}{sep}{seg}"


def _heading_anchor(
    h: Heading,
    rel_path: str,
    anchors_seen: dict[str, int],
    custom_seen: dict[str, int],
    problems: list[Problem],
) -> str:
    """The heading's unique HTML anchor; a ``{#id}`` used twice in a file is a problem."""
    if h.custom_id is None:
        return unique_slug(slugify(h.title), anchors_seen)
    if h.custom_id in custom_seen:
        first = custom_seen[h.custom_id]
        problems.append(
            Problem(
                rel_path,
                h.line,
                f"anchor {{#{h.custom_id}}} is already used by the heading on line {first}",
                "give this heading a different {#id}",
            )
        )
    else:
        custom_seen[h.custom_id] = h.line
    return unique_slug(h.custom_id, anchors_seen)


def _document_from_records(
    doc_id: str,
    rel_path: str,
    frontmatter: dict[str, Any],
    records: list[dict[str, Any]],
    problems: list[Problem],
) -> Document:
    children: dict[str, list[str]] = {r["node_id"]: [] for r in records}
    for r in records[1:]:
        children[r["parent_id"]].append(r["node_id"])
    # One front matter dict per document, shared by its nodes (never mutated): a copy per
    # node cost ~300 bytes of the ~1.6 KB a parsed chapter holds in a serving process.
    shared_fm = dict(frontmatter)
    nodes = tuple(
        Node(
            doc_id=doc_id,
            ordinal=i,
            children_ids=tuple(children[r["node_id"]]),
            file_path=rel_path,
            frontmatter=shared_fm,
            content_hash=_content_hash(r["content"]),
            **r,
        )
        for i, r in enumerate(records)
    )
    return Document(
        doc_id=doc_id,
        file_path=rel_path,
        frontmatter=shared_fm,
        nodes=nodes,
        problems=tuple(problems),
    )


def markdown_files(root: str | Path) -> list[Path]:
    """Every ``*.md`` file under ``root``, sorted by relative POSIX path; hidden entries skipped."""
    return [Path(p) for _, p in markdown_entries(root)]


def markdown_entries(root: str | Path) -> list[tuple[str, str]]:
    """(relative POSIX path, path) of every file ``markdown_files`` lists, in its order.

    Plain strings: at 10k files, pathlib's parsing cost more than the rest of a cached
    ``parse_kb`` together.
    """
    top = os.fspath(root)
    found: list[tuple[str, str]] = []
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        rel_dir = os.path.relpath(dirpath, top)
        prefix = "" if rel_dir == os.curdir else rel_dir.replace(os.sep, "/") + "/"
        for name in filenames:
            if name.endswith(".md") and not name.startswith("."):
                found.append((prefix + name, os.path.join(dirpath, name)))
    found.sort()
    return found


def max_file_mb() -> float:
    """``$WIKIRAG_MAX_FILE_MB`` if it is a positive number, else ``MAX_FILE_MB``. An environment
    setting, not a config key: every reader of a KB (index, freshness, UI, serving) must skip
    the same files, and most have no config at hand."""
    raw = os.environ.get(MAX_FILE_MB_ENV, "")
    try:
        value = float(raw)
    except ValueError:
        if raw.strip():
            raise EngineError(
                f"{MAX_FILE_MB_ENV} must be a number of MB, got {raw[:40]!r}"
            ) from None
        return MAX_FILE_MB
    if not math.isfinite(value) or value <= 0:
        raise EngineError(f"{MAX_FILE_MB_ENV} must be a positive number of MB, got {raw[:40]!r}")
    return value


def within_boundary(
    root: str | Path, entries: list[tuple[str, str]], limit_mb: float | None = None
) -> tuple[list[tuple[str, str]], list[Problem]]:
    """The ``entries`` (from ``markdown_entries``) that may be read, and a problem for each
    one skipped: a symlink (or a file under a symlinked folder) whose target is outside
    ``root`` (a link to /etc/passwd would be indexed and served), and a file over
    ``limit_mb`` (a 50 MB page took 86 s and 1.9 GB to parse). Both are decided from
    ``stat``/``realpath`` before a byte is read. ``limit_mb`` None: ``max_file_mb()``."""
    top = os.path.realpath(os.fspath(root))
    cap_mb = max_file_mb() if limit_mb is None else limit_mb
    limit = cap_mb * 1024 * 1024
    kept: list[tuple[str, str]] = []
    problems: list[Problem] = []
    for rel, path in entries:
        real = os.path.realpath(path)
        if os.path.commonpath([top, real]) != top:
            problems.append(
                Problem(
                    rel,
                    0,
                    "is a link to a file outside the knowledge base; it was skipped",
                    "copy the file into the knowledge base folder instead of linking to it",
                )
            )
            continue
        try:
            size = os.stat(real).st_size
        except OSError:
            size = 0  # unreadable or a broken link: parse_kb reports it when reading
        if size > limit:
            problems.append(
                Problem(
                    rel,
                    0,
                    f"is {size / 1024 / 1024:.1f} MB, over the {cap_mb:g} MB limit; it was skipped",
                    f"split it into smaller pages, or raise {MAX_FILE_MB_ENV}",
                )
            )
            continue
        kept.append((rel, path))
    return kept, problems


def parse_kb(
    root: str | Path,
    progress: Callable[[int, int], None] | None = None,
    cache: DocumentSource | None = None,
    limit_mb: float | None = None,
) -> KnowledgeBase:
    """Parse every Markdown file of a KB folder. Bad files become problems, never errors.

    ``progress(done, total)`` is called after each file. ``cache`` (an
    ``engine.parse_cache.ParseCache``) returns the documents of unchanged files without
    parsing them again. Links leaving ``root`` and files over ``limit_mb`` (None:
    ``max_file_mb()``) are skipped with a problem each (``within_boundary``).
    """
    root_path = Path(root)
    if not root_path.is_dir():
        raise EngineError(f"knowledge base folder {root_path} not found; pass --kb DIR")
    files, problems = within_boundary(root_path, markdown_entries(root_path), limit_mb)
    documents: list[Document] = []
    for i, (rel, path) in enumerate(files, start=1):
        try:
            doc = (
                cache.document(path, rel) if cache else parse_document(Path(path).read_bytes(), rel)
            )
        except OSError as exc:
            problems.append(
                Problem(
                    rel,
                    0,
                    f"file cannot be read ({exc.strerror}); it was skipped",
                    "check the file's permissions",
                    severity="error",
                )
            )
        else:
            problems.extend(doc.problems)
            if not any(p.severity == "error" for p in doc.problems):
                documents.append(doc)
        if progress is not None:
            progress(i, len(files))
    if cache is not None:
        cache.keep_only({d.file_path for d in documents})
    return KnowledgeBase(root=str(root_path), documents=tuple(documents), problems=tuple(problems))


__all__ = [
    "EMPTY_SLUG",
    "HASH_HEX",
    "doc_id_for",
    "markdown_entries",
    "markdown_files",
    "max_file_mb",
    "parse_document",
    "parse_kb",
    "source_hash",
    "within_boundary",
]
