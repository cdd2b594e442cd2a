"""Search-result snippets: the part of a chapter that matches the query, as plain text with
the query's terms marked (pure; the UI renders them as escaped Markdown with
``workbench.ui.snippets.snippet_markdown``, wiki text being untrusted)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from engine.cjk import has_cjk
from engine.tokenizer import tokenize

_HEADING = re.compile(r"^\s{0,3}#{1,6}\s.*$", re.MULTILINE)
_FENCE = re.compile(r"^\s*(```|~~~).*$", re.MULTILINE)
_MARKUP = re.compile(r"!\[[^\]]*\]\([^)]*\)|\[([^\]]*)\]\([^)]*\)|[*_`]+|^\s*>+", re.MULTILINE)
_SPACE = re.compile(r"\s+")


def plain_text(markdown: str) -> str:
    """Chapter Markdown -> one line of plain text: no heading lines, fences, images or link
    targets (a heading would otherwise render heading-size inside a result)."""
    text = _HEADING.sub(" ", markdown)
    text = _FENCE.sub(" ", text)
    text = _MARKUP.sub(lambda m: m.group(1) or " ", text)
    return _SPACE.sub(" ", text).strip()


@dataclass(frozen=True)
class Snippet:
    parts: tuple[tuple[str, bool], ...]  # (text, is a query term)
    clipped_left: bool
    clipped_right: bool

    @property
    def text(self) -> str:
        return "".join(t for t, _ in self.parts)


def query_terms(query: str) -> list[str]:
    """The query's words as the keyword channel sees them (jieba), longest first."""
    terms = {t.strip().lower() for t in tokenize(query) if len(t.strip()) > 1 or has_cjk(t)}
    return sorted((t for t in terms if t and not _punct(t)), key=len, reverse=True)


def snippet(markdown: str, query: str, width: int = 220) -> Snippet:
    """The ``width``-character window of the chapter's plain text holding most query terms."""
    text = plain_text(markdown)
    terms = query_terms(query)
    if not text:
        return Snippet((), False, False)
    pattern = re.compile("|".join(re.escape(t) for t in terms), re.IGNORECASE) if terms else None
    hits = [m.start() for m in pattern.finditer(text)] if pattern else []
    start = 0
    if hits and len(text) > width:
        best = max(hits, key=lambda h: sum(1 for x in hits if h <= x < h + width))
        start = max(0, min(best - width // 5, len(text) - width))
    end = min(len(text), start + width)
    window = text[start:end]
    parts: list[tuple[str, bool]] = []
    pos = 0
    for m in pattern.finditer(window) if pattern else ():
        if m.start() > pos:
            parts.append((window[pos : m.start()], False))
        parts.append((m.group(0), True))
        pos = m.end()
    if pos < len(window):
        parts.append((window[pos:], False))
    return Snippet(tuple(parts), start > 0, end < len(text))


def _punct(t: str) -> bool:
    return all(not ch.isalnum() for ch in t)
