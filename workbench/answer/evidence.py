"""Whether the retrieved chapters hold enough to answer: the calibrated model or the
coverage rule, with the LLM judging only the grey zone."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from workbench.answer.refusal import JUDGE_TOP_N, RefusalModel, evidence_features
from workbench.answer.sources import SOURCES_ARE_DATA, Source, sources_block
from workbench.answer.terms import key_terms, term_overlap
from workbench.answer.trace import Trace, TracedLLM, elapsed_ms

# Coverage = the largest share of the question's key terms found in any one of the top
# chapters. Terms must co-occur in one chapter: spread over several, they rarely answer.
ENOUGH_COVERAGE = 0.6  # >= : clearly enough, no LLM judge, no rewrite
INSUFFICIENT_COVERAGE = 0.35  # < : clearly insufficient (e.g. 1 of 3 terms, 1 of 4)

Verdict = Literal["enough", "grey", "insufficient"]
VERDICT_RANK = {"insufficient": 0, "grey": 1, "enough": 2}


@dataclass(frozen=True)
class Judgement:
    verdict: Verdict
    coverage: float  # best share of question terms found in one top chapter
    by: str  # "rule" | "llm" | "model"
    p_answerable: float | None = None  # the calibrated model's probability, when it judged

    @property
    def strength(self) -> float:
        """What ranks rounds of equal verdict: the model's probability, else coverage."""
        return self.coverage if self.p_answerable is None else self.p_answerable


@dataclass(frozen=True)
class EvidenceJudge:
    """The calibrated model (workbench/answer/refusal.py) over a retriever that can be probed."""

    model: RefusalModel
    retriever: Any

    def assess(
        self, question: str, sources: Sequence[Source], with_llm: bool
    ) -> tuple[Verdict, float, str]:
        f = evidence_features(question, sources, self.retriever)
        p = self.model.probability(f)
        verdict: Verdict = self.model.verdict(p, with_llm=with_llm)  # type: ignore[assignment]
        m = self.model
        cuts = (
            f"grey {m.grey_low:.2f}..{m.grey_high:.2f}"
            if with_llm
            else f"refuse < {m.refuse_below:.2f}, enough >= {m.grey_high:.2f}"
        )
        return (
            verdict,
            p,
            (
                f"model: p(answerable) {p:.2f} (cosine {f.top_cosine:.2f}, terms matched "
                f"{f.matched_terms}, missing {f.missing_terms}, absent from KB {f.absent_terms}, "
                f"unfamiliar {f.unfamiliar_terms}; "
                f"{cuts}) -> {verdict}"
            ),
        )

    def without_llm(self, p: float) -> Verdict:
        return self.model.verdict(p)  # type: ignore[return-value]


def evidence_coverage(question: str, sources: Sequence[Source], top_n: int = JUDGE_TOP_N) -> float:
    """Largest share of the question's key terms found in any one of the top chapters."""
    terms = key_terms(question)
    if not terms or not sources:
        return 0.0
    return max(term_overlap(terms, s.text) / len(terms) for s in sources[:top_n])


def rule_verdict(coverage: float) -> Verdict:
    if coverage >= ENOUGH_COVERAGE:
        return "enough"
    if coverage < INSUFFICIENT_COVERAGE:
        return "insufficient"
    return "grey"


_JUDGE_SYSTEM = (
    "Task: judge\n"
    "You decide whether the numbered sources from a team's wiki contain enough information "
    "to answer the question. Reply with exactly YES or NO. " + SOURCES_ARE_DATA
)


def judge_evidence(
    question: str,
    sources: Sequence[Source],
    llm: TracedLLM,
    trace: Trace,
    judge: EvidenceJudge | None = None,
) -> Judgement:
    """Calibrated model (else the coverage rule) first; the LLM judges only the grey zone,
    and only when configured."""
    started = time.perf_counter()
    coverage = evidence_coverage(question, sources)
    p: float | None = None
    if judge is not None and sources:
        verdict, p, detail = judge.assess(question, sources, llm.usable)
        by = "model"
    else:
        verdict = rule_verdict(coverage)
        detail = f"rule: coverage {coverage:.2f} -> {verdict}"
        by = "rule"
    if verdict != "grey" or not llm.usable:
        trace.add("judge", elapsed_ms(started), detail)
        return Judgement(verdict, coverage, by, p)
    msgs = [
        {"role": "system", "content": _JUDGE_SYSTEM},
        {
            "role": "user",
            "content": f"Sources:\n{sources_block(sources[:JUDGE_TOP_N], 800)}\n\n"
            f"Question: {question}\nEnough to answer? YES or NO.",
        },
    ]
    reply = llm.call(msgs, trace, "judge", max_tokens=5, temperature=0.0)
    if reply is None:
        if judge is not None and p is not None:
            # No judge for the grey band after all: the model's cut for no LLM decides.
            verdict = judge.without_llm(p)
            trace.add(
                "judge", elapsed_ms(started), detail + f"; LLM judge unavailable -> {verdict}"
            )
            return Judgement(verdict, coverage, by, p)
        trace.add("judge", elapsed_ms(started), detail + "; LLM judge unavailable, stays grey")
        return Judgement("grey", coverage, by, p)
    said = reply.content.strip().upper()
    if said.startswith(("YES", "是")):
        verdict = "enough"
    elif said.startswith(("NO", "否")):
        verdict = "insufficient"
    trace.add("judge", elapsed_ms(started), f"{detail}; LLM said {said[:10]!r} -> {verdict}")
    return Judgement(verdict, coverage, "llm" if verdict != "grey" else by, p)
