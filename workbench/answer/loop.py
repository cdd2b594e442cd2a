"""The retrieval loop: retrieve -> judge the evidence -> (rewrite and retrieve again, at
most twice) -> answer from the best single round, citing its chapters."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from workbench.answer.chat_answer import ChatAnswer
from workbench.answer.citations import check_citations, citations_of, has_content
from workbench.answer.evidence import VERDICT_RANK, EvidenceJudge, Judgement, judge_evidence
from workbench.answer.extractive import extractive_answer, lead_answer, refusal_text
from workbench.answer.followup import history_messages, resolve_followup
from workbench.answer.llm import LLMClient, LLMError, redact
from workbench.answer.rewrite import rewrite_query
from workbench.answer.safe_markdown import neutralize
from workbench.answer.sources import (
    SOURCES_ARE_DATA,
    Retriever,
    Source,
    source_from_result,
    sources_block,
    thicken,
)
from workbench.answer.trace import Trace, TracedLLM, elapsed_ms

MAX_EXTRA_ROUNDS = 2  # rewrites after the first retrieval

NOT_IN_KB = "NOT_IN_KB"  # what the model is told to say when the sources do not answer


@dataclass
class _Round:
    index: int
    query: str
    sources: list[Source]
    judgement: Judgement

    def rank_key(self) -> tuple[int, float, int]:
        return (VERDICT_RANK[self.judgement.verdict], self.judgement.strength, -self.index)


_ANSWER_SYSTEM = (
    "Task: answer\n"
    "You answer questions about a team's Markdown wiki using ONLY the numbered sources in the "
    "user's message. Cite every statement with its source number in square brackets, e.g. "
    "[1] or [2][3]; use only numbers of the sources given. If the sources do not contain the "
    f"answer, reply exactly {NOT_IN_KB}. Answer concisely, in the language of the question, "
    "as plain text without links or images. " + SOURCES_ARE_DATA
)


def retrieve(
    retriever: Retriever, query: str, top_k: int, trace: Trace, label: str
) -> list[Source]:
    started = time.perf_counter()
    resp = retriever.search(query, top_k=top_k)
    sources = [
        thicken(retriever, source_from_result(i + 1, r)) for i, r in enumerate(resp.results[:top_k])
    ]
    ids = ", ".join(s.node_id for s in sources[:5])
    trace.add(
        "retrieve", elapsed_ms(started), f"{label}: {query!r} -> {len(sources)} chapters ({ids})"
    )
    return sources


def retrieve_sources(retriever: Retriever, query: str, top_k: int = 5) -> list[Source]:
    """The sources the chat's first round gets for ``query`` (what calibration judges)."""
    return retrieve(retriever, query, top_k, Trace(), "calibrate")


class AnswerRun:
    """State of one ``answer`` call."""

    def __init__(
        self,
        question: str,
        retriever: Retriever,
        history: Sequence[Any] | None,
        llm: LLMClient | None,
        top_k: int,
        stream_cb: Callable[[str], None] | None,
    ) -> None:
        self.question = question
        self.retriever = retriever
        self.history = list(history or [])
        self.llm = TracedLLM(llm)
        self.top_k = top_k
        self.stream_cb = stream_cb
        self.trace = Trace()
        self.started = time.perf_counter()
        self.extra_notice: str | None = None
        self.judge: EvidenceJudge | None = None

    def finish(
        self,
        query: str,
        text: str,
        cited: Iterable[int],
        sources: Sequence[Source],
        *,
        refusal: bool,
        rounds: int,
        streamed: bool = False,
    ) -> ChatAnswer:
        # Extractive answers quote chapters and refusals name them: wiki text, as untrusted as
        # a model's (an LLM answer was neutralized in verify; doing it again changes nothing).
        text = neutralize(text).text
        if self.stream_cb is not None and not streamed:
            self.stream_cb(text)
        notices = [n for n in (self.extra_notice, self.llm.notice()) if n]
        return ChatAnswer(
            question=self.question,
            answer=text,
            citations=[] if refusal else citations_of(cited, sources),
            refusal=refusal,
            mode="llm" if self.llm.usable else "extractive",
            notice=redact("; ".join(notices)) if notices else None,
            retrieved=[s.retrieved() for s in sources],
            trace=self.trace.steps,
            rounds=rounds,
            query=query,
            took_ms=round(elapsed_ms(self.started), 2),
        )

    def refuse(self, query: str, sources: Sequence[Source], *, rounds: int) -> ChatAnswer:
        """The refusal answer: says what the wiki lacks, cites nothing."""
        text = refusal_text(self.question, sources)
        return self.finish(query, text, [], sources, refusal=True, rounds=rounds)

    def loop(self) -> ChatAnswer:
        query0, note = resolve_followup(self.question, self.history)
        if note:
            self.trace.add("rewrite", 0.0, note)
        rounds: list[_Round] = []
        query = query0
        for i in range(1 + MAX_EXTRA_ROUNDS):
            sources = retrieve(self.retriever, query, self.top_k, self.trace, f"round {i + 1}")
            judgement = judge_evidence(query0, sources, self.llm, self.trace, self.judge)
            rounds.append(_Round(i + 1, query, sources, judgement))
            if judgement.verdict == "enough" or i == MAX_EXTRA_ROUNDS:
                break
            rewrite = rewrite_query(query0, sources, self.llm, self.trace)
            # Prepended, not replacing: the original wording keeps its own matches.
            new_query = f"{rewrite} {query0}".strip()
            if any(r.query == new_query for r in rounds):
                self.trace.add("rewrite", 0.0, "rewrite repeats an earlier query; stopping")
                break
            query = new_query
        best = max(rounds, key=_Round.rank_key)
        if len(rounds) > 1:
            self.trace.add(
                "judge",
                0.0,
                f"chose round {best.index} of {len(rounds)} "
                f"({best.judgement.verdict}, coverage {best.judgement.coverage:.2f})",
            )
        return self._answer_from(best, query0, len(rounds))

    def _answer_from(self, best: _Round, query0: str, n_rounds: int) -> ChatAnswer:
        sources = best.sources
        if best.judgement.verdict == "insufficient":
            self.trace.add("verify", 0.0, "evidence insufficient -> refusal")
            return self.refuse(best.query, sources, rounds=n_rounds)
        if self.llm.usable:
            got = self._generate(query0, sources)
            if got is not None:
                text, cited, refused = got
                if refused:
                    return self.refuse(best.query, sources, rounds=n_rounds)
                return self.finish(
                    best.query, text, cited, sources, refusal=False, rounds=n_rounds, streamed=True
                )
        started = time.perf_counter()
        text, cited = extractive_answer(query0, sources)
        if not text and best.judgement.verdict == "enough":
            # The judge found enough, yet no sentence shares a term: often a question in
            # another language than the chapters. Quote an opening: the rule's, of the chapter
            # holding the terms (in its title, path or links); the model's or an LLM's, the top one.
            by_terms = best.judgement.by == "rule"
            text, cited = lead_answer(sources, question=query0 if by_terms else None)
        self.trace.add(
            "generate", elapsed_ms(started), f"extractive: {len(text)} chars citing {cited}"
        )
        if not text:
            self.trace.add(
                "verify", 0.0, "no sentence of the top chapters shares a term -> refusal"
            )
            return self.refuse(best.query, sources, rounds=n_rounds)
        return self.finish(best.query, text, cited, sources, refusal=False, rounds=n_rounds)

    def _generate(
        self, question: str, sources: Sequence[Source]
    ) -> tuple[str, list[int], bool] | None:
        """LLM answer over numbered sources: (text, cited, refused), or None if the LLM failed."""
        started = time.perf_counter()
        msgs = [
            {"role": "system", "content": _ANSWER_SYSTEM},
            *history_messages(self.history),
            {
                "role": "user",
                "content": f"Sources:\n{sources_block(sources)}\n\nQuestion: {self.question}"
                + (f"\n(Retrieval query: {question})" if question != self.question else ""),
            },
        ]
        reply = self.llm.call(msgs, self.trace, "generate", on_delta=self.stream_cb)
        if reply is None:
            return None
        self.trace.add("generate", elapsed_ms(started), f"LLM answer: {len(reply.content)} chars")
        got = self.verify(reply.content, sources)
        if not got[2] and not has_content(got[0]):
            self.empty_answer()
            return None
        return got

    def empty_answer(self) -> None:
        """An empty reply is not an answer: treat it as a failed call (extractive instead)."""
        self.trace.add("verify", 0.0, "the model's answer is empty -> extractive answer")
        self.llm.failure = LLMError("the LLM returned an empty answer", "empty answer")

    def verify(self, text: str, sources: Sequence[Source]) -> tuple[str, list[int], bool]:
        if NOT_IN_KB in text:
            self.trace.add("verify", 0.0, f"model said {NOT_IN_KB} -> refusal")
            return "", [], True
        safe = neutralize(text.strip())
        if safe.removed:
            self.trace.add(
                "verify",
                0.0,
                f"removed {len(safe.removed)} image(s)/link(s) leaving the wiki: "
                + "; ".join(safe.removed[:3]),
            )
        cleaned, cited, removed = check_citations(safe.text.strip(), sources)
        if removed:
            self.trace.add(
                "verify",
                0.0,
                f"removed citation(s) {', '.join(f'[{n}]' for n in removed)}: "
                f"only sources 1..{len(sources)} were given",
            )
        if not cited:
            self.trace.add("verify", 0.0, "the answer cites no source")
        else:
            self.trace.add("verify", 0.0, f"citations {cited} all point at given sources")
        return cleaned, cited, False
