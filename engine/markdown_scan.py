"""Block-level CommonMark scan of a Markdown body: headings, slugs, chapter summaries.

Headings come from markdown-it-py's token stream only, so a ``#`` inside a fenced code
block is not a heading and setext headings are.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token

from engine.front_matter import decode_markdown, fence_line, normalise_text, split_front_matter

# Block-level parse only: inline parsing of every paragraph costs more than half the time
# and we need inline text just for heading titles and the first lines of each summary.
_BLOCK_MD = MarkdownIt("commonmark").disable(["inline", "text_join"])
_INLINE_MD = MarkdownIt("commonmark")

SUMMARY_CHARS = 120
_SUMMARY_SOURCE_CHARS = 1000  # Markdown source read per paragraph when summarising

_CUSTOM_ID = re.compile(r"\s*\{#([^\s{}]+)\}\s*$")


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


def unique_slug(slug: str, seen: dict[str, int]) -> str:
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


@dataclass
class Scan:
    """What one block-level pass over a body yields."""

    tokens: list[Token]
    env: dict[str, Any]
    headings: list[tuple[int, Heading]]  # (index of heading_open in tokens, heading)
    unclosed_fence_lines: list[int]  # 0-based body lines of fences that run to EOF


def scan(body: str, line_offset: int) -> Scan:
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
            if fence_line(last, tok.markup[0]) < len(tok.markup):
                unclosed.append(start)
    return Scan(tokens, env, headings, unclosed)


def document_headings(text_or_bytes: str | bytes) -> list[Heading]:
    """The headings of a Markdown file (front matter skipped), as CommonMark sees them."""
    if isinstance(text_or_bytes, bytes):
        text, _ = decode_markdown(text_or_bytes)
        if text is None:
            return []
    else:
        text = normalise_text(text_or_bytes)
    _, body, fm_lines, _ = split_front_matter(text)
    return [h for _, h in scan(body, fm_lines).headings]


def summarise(tokens: list[Token], start: int, stop: int, env: dict[str, Any]) -> str:
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


__all__ = [
    "SUMMARY_CHARS",
    "Heading",
    "Scan",
    "document_headings",
    "scan",
    "slugify",
    "summarise",
    "unique_slug",
]
