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
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import itertools
import os
import re
import tomllib
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

import yaml
from markdown_it import MarkdownIt
from markdown_it.token import Token

from engine.errors import ConfigError, EngineError
from engine.yaml_safe import refuse_aliases


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


@dataclass(frozen=True)
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

    def document(self, path: Path, rel_path: str) -> Document: ...

    def keep_only(self, rel_paths: set[str]) -> None: ...


@dataclass(frozen=True)
class KnowledgeBase:
    """All documents of a KB folder, in sorted path order, with node lookups."""

    root: str
    documents: tuple[Document, ...]
    problems: tuple[Problem, ...] = ()

    def __post_init__(self) -> None:
        index: dict[str, Node] = {}
        for doc in self.documents:
            for node in doc.nodes:
                index[node.node_id] = node
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


# --------------------------------------------------------------------------------------
# Parsing (markdown-it-py, CommonMark preset). Headings come from the token stream only.
# --------------------------------------------------------------------------------------

# Block-level parse only: inline parsing of every paragraph costs more than half the time
# and we need inline text just for heading titles and the first lines of each summary.
_BLOCK_MD = MarkdownIt("commonmark").disable(["inline", "text_join"])
_INLINE_MD = MarkdownIt("commonmark")

SUMMARY_CHARS = 120
_SUMMARY_SOURCE_CHARS = 1000  # Markdown source read per paragraph when summarising
HASH_HEX = 16
EMPTY_SLUG = "section"  # id segment for a heading whose slug is empty (e.g. emoji only)

_CUSTOM_ID = re.compile(r"\s*\{#([^\s{}]+)\}\s*$")
_LINE_BREAKS = re.compile(r"\r\n?")
_TOML_ERROR_LINE = re.compile(r"at line (\d+)")


@dataclass(frozen=True)
class Heading:
    """One heading as the CommonMark parser reports it."""

    level: int
    text: str  # inline source as written (``{#id}`` included), lines joined by "\\n"
    line: int  # 1-based line in the original file
    setext: bool
    title: str  # plain text: Markdown syntax and a trailing ``{#id}`` removed
    custom_id: str | None  # the ``{#id}`` given in the source, if any


def slugify(text: str) -> str:
    """GitHub's heading slug (github-slugger) without the uniqueness suffix.

    Lowercase; drop every character that is not a letter, mark, number, connector
    punctuation ("_"), "-" or a space (so CJK is kept and "？" or "." go); spaces -> "-".
    """
    out = []
    for ch in text.lower():
        if ch == " ":
            out.append("-")
        elif ch == "-" or unicodedata.category(ch)[0] in "LMN" or unicodedata.category(ch) == "Pc":
            out.append(ch)
    return "".join(out)


def _unique(slug: str, seen: dict[str, int]) -> str:
    """github-slugger's rule: the 2nd "x" becomes "x-1", the 3rd "x-2", skipping taken ones."""
    result = slug
    while result in seen:
        seen[slug] += 1
        result = f"{slug}-{seen[slug]}"
    seen[result] = 0
    return result


def _plain(children: list[Token] | None) -> str:
    """Text of inline tokens as a reader sees it: no markup, no inline HTML tags."""
    parts: list[str] = []
    for tok in children or []:
        if tok.type in ("text", "text_special", "code_inline"):
            parts.append(tok.content)
        elif tok.type in ("softbreak", "hardbreak"):
            parts.append(" ")
        elif tok.type == "image":
            parts.append(_plain(tok.children))
    return "".join(parts)


def _inline_text(source: str, env: dict[str, Any]) -> str:
    tokens = _INLINE_MD.parseInline(source, env)
    return " ".join(_plain(tokens[0].children).split()) if tokens else ""


def _jsonable(value: Any) -> Any:
    """Front matter values as JSON types (YAML/TOML dates become ISO strings)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    return value


def _fence_line(line: str, char: str) -> int:
    """Length of a run of ``char`` that makes up the whole (stripped) line, else 0."""
    s = line.strip()
    return len(s) if s and s == char * len(s) else 0


_ALIAS_AT = re.compile(r"line (\d+): YAML aliases \((\*[^)]*)\)")


def split_front_matter(
    text: str, rel_path: str = ""
) -> tuple[dict[str, Any], str, int, list[Problem]]:
    """Split YAML (``---``) or TOML (``+++``) front matter off normalised text.

    Returns (front matter, body, number of lines the front matter took, problems).
    Front matter is recognised only on the very first line and only when it is closed;
    otherwise the whole text is body.
    """
    lines = text.split("\n")
    opener = lines[0].rstrip(" \t")
    if opener.startswith("---") and _fence_line(opener, "-"):
        kind = "YAML"
    elif opener == "+++":
        kind = "TOML"
    else:
        return {}, text, 0, []
    close = None
    for i in range(1, len(lines)):
        s = lines[i].rstrip(" \t")
        if kind == "YAML" and (s == "..." or (s[:1] == "-" and _fence_line(s, "-") >= len(opener))):
            close = i
            break
        if kind == "TOML" and s == "+++":
            close = i
            break
    if close is None:
        return {}, text, 0, []
    raw = "\n".join(lines[1:close])
    body = "\n".join(lines[close + 1 :])
    problems: list[Problem] = []
    data: Any = {}
    try:
        if kind == "YAML":
            # A few lines of anchors referencing anchors expand to gigabytes in safe_load;
            # front matter never needs an alias (engine/yaml_safe.py, issue 12 item 11).
            refuse_aliases(raw, "front matter")
        data = yaml.safe_load(raw) if kind == "YAML" else tomllib.loads(raw)
    except ConfigError as exc:
        m = _ALIAS_AT.search(str(exc))  # its line counts from the first front matter line
        problems.append(
            Problem(
                rel_path,
                int(m.group(1)) + 1 if m else 1,
                f"front matter uses a YAML alias ({m.group(2) if m else '*'}), which is not "
                "allowed; it is ignored",
                "write each front matter value out in full (no &anchor / *alias)",
            )
        )
        data = {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 2 if mark is not None else 1
        reason = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        problems.append(
            Problem(
                rel_path,
                line,
                f"front matter is not valid YAML ({reason}); it is ignored",
                "fix the YAML between the '---' lines (quote values that contain ':' or '#')",
            )
        )
        data = {}
    except tomllib.TOMLDecodeError as exc:
        m = _TOML_ERROR_LINE.search(str(exc))
        problems.append(
            Problem(
                rel_path,
                int(m.group(1)) + 1 if m else 1,
                f"front matter is not valid TOML ({exc}); it is ignored",
                "fix the TOML between the '+++' lines",
            )
        )
        data = {}
    if data is None:
        data = {}
    if not isinstance(data, dict):
        problems.append(
            Problem(
                rel_path,
                1,
                f"front matter is a {type(data).__name__}, not a mapping of keys to values; it is ignored",
                "write the front matter as 'key: value' lines (e.g. 'title: My page')",
            )
        )
        data = {}
    return _jsonable(data), body, close + 1, problems


def decode_markdown(data: bytes, rel_path: str = "") -> tuple[str | None, list[Problem]]:
    """Bytes -> text with BOM stripped and line endings normalised to "\\n".

    Returns (None, [error]) for a binary file (NUL bytes); invalid UTF-8 is replaced
    with U+FFFD and reported, never fatal.
    """
    if b"\x00" in data:
        return None, [
            Problem(
                rel_path,
                0,
                "file contains NUL bytes (binary, or UTF-16 text); it was skipped",
                "save it as UTF-8 text, or remove it from the knowledge base",
                severity="error",
            )
        ]
    problems: list[Problem] = []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        problems.append(
            Problem(
                rel_path,
                data[: exc.start].count(b"\n") + 1,
                "file is not valid UTF-8; undecodable bytes were replaced with U+FFFD",
                "re-save the file as UTF-8",
            )
        )
        text = data.decode("utf-8", errors="replace")
    return _normalise(text), problems


def _normalise(text: str) -> str:
    if text.startswith("\ufeff"):
        text = text[1:]
    return _LINE_BREAKS.sub("\n", text)


@dataclass
class _Scan:
    """What one block-level pass over a body yields."""

    tokens: list[Token]
    env: dict[str, Any]
    headings: list[tuple[int, Heading]]  # (index of heading_open in tokens, heading)
    unclosed_fence_lines: list[int]  # 0-based body lines of fences that run to EOF


def _scan(body: str, line_offset: int) -> _Scan:
    env: dict[str, Any] = {}
    tokens = _BLOCK_MD.parse(body, env)
    lines = body.split("\n")
    line_max = len(lines) - (1 if body.endswith("\n") else 0)
    headings: list[tuple[int, Heading]] = []
    unclosed: list[int] = []
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open" and tok.map:
            source = tokens[i + 1].content
            m = _CUSTOM_ID.search(source)
            custom_id = m.group(1) if m else None
            visible = source[: m.start()] if m else source
            headings.append(
                (
                    i,
                    Heading(
                        level=int(tok.tag[1]),
                        text=source,
                        line=tok.map[0] + 1 + line_offset,
                        setext=tok.markup in ("=", "-"),
                        title=_inline_text(visible, env),
                        custom_id=custom_id,
                    ),
                )
            )
        elif tok.type == "fence" and tok.map and tok.map[1] >= line_max:
            start, end = tok.map
            last = lines[end - 1].lstrip(" \t>") if end - 1 > start else ""
            if _fence_line(last, tok.markup[0]) < len(tok.markup):
                unclosed.append(start)
    return _Scan(tokens, env, headings, unclosed)


def document_headings(text_or_bytes: str | bytes) -> list[Heading]:
    """The headings of a Markdown file (front matter skipped), as CommonMark sees them."""
    if isinstance(text_or_bytes, bytes):
        text, _ = decode_markdown(text_or_bytes)
        if text is None:
            return []
    else:
        text = _normalise(text_or_bytes)
    _, body, fm_lines, _ = split_front_matter(text)
    return [h for _, h in _scan(body, fm_lines).headings]


def _summary(tokens: list[Token], start: int, stop: int, env: dict[str, Any]) -> str:
    """First ~120 characters of the prose between two token indices."""
    parts: list[str] = []
    size = 0
    for tok in tokens[start:stop]:
        if tok.type != "inline":
            continue
        # A table is one long paragraph under CommonMark; only its start can reach the summary.
        text = _inline_text(tok.content[:_SUMMARY_SOURCE_CHARS], env)
        if text:
            parts.append(text)
            size += len(text) + 1
        if size > SUMMARY_CHARS:
            break
    text = " ".join(parts)
    if len(text) <= SUMMARY_CHARS:
        return text
    cut = text[:SUMMARY_CHARS]
    space = cut.rfind(" ")
    if space > SUMMARY_CHARS * 2 // 3:
        cut = cut[:space]
    return cut.rstrip() + "…"


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
        text, problems = _normalise(text_or_bytes), []
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
    scan = _scan(body, fm_lines)
    for line in scan.unclosed_fence_lines:
        problems.append(
            Problem(
                rel_path,
                line + 1 + fm_lines,
                "code fence opened here is never closed; everything after it is treated as code",
                "close the fence with ```",
            )
        )
    return _build(rel_path, body, frontmatter, fm_lines, scan, problems)


def _build(
    rel_path: str,
    body: str,
    frontmatter: dict[str, Any],
    fm_lines: int,
    scan: _Scan | None,
    problems: list[Problem],
) -> Document:
    doc_id = doc_id_for(rel_path)
    headings = scan.headings if scan else []
    tokens = scan.tokens if scan else []
    env = scan.env if scan else {}

    # Byte-exact slicing by line: content of node k = body[starts[k]:starts[k+1]].
    line_starts = [0, *itertools.accumulate(len(line) + 1 for line in body.split("\n"))]
    offsets = [line_starts[h.line - 1 - fm_lines] for _, h in headings]
    bounds = [0, *offsets, len(body)]

    fm_title = frontmatter.get("title")
    first_h1 = next((h.title for _, h in headings if h.level == 1), None)
    if isinstance(fm_title, str | int | float) and str(fm_title).strip():
        doc_title = str(fm_title).strip()
    elif first_h1:
        doc_title = first_h1
    else:
        doc_title = PurePosixPath(rel_path).stem

    fm_summary = next(
        (
            str(frontmatter[k]).strip()
            for k in ("summary", "description")
            if isinstance(frontmatter.get(k), str)
        ),
        "",
    )
    first_tok = headings[0][0] if headings else len(tokens)
    doc_content = body[bounds[0] : bounds[1]]
    records: list[dict[str, Any]] = [
        {
            "node_id": doc_id,
            "title": doc_title,
            "level": 0,
            "parent_id": None,
            "breadcrumb": (doc_title,),
            "line": fm_lines + 1,
            "anchor": "",
            "content": doc_content,
            "summary": fm_summary[:SUMMARY_CHARS] or _summary(tokens, 0, first_tok, env),
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

        seg = slugify(h.title) or EMPTY_SLUG
        counts = sibling_segments.setdefault(parent["node_id"], {})
        counts[seg] = counts.get(seg, 0) + 1
        if counts[seg] > 1:
            seg = f"{seg}~{counts[seg]}"
        sep = "#" if parent["level"] == 0 else "/"
        node_id = f"{parent['node_id']}{sep}{seg}"

        if h.custom_id is not None:
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
            anchor = _unique(h.custom_id, anchors_seen)
        else:
            anchor = _unique(slugify(h.title), anchors_seen)

        if parent["level"] == 0 and h.title == doc_title:
            breadcrumb: tuple[str, ...] = (h.title,)
        else:
            breadcrumb = (*parent["breadcrumb"], h.title)

        next_tok = headings[k + 1][0] if k + 1 < len(headings) else len(tokens)
        stack.append((h.level, len(records)))
        records.append(
            {
                "node_id": node_id,
                "title": h.title,
                "level": h.level,
                "parent_id": parent["node_id"],
                "breadcrumb": breadcrumb,
                "line": h.line,
                "anchor": anchor,
                "content": body[bounds[k + 1] : bounds[k + 2]],
                "summary": _summary(tokens, tok_index + 3, next_tok, env),
            }
        )

    children: dict[str, list[str]] = {r["node_id"]: [] for r in records}
    for r in records[1:]:
        children[r["parent_id"]].append(r["node_id"])
    nodes = tuple(
        Node(
            doc_id=doc_id,
            ordinal=i,
            children_ids=tuple(children[r["node_id"]]),
            file_path=rel_path,
            frontmatter=dict(frontmatter),
            content_hash=_content_hash(r["content"]),
            **r,
        )
        for i, r in enumerate(records)
    )
    return Document(
        doc_id=doc_id,
        file_path=rel_path,
        frontmatter=dict(frontmatter),
        nodes=nodes,
        problems=tuple(problems),
    )


def markdown_files(root: str | Path) -> list[Path]:
    """Every ``*.md`` file under ``root``, sorted by relative POSIX path; hidden entries skipped."""
    root = Path(root)
    found: list[tuple[str, Path]] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for name in filenames:
            if name.endswith(".md") and not name.startswith("."):
                path = Path(dirpath) / name
                found.append((path.relative_to(root).as_posix(), path))
    return [p for _, p in sorted(found)]


def parse_kb(
    root: str | Path,
    progress: Callable[[int, int], None] | None = None,
    cache: DocumentSource | None = None,
) -> KnowledgeBase:
    """Parse every Markdown file of a KB folder. Bad files become problems, never errors.

    ``progress(done, total)`` is called after each file. ``cache`` (an
    ``engine.parse_cache.ParseCache``) returns the documents of unchanged files without
    parsing them again.
    """
    root_path = Path(root)
    if not root_path.is_dir():
        raise EngineError(f"knowledge base folder {root_path} not found; pass --kb DIR")
    files = markdown_files(root_path)
    documents: list[Document] = []
    problems: list[Problem] = []
    for i, path in enumerate(files, start=1):
        rel = path.relative_to(root_path).as_posix()
        try:
            doc = cache.document(path, rel) if cache else parse_document(path.read_bytes(), rel)
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
