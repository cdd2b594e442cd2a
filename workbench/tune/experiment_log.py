"""One experiment's result and how the log records it: a JSONL record and a Markdown entry."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from workbench.tune.acceptance import Decision
from workbench.tune.verdict import from_decision


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


def one_line(text: str) -> str:
    """Titles and notes are one line in the log: a newline in them could forge an entry."""
    return re.sub(r"[\s\x00-\x1f\x7f\x85\u2028\u2029]+", " ", text).strip()


LOG_HEADER = """# Optimization log

Every experiment the workbench ran on this knowledge base, accepted or not, newest last.
Decisions are taken on the tune split; holdout numbers are reported beside them so
overfitting shows. Written by `wikirag experiment try` / `wikirag optimize` and the
Experiments page; machine-readable twin: `experiments.jsonl`.
"""


def _fmt_metrics(m: Mapping[str, float]) -> str:
    return (
        f"Recall@5 {m.get('recall@5', 0):.3f}, MRR {m.get('mrr', 0):.3f}, "
        f"Hit@5 {m.get('hit@5', 0):.3f}, NDCG@10 {m.get('ndcg@10', 0):.3f}, "
        f"p50 {m.get('latency_p50', 0):.0f} ms"
    )


def format_log_entry(r: ExperimentResult) -> str:
    d = r.decision
    change = "; ".join(f"`{k}`: {a!r} → {b!r}" for k, (a, b) in r.changes.items()) or "(none)"
    c5, cm = d.comparisons["recall@5"], d.comparisons["mrr"]
    cp = d.comparisons.get(d.rule.primary, cm)
    verdict = "✅ Accepted — new baseline" if d.accepted else "❌ Rolled back"
    why = "all criteria hold" if d.accepted else "; ".join(d.reasons)
    criteria = "".join(
        f"  - {'✅' if c.passed else '❌'} {c.name}: {c.shown} (needs {c.threshold})"
        + (f" — {c.detail}" if c.detail else "")
        + "\n"
        for c in d.criteria
    )
    return (
        f"\n### Experiment {r.number}: {one_line(r.title)}\n\n"
        f"- **Date**: {r.date}\n"
        f"- **Strategy tier**: {one_line(r.tier)}\n"
        f"- **Change**: {change}\n"
        f"- **Baseline** (`{r.base_hash}`, tune): {_fmt_metrics(r.base_tune)}\n"
        f"- **Result** (`{r.cand_hash}`, tune): {_fmt_metrics(r.cand_tune)}\n"
        f"- **Statistics**: ΔRecall@5 {c5.delta:+.3f} (95% CI [{c5.ci_low:+.3f}, {c5.ci_high:+.3f}], "
        f"p={c5.p_value:.3f}); ΔMRR {cm.delta:+.3f} (95% CI [{cm.ci_low:+.3f}, {cm.ci_high:+.3f}], "
        f"p={cm.p_value:.3f}); wins/losses/ties on {cp.measure} {cp.wins}/{cp.losses}/{cp.ties}\n"
        f"- **Holdout**: Recall@5 {r.base_holdout.get('recall@5', 0):.3f} → "
        f"{r.cand_holdout.get('recall@5', 0):.3f}, MRR {r.base_holdout.get('mrr', 0):.3f} → "
        f"{r.cand_holdout.get('mrr', 0):.3f}\n"
        f"- **Rule**: {d.rule.name} (primary {d.rule.primary}, α = {d.rule.alpha:g})\n"
        f"{criteria}"
        f"- **Decision**: {verdict} ({why})\n"
        f"- **Verdict**: {from_decision(d, r.verdict).text()}\n"
        f"- **Notes**: {one_line(r.notes) or '-'}\n"
    )


def now() -> str:
    """When an experiment ran, as the log shows it: local time to the minute."""
    return dt.datetime.now().strftime("%Y-%m-%d %H:%M")
