"""Is the latest saved run the baseline's? The Overview says so when it is not, so numbers
from a run of some experiment are not read as the baseline's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workbench.eval.messages import Message
from workbench.eval.run_record import latest_run_record
from workbench.tune.experiment_store import ExperimentStore


@dataclass(frozen=True)
class LatestRun:
    run_id: str
    name: str  # label · time
    config_hash: str
    baseline_hash: str

    @property
    def is_baseline(self) -> bool:
        return self.config_hash == self.baseline_hash

    @property
    def message(self) -> Message | None:
        """None when the latest run is the baseline's; else what to read it as."""
        if self.is_baseline:
            return None
        return Message(
            "the latest run ({name}) is not of the baseline config: its numbers are that "
            "config's, not the baseline's",
            {"name": self.name},
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "name": self.name,
            "config_hash": self.config_hash,
            "baseline_hash": self.baseline_hash,
            "is_baseline": self.is_baseline,
            "text": self.message.render() if self.message else "",
        }


def latest_run_status(ws: Any) -> LatestRun | None:
    """The latest saved run against the accepted baseline, None when there is no run."""
    rec = latest_run_record(ws.runs_dir)
    if rec is None:
        return None
    base = ExperimentStore(ws.experiments).baseline_config()
    return LatestRun(rec.run_id, rec.name, rec.config_hash, base.hash)
