"""One scorecard dimension: its weight, its score from evidence through a written formula,
and the changes that would raise it."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine.config import EngineConfig
from engine.errors import EngineError

# A candidate change: config overrides and why they would raise the dimension.
Change = tuple[dict[str, Any], str]

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


def bands_text(metric: str, bands: Sequence[tuple[float, float]]) -> str:
    pts = ", ".join(f"{x:g} -> {y:g}" for x, y in bands)
    return f"piecewise-linear in {metric} through ({pts}), clamped to [0, 100]"


@dataclass(frozen=True)
class Dimension:
    key: str
    name: str
    weight: int
    score: float
    evidence: dict[str, Any]
    formula: str
    rule: str  # the evidence read against the formula, in one line
    next_experiment: dict[str, Any] | None = None  # {"overrides": {...}, "why": str}
    action: str = ""  # what else would raise it (outside the config)
    alternatives: tuple[dict[str, Any], ...] = ()  # further experiments, best first
    next_steps: tuple[Any, ...] = ()  # runnable steps (workbench.tune.next_steps.NextStep)

    @property
    def loss(self) -> float:
        """Points of the 100-point total this dimension leaves on the table x 100."""
        return self.weight * (100.0 - self.score)

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "name": self.name,
            "weight": self.weight,
            "score": self.score,
            "weighted": round(self.weight * self.score / 100.0, 2),
            "loss": round(self.loss / 100.0, 2),
            "evidence": self.evidence,
            "formula": self.formula,
            "rule": self.rule,
            "next_experiment": self.next_experiment,
            "action": self.action,
            "alternatives": list(self.alternatives),
            "next_steps": [s.to_dict() for s in self.next_steps],
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
