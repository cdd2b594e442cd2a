"""Answers without an LLM: the best sentences of the top chapters, or a refusal naming
what the KB does cover."""

from __future__ import annotations

import re
from collections.abc import Sequence

from engine.cjk import has_cjk
from workbench.answer.sources import Source
from workbench.answer.terms import key_terms, term_overlap

EXTRACTIVE_SOURCES = 3  # chapters the extractive answer draws sentences from

_SENT_END = re.compile(r"(?<=[。！？!?；;])|(?<=[.])\s+")
_LIST_MARK = re.compile(r"^\s*(?:[-*+>]|\d+[.)、])\s+")
_LINK_ONLY = re.compile(r"^!?\[[^\]]*\]\([^)]*\)[\s，,;；。.]*$")  # navigation, not prose
_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_EMPHASIS = re.compile(r"(\*\*|__|`)")
_MIN_SENTENCE = 6
_MAX_SENTENCE = 300


def _sentences(content: str) -> list[str]:
    out: list[str] = []
    in_fence = False
    for raw in content.splitlines():
        line = raw.strip()
        if line.startswith(("```", "~~~")):
            in_fence = not in_fence
            continue
        if in_fence or not line or line.startswith(("#", "|")):
            continue
        line = _LIST_MARK.sub("", line)
        if _LINK_ONLY.match(line):
            continue
        line = _EMPHASIS.sub("", _LINK.sub(r"\1", _IMAGE.sub("", line)))
        for piece in _SENT_END.split(line):
            s = piece.strip()
            if len(s) >= _MIN_SENTENCE:
                out.append(s if len(s) <= _MAX_SENTENCE else s[:_MAX_SENTENCE] + "…")
    return out


def extractive_answer(question: str, sources: Sequence[Source]) -> tuple[str, list[int]]:
    """The 2–4 sentences of the top chapters sharing most terms with the question, each
    followed by its citation ``[n]``. Returns (text, cited numbers)."""
    terms = key_terms(question)
    scored: list[tuple[int, int, int, str]] = []  # (-overlap, n, position, sentence)
    for s in sources[:EXTRACTIVE_SOURCES]:
        for pos, sent in enumerate(_sentences(s.content)):
            scored.append((-term_overlap(terms, sent), s.n, pos, sent))
    scored.sort()
    picked = [x for x in scored if x[0] < 0][:4]
    # No sentence shares a term with the question: whatever we cited would be unrelated
    # (a "closing time of the canteen" question got a chapter's first sentence as [1]), so
    # say nothing and let the caller refuse. With some overlap, opening sentences of the
    # same chapters may fill in as context.
    if not picked:
        return "", []
    if len(picked) < 2:
        for x in sorted(scored, key=lambda x: (x[2], x[1])):
            if len(picked) >= 2:
                break
            if x not in picked:
                picked.append(x)
    picked.sort(key=lambda x: (x[1], x[2]))
    text = "\n".join(f"{sent} [{n}]" for _, n, _, sent in picked)
    return text, sorted({n for _, n, _, _ in picked})


def lead_answer(
    sources: Sequence[Source], n: int = 2, question: str | None = None
) -> tuple[str, list[int]]:
    """The first ``n`` sentences of the top source, cited; ("", []) when it has none.

    With ``question``: of the top sources the extractive answer reads that have sentences,
    the one whose text (titles and links included) holds most of its key terms, the earliest
    on a tie: the chapter the coverage rule judged by, unless it is only a list of links.
    """
    if not sources:
        return "", []
    top, sentences = sources[0], _sentences(sources[0].content)
    if question is not None:
        terms = key_terms(question)
        readable = [
            (s, sents) for s in sources[:EXTRACTIVE_SOURCES] if (sents := _sentences(s.content))
        ]
        if readable:
            # max keeps the first of equal counts: the higher-ranked chapter on a tie.
            top, sentences = max(readable, key=lambda pair: term_overlap(terms, pair[0].text))
    picked = sentences[:n]
    return "\n".join(f"{s} [{top.n}]" for s in picked), [top.n] if picked else []


def refusal_text(question: str, sources: Sequence[Source]) -> str:
    """Say the KB cannot answer, and name the closest chapters it does cover: only those that
    share a key term with the question (naming unrelated chapters as "close" misleads)."""
    terms = key_terms(question)
    covered = [s.label for s in sources[:3] if terms and term_overlap(terms, s.text.lower()) > 0]
    if has_cjk(question):
        if not covered:
            return "知识库中没有找到与这个问题相关的内容。"
        return (
            "知识库中没有足够的信息回答这个问题。它涵盖的相关章节有：" + "；".join(covered) + "。"
        )
    if not covered:
        return "The knowledge base has nothing on this question."
    return (
        "The knowledge base does not have enough information to answer this. "
        "Closest chapters it does cover: " + "; ".join(covered) + "."
    )
