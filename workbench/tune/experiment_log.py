"""One experiment's result and how the log records it: a JSONL record and a Markdown entry."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from workbench.tune.acceptance import Decision
from workbench.tune.experiment_entry import entry_text


@dataclass
class ExperimentResult:
    number: int
    title: str
    tier: str
    changes: dict[str, tuple[Any, Any]]
    decision: Decision
    base_tune: dict[str, float]
    cand_tune: dict[str, float]
    base_holdout: dict[str, float]
    cand_holdout: dict[str, float]
    base_hash: str
    cand_hash: str
    cand_yaml: str
    mode: str
    notes: str = ""
    date: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def no_effect(self) -> bool:
        """True when the change left every ranking identical: reported, never logged."""
        return bool(self.extra.get("no_effect"))

    @property
    def verdict(self) -> str:
        if self.no_effect:
            return "no effect"
        return "accepted" if self.decision.accepted else "rolled back"

    def to_record(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "title": self.title,
            "date": self.date,
            "tier": self.tier,
            "changes": {k: list(v) for k, v in self.changes.items()},
            "decision": self.verdict,
            "details": self.decision.to_dict(),
            "mode": self.mode,
            "baseline": {
                "hash": self.base_hash,
                "tune": self.base_tune,
                "holdout": self.base_holdout,
            },
            "result": {
                "hash": self.cand_hash,
                "tune": self.cand_tune,
                "holdout": self.cand_holdout,
            },
            "config_yaml": self.cand_yaml,
            "notes": self.notes,
            **self.extra,
        }


def format_log_entry(r: ExperimentResult) -> str:
    """The result's entry in ``experiments.md`` (English; the UI renders it translated)."""
    return entry_text(r.to_record(), rule_name=r.decision.rule.name)


def now() -> str:
    """When an experiment ran, as the log shows it: local time to the minute."""
    return dt.datetime.now().strftime("%Y-%m-%d %H:%M")
