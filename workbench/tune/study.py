"""A finished optimizer search (a study): its trial table, the files it is kept in, and
the trial picked from it by the one-standard-error rule."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from engine.atomic import atomic_write_text
from workbench.eval.messages import Message, Translate, translated

STUDIES = "studies"  # folder of the study sidecars, beside the experiment log


@dataclass(frozen=True)
class TrialRow:
    """One trial: its values for the searched keys and its fold scores."""

    number: int
    params: dict[str, Any]
    value: float | None  # mean of the fold scores; None when the trial failed
    folds: list[float]
    changes: int  # config keys that differ from the baseline
    seconds: float
    state: str = "COMPLETE"


@dataclass
class Study:
    """A finished search: settings, every trial, the best and the picked trial."""

    study_id: str
    created: str
    kb: str
    dataset: str
    dataset_hash: str
    base_hash: str
    measure: str
    k_folds: int
    seed: int
    queries: int
    fold_sizes: list[int]
    space: list[dict[str, Any]]
    distributions: dict[str, str]  # param -> optuna distribution JSON (to rebuild the study)
    trials: list[TrialRow]
    baseline_folds: list[float]
    best: int | None
    pick: int | None
    budget: dict[str, Any]
    seconds: float
    stopped_by: str  # "trials" | "timeout"
    experiment: int | None = None
    notes: list[str] = field(default_factory=list)  # English, as saved and printed
    # the messages notes were rendered from, for a reader in another language (not saved)
    note_messages: list[Message] = field(default_factory=list)

    def add_note(self, msg: Message, *, first: bool = False) -> None:
        """Note ``msg``: its English in ``notes`` (first or last), the message beside it."""
        self.notes.insert(0 if first else len(self.notes), msg.render())
        self.note_messages.append(msg)

    def note_texts(self, translate: Translate | None = None) -> list[str]:
        """The notes in the reader's language where a message is known for them."""
        by_text = {m.render(): m for m in self.note_messages}
        return [translated(n, by_text.get(n), translate) for n in self.notes]

    def trial(self, number: int | None) -> TrialRow | None:
        return next((t for t in self.trials if t.number == number), None)

    @property
    def baseline_score(self) -> float:
        return fold_mean(self.baseline_folds)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(replace(self, note_messages=[]))
        del d["note_messages"]
        d["baseline_score"] = self.baseline_score
        return d

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Study:
        d = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        d["trials"] = [TrialRow(**t) for t in data.get("trials", [])]
        return cls(**d)

    def confirmed_gains(self) -> list[float]:
        """Per outer fold: the pick made without that fold, minus the baseline, on it."""
        return outer_fold_gains(self.trials, self.baseline_folds, self.k_folds)

    def optimism(self) -> dict[str, float | None]:
        """The search's gain on the queries it maximised vs on queries it never saw."""
        pick = self.trial(self.pick)
        tune = (pick.value - self.baseline_score) if pick and pick.value is not None else None
        gains = self.confirmed_gains()
        confirmed = fold_mean(gains) if gains else None
        return {
            "tune_gain": tune,
            "confirmed_gain": confirmed,
            "optimism": None if tune is None or confirmed is None else tune - confirmed,
        }

    def summary(self) -> dict[str, Any]:
        """What the experiment record carries (the full table stays in the sidecar)."""
        best, pick = self.trial(self.best), self.trial(self.pick)
        return {
            **self.optimism(),
            "study": self.study_id,
            "trials_file": f"{STUDIES}/{self.study_id}.json",
            "trials": len(self.trials),
            "measure": self.measure,
            "k_folds": self.k_folds,
            "seed": self.seed,
            "stopped_by": self.stopped_by,
            "seconds": round(self.seconds, 2),
            "cv": {
                "baseline": self.baseline_score,
                "best": best.value if best else None,
                "pick": pick.value if pick else None,
                "selection": selection_estimate(self.trials, self.k_folds),
            },
            "best_trial": self.best,
            "picked_trial": self.pick,
            "picked_params": pick.params if pick else {},
        }


def pick_trial(rows: Sequence[TrialRow], k_folds: int) -> tuple[int | None, int | None]:
    """(best trial, picked trial) by the one-standard-error rule (module docstring).

    A trial is within one standard error of the best when the mean of its per-fold
    shortfall d_f = best_f - trial_f is at most sd(d) / sqrt(k) (paired over folds: the
    folds share queries, so their difficulty cancels out).
    """
    done = [r for r in rows if r.value is not None and len(r.folds) == k_folds]
    if not done:
        return None, None
    best = max(done, key=lambda r: (r.value, -r.number))

    def close(r: TrialRow) -> bool:
        d = [b - x for b, x in zip(best.folds, r.folds, strict=True)]
        mean = fold_mean(d)
        sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (len(d) - 1)) if len(d) > 1 else 0.0
        return mean <= sd / math.sqrt(len(d)) + 1e-12

    pick = min(
        (r for r in done if close(r)), key=lambda r: (r.changes, -(r.value or 0.0), r.number)
    )
    return best.number, pick.number


def selection_estimate(rows: Sequence[TrialRow], k_folds: int) -> float | None:
    """What "take the best trial" scores on queries it was not chosen on (nested CV).

    For each fold f the trial with the best mean over the other folds is chosen and scored
    on f; the estimate is the mean of those scores. The best trial's own CV mean is biased
    upwards by the search (the maximum of many noisy means, the winner's curse); this is
    not, so the gap between the two is the part of the gain that is fitted noise.
    """
    done = [r for r in rows if r.value is not None and len(r.folds) == k_folds]
    if not done or k_folds < 2:
        return None
    picked = []
    for f in range(k_folds):

        def train(r: TrialRow, f: int = f) -> tuple[float, int]:
            return (fold_mean([x for g, x in enumerate(r.folds) if g != f]), -r.number)

        picked.append(max(done, key=train).folds[f])
    return fold_mean(picked)


def outer_fold_gains(
    rows: Sequence[TrialRow], baseline_folds: Sequence[float], k_folds: int
) -> list[float]:
    """Nested CV of the whole procedure: for each fold f, search + one-SE pick on the other
    folds, then score that pick on f against the baseline on f. The search never saw f, so
    these gains are what the optimizer's decision can trust (its tune gain is not)."""
    done = [r for r in rows if r.value is not None and len(r.folds) == k_folds]
    if not done or k_folds < 3 or len(baseline_folds) != k_folds:
        return []  # a one-SE pick needs at least two training folds
    out = []
    for f in range(k_folds):
        train = [replace(r, folds=[x for g, x in enumerate(r.folds) if g != f]) for r in done]
        train = [replace(r, value=fold_mean(r.folds)) for r in train]
        _, pick = pick_trial(train, k_folds - 1)
        chosen = next(r for r in done if r.number == pick)
        out.append(chosen.folds[f] - baseline_folds[f])
    return out


def save_study(folder: str | Path, study: Study) -> Path:
    path = Path(folder) / STUDIES / f"{study.study_id}.json"
    atomic_write_text(path, json.dumps(study.to_dict(), ensure_ascii=False, indent=1) + "\n")
    return path


def load_studies(folder: str | Path) -> list[Study]:
    """The KB's studies, oldest first (unreadable files are skipped: they are ours)."""
    out = []
    for path in sorted((Path(folder) / STUDIES).glob("*.json")):
        try:
            out.append(Study.from_dict(json.loads(path.read_text(encoding="utf-8"))))
        except (OSError, ValueError, TypeError, KeyError):
            continue
    return out


def fold_mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0
