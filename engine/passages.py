"""A chapter's text as overlapping, sentence-aware passages, for passage vectors.

One vector per chapter averages a long section into one point; a short question matches a
sentence of it. With ``index.passage_chars`` > 0 the indexer also embeds each chapter's
passages (windows of whole sentences, up to that many characters, the next one starting
about ``index.passage_overlap`` characters before the previous one ended) and the vector
channel scores a chapter by the best of its own vector and its passages' (engine/snapshot.py).
Sizes by measurement: benchmarks/bench_passages.py.
"""

from __future__ import annotations

import re

from engine.chapters import Node
from engine.cjk import IDEOGRAPH, cjk_count

# Sentence ends in Chinese and English text, and line breaks (list items, table rows).
_SENTENCE_END = re.compile(r"(?<=[。！？；!?;])|(?<=\. )|\n+")


def sentences(text: str) -> list[str]:
    """``text`` cut after each sentence end and at line breaks; blank pieces dropped."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def size(text: str) -> float:
    """Length in Chinese characters' worth: an ideograph counts 1, any other character 1/2.

    An English word of five letters and a space then weighs about as much as the two
    ideographs a Chinese word takes, so one window size fits both: 150-character windows
    scored best on three Chinese sets, 300 on an English handbook (bench_passages.py).
    """
    return len(text) - (len(text) - cjk_count(text)) / 2


def _cut(sentence: str, window: int) -> list[str]:
    """``sentence`` in pieces of at most ``window`` (by ``size``)."""
    out: list[str] = []
    start, used = 0, 0.0
    for i, ch in enumerate(sentence):
        w = 1.0 if IDEOGRAPH.match(ch) else 0.5
        if used + w > window and i > start:
            out.append(sentence[start:i])
            start, used = i, 0.0
        used += w
    out.append(sentence[start:])
    return out


def split_passages(text: str, window: int, overlap: int) -> list[str]:
    """Windows of whole sentences of at most ``window`` (by ``size``; a longer sentence is
    cut into ``window``-sized pieces); each window after the first repeats the last
    sentences of the one before, up to ``overlap``. Empty for blank text or ``window`` < 1."""
    if window < 1:
        return []
    pieces = [p for s in sentences(text) for p in _cut(s, window)]
    out: list[str] = []
    cur: list[str] = []
    used = 0.0
    fresh = 0  # pieces in ``cur`` not yet in an emitted window
    for p in pieces:
        n = size(p) + 0.5  # the joining space
        if cur and used + n > window + 0.5:
            out.append(" ".join(cur))
            keep: list[str] = []
            kept = 0.0
            for q in reversed(cur):
                grown = kept + size(q) + 0.5
                if grown - 0.5 > overlap or grown + n > window + 0.5 or len(keep) + 1 >= len(cur):
                    break
                keep.insert(0, q)
                kept += size(q) + 0.5
            cur, used, fresh = keep, kept, 0
        cur.append(p)
        used += n
        fresh += 1
    if cur and fresh:
        out.append(" ".join(cur))
    return out


def passage_texts(node: Node, window: int, overlap: int, *, title: bool = True) -> list[str]:
    """The texts a chapter's passages are embedded as: its breadcrumb title, then the window."""
    head = f"{' > '.join(node.breadcrumb)}\n" if title else ""
    return [head + p for p in split_passages(node.content, window, overlap)]
