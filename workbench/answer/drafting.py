"""Draft golden-set queries from chapters: an LLM when configured, else rules.

A draft is a starting point for a person, never a label by itself: it names the chapter
it came from, says how it was drafted, and the Golden set page / CLI shows it for review
before it is saved.
"""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from engine.chapters import Node
from engine.cjk import cjk_count
from engine.errors import ProviderError
from workbench.answer.chat_answer import ChatAnswer
from workbench.eval.golden import next_id

_NUMBERISH = re.compile(r"[0-9][0-9.,]*\s*(?:ms|s|%|万|k|条|天|次|个|秒|分钟|小时|tokens?)?")
_SENT_END = re.compile(r"(?<=[。！？!?；;])\s*|(?<=\.)\s+")


def is_chinese(text: str) -> bool:
    letters = sum(ch.isalpha() for ch in text)
    return bool(letters) and cjk_count(text) / letters >= 0.3


def key_sentence(node: Node) -> str:
    """The first prose sentence of the chapter (no heading, code, table or list markup)."""
    in_fence = False
    for raw in node.content.splitlines()[1:]:
        line = raw.strip()
        if line.startswith(("```", "~~~")):
            in_fence = not in_fence
            continue
        if in_fence or not line or line.startswith(("#", "|", ">", "<", "!", "-", "*")):
            continue
        for sent in _SENT_END.split(line):
            if len(sent.strip()) >= 8:
                return sent.strip()
    return ""


def rule_query(node: Node) -> str:
    """A question built from the heading: FAQ headings are already questions."""
    title = node.title.strip()
    if title.endswith(("？", "?")):
        return title
    parent = node.breadcrumb[-2] if len(node.breadcrumb) >= 2 else ""
    if is_chinese(title + parent):
        topic = f"{parent}里的{title}" if parent and parent not in title else title
        return f"{topic}是怎么做的？有什么要注意的？"
    topic = f"{title} ({parent})" if parent and parent not in title else title
    return f"How do we handle {topic}, and what should I watch out for?"


def answer_phrases(node: Node, n: int = 2) -> list[str]:
    """Short phrases a good answer should contain: numbers with units from the chapter."""
    sent = key_sentence(node)
    found = [m.group(0).strip() for m in _NUMBERISH.finditer(node.content) if len(m.group(0)) > 1]
    out = list(dict.fromkeys(found))[:n]
    if not out and sent:
        out = [sent[:12]]
    return out


def draft_queries(
    nodes: Sequence[Node],
    *,
    existing_ids: Iterable[str] = (),
    llm: Any | None = None,
    today: dt.date | None = None,
) -> list[dict[str, Any]]:
    """One draft golden item per chapter; ``llm`` (an LLMClient) paraphrases when given.

    Without an LLM, or when it fails, the rule draft is used and its notes say so.
    """
    ids = list(existing_ids)
    day = (today or dt.date.today()).isoformat()
    drafts = []
    for node in nodes:
        query, how = rule_query(node), "rule (from the heading)"
        if llm is not None:
            try:
                query, how = _llm_query(llm, node), "LLM"
            except ProviderError as exc:
                how = f"rule (LLM failed: {exc})"
        item_id = next_id(ids)
        ids.append(item_id)
        drafts.append(
            {
                "id": item_id,
                "query": query,
                "relevant": [node.node_id],
                "difficulty": "medium",
                "category": node.category,
                "answer_contains": answer_phrases(node),
                "notes": f"drafted by {how} on {day}; review the wording and labels",
            }
        )
    return drafts


def _llm_query(llm: Any, node: Node) -> str:
    zh = is_chinese(node.title + node.content[:200])
    ask = (
        "根据下面这段团队 wiki 章节，写一个同事真的会问的问题，要口语化、不要照抄标题，"
        "只输出问题本身。"
        if zh
        else "Write one question a colleague would really ask that this team-wiki chapter "
        "answers. Be colloquial, do not copy the heading, output only the question."
    )
    text = f"{' > '.join(node.breadcrumb)}\n\n{node.content[:1200]}"
    reply = llm.chat(
        [{"role": "system", "content": ask}, {"role": "user", "content": text}],
        temperature=0.7,
        max_tokens=80,
    )
    query = (
        (reply.content or "").strip().strip('"“”').splitlines()[0].strip() if reply.content else ""
    )
    if not query:
        raise ProviderError("the LLM returned an empty question")
    return query


def draft_golden_item(
    question: str,
    answer: ChatAnswer,
    *,
    existing_ids: Iterable[str] = (),
    today: dt.date | None = None,
) -> dict[str, Any]:
    """A draft golden-set entry pre-filled from the chapters the answer cited.

    A refusal drafts an ``unanswerable: true`` item. Raises ValueError when the answer
    neither cites nor retrieved anything to label.
    """
    day = (today or dt.date.today()).isoformat()
    item: dict[str, Any] = {"id": next_id(existing_ids), "query": question.strip()}
    if answer.refusal:
        item["unanswerable"] = True
        item["notes"] = f"drafted from chat on {day} (refused: check the KB really lacks it)"
        return item
    relevant: list[str] = []
    for c in answer.citations:
        if c["node_id"] not in relevant:
            relevant.append(c["node_id"])
    note = f"drafted from chat on {day}"
    if not relevant:
        if not answer.retrieved:
            raise ValueError("the answer cites no chapter and retrieved none; nothing to label")
        relevant = [answer.retrieved[0]["node_id"]]
        note += " (no citations: top retrieved chapter pre-filled)"
    relevant = relevant[:4]
    by_id = {r["node_id"]: r for r in answer.retrieved}
    cats = []
    for nid in relevant:
        r = by_id.get(nid, {})
        cat = r.get("category") or ""
        if not cat:
            path = str(r.get("file_path") or nid)
            cat = path.split("/", 1)[0] if "/" in path else ""
        if cat:
            cats.append(cat)
    counts = Counter(cats)
    category = max(cats, key=lambda c: (counts[c], -cats.index(c))) if cats else ""
    item.update(
        relevant=relevant,
        difficulty="medium",
        category=category,
        notes=note,
    )
    return item
