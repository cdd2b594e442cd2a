"""Conversation context: follow-up questions resolved against the previous turn, and
earlier turns given to the model."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from workbench.answer.chat_answer import ChatAnswer
from workbench.answer.terms import key_terms, term_in

_FOLLOWUP_CJK = ("它", "这个", "那个", "这些", "那些", "这种", "那种", "其")
_FOLLOWUP_EN = frozenset(("it", "its", "that", "this", "they", "them", "those", "these"))
_FOLLOWUP_START = ("那", "还有", "另外", "而且", "and ", "also ", "what about", "how about")
# A question with this many terms of its own, none of them found in the previous turn, is a
# new question however it starts ("Where is the company annual party held this year?" has
# "this" and 5 terms). Measured: 14 of the 15 golden-set questions (datasets/wiki.yaml, all
# standalone) that look like follow-ups by their pronouns have >= 3 own terms; 11 of 12
# genuine follow-ups ("它有哪几种方式？", "那固定长度呢？", "What are its drawbacks?") have <= 2,
# and the one with 4 ("这些方式分别适合什么场景？") shares "方式" with the turn it follows.
NEW_TOPIC_MIN_TERMS = 3


def is_followup(question: str) -> bool:
    """Short, pronoun-led or "and/那/还有"-led questions lean on the previous turn."""
    q = question.strip().lower()
    if not q:
        return False
    if q.startswith(_FOLLOWUP_START):
        return True
    if any(p in q for p in _FOLLOWUP_CJK):
        return True
    if _FOLLOWUP_EN & set(re.findall(r"[a-z]+", q)):
        return True
    return len(key_terms(q)) <= 1


def own_terms(question: str) -> list[str]:
    """Key terms not part of a longer key term of the same question (jieba's search mode
    yields 哪几, 几种 and 哪几种 for one word: counted once)."""
    terms = key_terms(question)
    return [t for t in terms if not any(t != u and t in u for u in terms)]


def shares_a_term(question: str, text: str) -> bool:
    """Whether any key term of ``question`` occurs in ``text`` (the judge's term test)."""
    low = text.lower()
    return any(term_in(t, low) for t in key_terms(question))


def _turns(history: Iterable[Any] | None) -> list[tuple[str, str, str]]:
    """(question, retrieval query, answer) per earlier turn, oldest first."""
    turns: list[tuple[str, str, str]] = []
    for item in history or ():
        if isinstance(item, ChatAnswer):
            turns.append((item.question, item.query or item.question, item.answer))
        elif isinstance(item, Mapping):
            if item.get("question"):
                q = str(item["question"])
                turns.append((q, str(item.get("query") or q), str(item.get("answer") or "")))
            elif item.get("role") == "user":
                c = str(item.get("content") or "")
                turns.append((c, c, ""))
            elif item.get("role") == "assistant" and turns:
                q, query, _ = turns[-1]
                turns[-1] = (q, query, str(item.get("content") or ""))
    return turns


def resolve_followup(question: str, history: Iterable[Any] | None) -> tuple[str, str | None]:
    """The question with the previous turn's key terms prefixed when it is a follow-up.

    Returns (query, note); note is None when nothing was done.
    """
    turns = _turns(history)
    if not turns or not is_followup(question):
        return question, None
    prev_question, prev_query, prev_answer = turns[-1]
    own = own_terms(question)
    if len(own) >= NEW_TOPIC_MIN_TERMS and not shares_a_term(
        question, f"{prev_question}\n{prev_query}\n{prev_answer}"
    ):
        return question, (
            f"judged as a new question: its {len(own)} terms ({', '.join(own[:6])}) share "
            f"nothing with the previous turn ({prev_question!r})"
        )
    have = set(key_terms(question))
    carried = [t for t in key_terms(prev_query) if t not in have][:6]
    if not carried:
        return question, None
    resolved = f"{' '.join(carried)} {question}"
    return (
        resolved,
        f"follow-up resolved against the previous turn ({prev_question!r}): {resolved!r}",
    )


def history_messages(history: Iterable[Any] | None, keep: int = 3) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = []
    for q, _, a in _turns(history)[-keep:]:
        msgs.append({"role": "user", "content": q})
        if a:
            msgs.append({"role": "assistant", "content": a})
    return msgs
