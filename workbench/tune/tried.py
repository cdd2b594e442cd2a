"""Has this change been tried already? The experiment log is searched for the same
candidate config against the same baseline and golden set, so `experiment try` and the
UI can show the earlier result before spending another run on it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.config import EngineConfig
from workbench.eval.messages import Message
from workbench.tune.experiment_store import ExperimentStore
from workbench.tune.verdict import Verdict, from_record


@dataclass(frozen=True)
class EarlierTry:
    number: int
    date: str
    title: str
    record: Mapping[str, Any]
    verdict: Verdict | None

    @property
    def message(self) -> Message:
        return Message(
            "already tried as experiment {number} ({date}) against this baseline and golden "
            "set: {verdict}",
            {
                "number": self.number,
                "date": self.date,
                "verdict": self.verdict.message if self.verdict else self.record.get("decision"),
            },
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "date": self.date,
            "title": self.title,
            "decision": self.record.get("decision"),
            "verdict": self.verdict.to_dict() if self.verdict else None,
            "text": self.message.render(),
        }


def earlier_try(
    store: ExperimentStore,
    overrides: Mapping[str, Any],
    dataset_hash: str,
    baseline: EngineConfig | None = None,
) -> EarlierTry | None:
    """The newest logged experiment of baseline + ``overrides`` (same candidate config,
    same baseline config, same golden set content), None when there is none."""
    base = baseline or store.baseline_config()
    cand = base.with_overrides(dict(overrides))
    for rec in reversed(store.load_records()):
        if (
            (rec.get("baseline") or {}).get("hash") == base.hash
            and (rec.get("result") or {}).get("hash") == cand.hash
            and rec.get("dataset_hash") == dataset_hash
        ):
            return EarlierTry(
                int(rec.get("number", 0)),
                str(rec.get("date", "")),
                str(rec.get("title", "")),
                rec,
                from_record(rec),
            )
    return None
