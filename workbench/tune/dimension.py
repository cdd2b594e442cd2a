"""One scorecard dimension: its weight, its score from evidence through a written formula,
and the changes that would raise it.

Its texts (formula, rule, action, a suggestion's ``why`` and ``disabled``, verdicts in the
evidence) are ``Message`` templates: the UI renders them through its translator,
``to_dict`` (the CLI, --json, reports) renders them in English.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine.config import EngineConfig
from engine.errors import EngineError
from workbench.eval.messages import Message, Translate

# A candidate change: config overrides and why they would raise the dimension.
Change = tuple[dict[str, Any], Message]

WEIGHTS: dict[str, int] = {
    "recall5": 25,
    "mrr": 15,
    "hit5": 10,
    "embedding": 10,
    "rerank": 10,
    "chunking": 10,
    "architecture": 10,
    "engineering": 5,
    "coverage": 5,
}
NAMES = {
    "recall5": "Recall@5",
    "mrr": "MRR",
    "hit5": "Hit@5",
    "embedding": "Embedding quality",
    "rerank": "Reranker effect",
    "chunking": "Chunking",
    "architecture": "Architecture",
    "engineering": "Engineering",
    "coverage": "Evaluation coverage",
}


def piecewise(x: float, bands: Sequence[tuple[float, float]]) -> float:
    """Linear interpolation through ``bands`` ((x, score) ascending in x), clamped."""
    if x <= bands[0][0]:
        return bands[0][1]
    for (x0, y0), (x1, y1) in itertools.pairwise(bands):
        if x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return bands[-1][1]


def bands_text(metric: str, bands: Sequence[tuple[float, float]]) -> Message:
    pts = ", ".join(f"{x:g} -> {y:g}" for x, y in bands)
    return Message(
        "piecewise-linear in {metric} through ({points}), clamped to [0, 100]",
        {"metric": metric, "points": pts},
    )


def rendered(value: Any, translate: Translate | None = None) -> Any:
    """``value`` with every Message in it (a dict's values, a list's items) rendered."""
    if isinstance(value, Message):
        return value.render(translate)
    if isinstance(value, dict):
        return {k: rendered(v, translate) for k, v in value.items()}
    if isinstance(value, list):
        return [rendered(v, translate) for v in value]
    if isinstance(value, tuple):
        return tuple(rendered(v, translate) for v in value)
    return value


@dataclass(frozen=True)
class Dimension:
    key: str
    name: str
    weight: int
    score: float
    evidence: dict[str, Any]  # values are data, or Messages (verdicts)
    formula: Message
    rule: Message  # the evidence read against the formula, in one line
    next_experiment: dict[str, Any] | None = None  # {"overrides": {...}, "why": Message}
    action: Message | None = None  # what else would raise it (outside the config)
    alternatives: tuple[dict[str, Any], ...] = ()  # further experiments, best first
    next_steps: tuple[Any, ...] = ()  # runnable steps (workbench.tune.next_steps.NextStep)

    @property
    def loss(self) -> float:
        """Points of the 100-point total this dimension leaves on the table x 100."""
        return self.weight * (100.0 - self.score)

    def to_dict(self, translate: Translate | None = None) -> dict[str, Any]:
        """Plain data, its texts in English (the CLI, --json) or through ``translate``."""
        tr = translate
        return {
            "key": self.key,
            "name": tr(self.name) if tr else self.name,
            "weight": self.weight,
            "score": self.score,
            "weighted": round(self.weight * self.score / 100.0, 2),
            "loss": round(self.loss / 100.0, 2),
            "evidence": rendered(self.evidence, tr),
            "formula": self.formula.render(tr),
            "rule": self.rule.render(tr),
            "next_experiment": rendered(self.next_experiment, tr),
            "action": self.action.render(tr) if self.action else "",
            "alternatives": [rendered(e, tr) for e in self.alternatives],
            "next_steps": [s.to_dict(tr) for s in self.next_steps],
        }


def valid_changes(cfg: EngineConfig, candidates: Sequence[Change]) -> list[dict[str, Any]]:
    """The candidate changes that are valid and actually change ``cfg``, in order."""
    out = []
    for overrides, why in candidates:
        try:
            new = cfg.with_overrides(overrides)
        except EngineError:
            continue
        if cfg.diff(new):
            out.append({"overrides": dict(overrides), "why": why})
    return out


def first_change(cfg: EngineConfig, candidates: Sequence[Change]) -> dict[str, Any] | None:
    """The first candidate change that is valid and actually changes ``cfg``."""
    found = valid_changes(cfg, candidates)
    return found[0] if found else None
