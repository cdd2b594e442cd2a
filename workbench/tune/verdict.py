"""Experiment decisions a person reads: "MRR +0.021 (95% CI +0.004 to +0.038, p 0.01),
9 queries better, 2 worse: accepted", and why a change was rolled back, in plain words.

Structured as messages (:class:`~workbench.eval.messages.Message`: an English template
that is also the translation key, plus parameters), built from a
:class:`~workbench.tune.acceptance.Decision` or from a logged experiment record, so the
CLI, the log and the UI say the same thing. The rule itself lives in acceptance.py.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from workbench.eval.messages import Message, Translate
from workbench.tune.acceptance import Criterion, Decision

MEASURE_NAMES = {
    "mrr": "MRR",
    "recall@5": "Recall@5",
    "recall@10": "Recall@10",
    "hit@5": "Hit@5",
    "ndcg@10": "NDCG@10",
    "precision@5": "Precision@5",
}
OUTCOME_WORDS = {
    "accepted": "accepted",
    "rolled back": "rolled back",
    "no effect": "no effect",
    "would be accepted": "would be accepted",
    "would be rolled back": "would be rolled back",
}


def measure_name(m: str) -> str:
    return MEASURE_NAMES.get(m, m)


def p_text(p: float) -> str:
    """A p-value as people write it: ``0.01``, ``0.32``, ``< 0.001``."""
    if math.isnan(p):
        return "n/a"
    if p < 0.001:
        return "< 0.001"
    return f"{p:.2g}" if p < 0.1 else f"{p:.2f}"


@dataclass(frozen=True)
class Verdict:
    measure: str
    delta: float
    ci_low: float
    ci_high: float
    p_value: float
    level: float  # confidence level in percent, 95 for alpha 0.05
    better: int  # queries whose measure rose
    worse: int
    ties: int
    outcome: str  # a key of OUTCOME_WORDS
    reasons: tuple[Message, ...]  # why it was not accepted (empty when accepted)

    @property
    def message(self) -> Message:
        noun = "query" if self.better == 1 else "queries"
        return Message(
            "{measure} {delta} ({level}% CI {low} to {high}, p {p}), {better} " + noun + " better, "
            "{worse} worse: {outcome}",
            {
                "measure": measure_name(self.measure),
                "delta": f"{self.delta:+.3f}",
                "level": f"{self.level:g}",
                "low": f"{self.ci_low:+.3f}",
                "high": f"{self.ci_high:+.3f}",
                "p": p_text(self.p_value),
                "better": self.better,
                "worse": self.worse,
                "outcome": Message(OUTCOME_WORDS.get(self.outcome, self.outcome)),
            },
        )

    def text(self, translate: Translate | None = None) -> str:
        """The headline, plus the reasons after it when it was not accepted."""
        head = self.message.render(translate)
        if not self.reasons:
            return head
        return head + " (" + "; ".join(r.render(translate) for r in self.reasons) + ")"

    def to_dict(self) -> dict[str, Any]:
        return {
            "measure": self.measure,
            "delta": self.delta,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "p_value": self.p_value,
            "level": self.level,
            "better": self.better,
            "worse": self.worse,
            "ties": self.ties,
            "outcome": self.outcome,
            "text": self.text(),
            "message": self.message.to_dict(),
            "reasons": [r.to_dict() for r in self.reasons],
        }


def reason(c: Mapping[str, Any], measure: str) -> Message:
    """A failed criterion (``Criterion.to_dict()``) in plain words."""
    name, value = str(c.get("name", "")), c.get("value")
    v = math.nan if value is None else float(value)
    m = measure_name(measure)
    if name.endswith("improves (CI low)"):
        return Message(
            "the {measure} gain is not clear: its CI reaches {low}, and p is not below {alpha}",
            {"measure": m, "low": f"{v:+.3f}", "alpha": _alpha(c)},
        )
    if name.startswith("sign test"):
        return Message("clearly more queries got worse than better ({detail})", _detail(c))
    if name.startswith("worst slice delta"):  # the strict preset
        return Message(
            "the worst slice changed {value} (allowed {threshold})",
            {"value": f"{v:+.3f}", "threshold": c.get("threshold", "")},
        )
    if name.startswith("worst slice"):
        return Message("one slice got significantly worse ({detail})", _detail(c))
    if name == "regressed queries":
        return Message(
            "{n} queries got worse (allowed {threshold})",
            {"n": int(v), "threshold": str(c.get("threshold", "")).lstrip("<= ")},
        )
    if name == "largest query regression":
        return Message(
            "one query lost {value} (allowed {threshold})",
            {"value": f"{v:.3f}", "threshold": str(c.get("threshold", "")).lstrip("<= ")},
        )
    if name.endswith(" delta"):  # the strict preset's absolute thresholds
        return Message(
            "{measure} changed {value} (needs {threshold})",
            {
                "measure": measure_name(name.removesuffix(" delta")),
                "value": f"{v:+.3f}",
                "threshold": c.get("threshold", ""),
            },
        )
    if name.startswith("latency"):
        return Message(
            "p50 latency rose {ms} ms (allowed {threshold})",
            {"ms": f"{v:+.1f}", "threshold": str(c.get("threshold", "")).lstrip("<= ")},
        )
    if name.startswith("holdout"):
        return Message("the holdout split got significantly worse ({detail})", _detail(c))
    if "not significantly worse" in name:
        return Message("{measure} got significantly worse", {"measure": m})
    return Message(
        "{name}: {value} (needs {threshold})",
        {
            "name": name,
            "value": "n/a" if math.isnan(v) else f"{v:+.4f}",
            "threshold": c.get("threshold", ""),
        },
    )


def _alpha(c: Mapping[str, Any]) -> str:
    return str(c.get("threshold", "")).rpartition("<")[2].strip() or "0.05"


def _detail(c: Mapping[str, Any]) -> dict[str, str]:
    return {"detail": str(c.get("detail", ""))}


def _from_parts(
    comp: Mapping[str, Any], criteria: list[Mapping[str, Any]], alpha: float, outcome: str
) -> Verdict:
    measure = str(comp.get("measure", "mrr"))
    accepted_like = outcome in ("accepted", "would be accepted", "no effect")
    return Verdict(
        measure=measure,
        delta=float(comp.get("delta", 0.0)),
        ci_low=float(comp.get("ci_low", 0.0)),
        ci_high=float(comp.get("ci_high", 0.0)),
        p_value=float(comp.get("p_value", 1.0)),
        level=round(100 * (1 - alpha), 1),
        better=int(comp.get("wins", 0)),
        worse=int(comp.get("losses", 0)),
        ties=int(comp.get("ties", 0)),
        outcome=outcome,
        reasons=()
        if accepted_like
        else tuple(reason(c, measure) for c in criteria if not c.get("passed", True)),
    )


def from_decision(d: Decision, outcome: str | None = None) -> Verdict:
    """The verdict of a decision just taken; ``outcome`` overrides accepted / rolled back
    (``no effect``, ``would be accepted`` for a dry run)."""
    out = outcome or ("accepted" if d.accepted else "rolled back")
    comp = d.comparisons[d.rule.primary].to_dict()
    return _from_parts(comp, [_criterion(c) for c in d.criteria], d.rule.alpha, out)


def _criterion(c: Criterion) -> dict[str, Any]:
    return c.to_dict()


def from_record(rec: Mapping[str, Any]) -> Verdict | None:
    """The verdict of a logged experiment (experiments.jsonl), None when it has none."""
    details = rec.get("details") or {}
    rule = details.get("rule") or {}
    comps = details.get("comparisons") or {}
    # records from before the rule was logged: the primary measure is compared first
    primary = str(rule.get("primary") or next(iter(comps), "mrr"))
    comp = comps.get(primary)
    if not comp:
        return None
    return _from_parts(
        comp,
        list(details.get("criteria") or []),
        float(rule.get("alpha", 0.05)),
        str(rec.get("decision", "")),
    )
