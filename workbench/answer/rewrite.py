"""A new retrieval query when the first round's evidence falls short."""

from __future__ import annotations

import time
from collections.abc import Sequence

from workbench.answer.sources import Source
from workbench.answer.terms import key_terms
from workbench.answer.trace import Trace, TracedLLM, elapsed_ms

_REWRITE_SYSTEM = (
    "Task: rewrite\n"
    "You turn a question into one short search query for a team's wiki: the key terms, in "
    "the language of the question. Reply with the query only."
)


def rule_rewrite(question: str, sources: Sequence[Source]) -> str:
    """The question's key terms plus the titles of the top chapters (deduplicated)."""
    parts: list[str] = []
    for item in [*key_terms(question), *(s.title for s in sources[:2])]:
        if item and item.lower() not in (p.lower() for p in parts):
            parts.append(item)
    return " ".join(parts)


def rewrite_query(question: str, sources: Sequence[Source], llm: TracedLLM, trace: Trace) -> str:
    started = time.perf_counter()
    if llm.usable:
        titles = "; ".join(s.label for s in sources[:3]) or "(none)"
        msgs = [
            {"role": "system", "content": _REWRITE_SYSTEM},
            {
                "role": "user",
                "content": f"Question: {question}\nChapters found so far: {titles}",
            },
        ]
        reply = llm.call(msgs, trace, "rewrite", max_tokens=64, temperature=0.0)
        text = (reply.content.strip().splitlines() or [""])[0] if reply else ""
        text = text.strip().strip("\"'“”「」").strip()[:200]
        if text:
            trace.add("rewrite", elapsed_ms(started), f"LLM rewrite: {text!r}")
            return text
    text = rule_rewrite(question, sources)
    trace.add("rewrite", elapsed_ms(started), f"rule rewrite: {text!r}")
    return text
