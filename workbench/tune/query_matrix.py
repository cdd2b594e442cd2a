"""The per-query matrix of a comparison: one row per golden query, each config's value of
every measure, the change against the reference and its outcome (won / lost / tied).

Built from saved run records, so `wikirag compare --json`, `wikirag runs diff` and the
Tune page read the same rows; filters (outcome, slice) and the sort by change are here too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from workbench.eval.measures import shown
from workbench.eval.run_record import QueryRecord, RunRecord

OUTCOMES = ("won", "lost", "tied")
FILTERS = ("won", "lost", "changed")  # changed: won or lost against any candidate
SLICES = ("difficulty", "category", "language", "split")
EPS = 1e-9


def outcome_of(delta: float) -> str:
    """won / lost / tied for a candidate's change in a measure (candidate - reference)."""
    return "won" if delta > EPS else "lost" if delta < -EPS else "tied"


@dataclass(frozen=True)
class QueryRow:
    qid: str
    query: str
    slices: Mapping[str, str]  # difficulty, category, language, split
    values: tuple[Mapping[str, float], ...]  # per config (reference first): measure -> value
    first_relevant: tuple[int | None, ...]  # per config: rank of the first gold chapter

    def value(self, i: int, measure: str) -> float:
        return float(self.values[i].get(measure, 0.0))

    def delta(self, i: int, measure: str) -> float:
        """Config ``i`` minus the reference (``i`` >= 1)."""
        return self.value(i, measure) - self.value(0, measure)

    def outcome(self, i: int, measure: str) -> str:
        return outcome_of(self.delta(i, measure))

    def change(self, measure: str) -> float:
        """The largest absolute change over the candidates: what the matrix sorts by."""
        return max((abs(self.delta(i, measure)) for i in range(1, len(self.values))), default=0.0)

    def to_dict(self, labels: Sequence[str], measure: str) -> dict[str, Any]:
        return {
            "qid": self.qid,
            "query": self.query,
            **self.slices,
            "values": {lab: dict(v) for lab, v in zip(labels, self.values, strict=True)},
            "first_relevant_rank": dict(zip(labels, self.first_relevant, strict=True)),
            "delta": {lab: self.delta(i, measure) for i, lab in enumerate(labels) if i},
            "outcome": {lab: self.outcome(i, measure) for i, lab in enumerate(labels) if i},
        }


@dataclass(frozen=True)
class QueryMatrix:
    labels: tuple[str, ...]
    run_ids: tuple[str, ...]
    modes: tuple[str, ...]
    measures: tuple[str, ...]
    rows: tuple[QueryRow, ...]  # in the golden set's order

    def select(
        self,
        measure: str = "mrr",
        *,
        outcome: str | None = None,
        candidate: int | None = None,
        slice_by: str | None = None,
        slice_value: str | None = None,
        sort: str = "change",
    ) -> list[QueryRow]:
        """Rows filtered and sorted.

        ``outcome``: won / lost / tied against ``candidate`` (default: any candidate for
        won/lost, every candidate for tied) or ``changed`` (won or lost against any);
        ``sort``: ``change`` (largest absolute change first, then id) or ``golden``.
        """
        if outcome is not None and outcome not in (*OUTCOMES, "changed"):
            raise ValueError(f"outcome must be one of won, lost, tied, changed; got {outcome!r}")
        if slice_by is not None and slice_by not in SLICES:
            raise ValueError(f"slice must be one of {', '.join(SLICES)}; got {slice_by!r}")
        if sort not in ("change", "golden"):
            raise ValueError(f"sort must be change or golden; got {sort!r}")
        cands = [candidate] if candidate is not None else list(range(1, len(self.labels)))
        rows = []
        for r in self.rows:
            if slice_by is not None and r.slices.get(slice_by) != slice_value:
                continue
            got = {r.outcome(i, measure) for i in cands}
            if outcome == "changed" and not got - {"tied"}:
                continue
            if outcome == "tied" and got != {"tied"}:
                continue
            if outcome in ("won", "lost") and outcome not in got:
                continue
            rows.append(r)
        if sort == "change":
            rows.sort(key=lambda r: (-r.change(measure), r.qid))
        return rows

    def counts(self, candidate: int, measure: str = "mrr") -> dict[str, int]:
        """won / lost / tied of one candidate against the reference."""
        out = dict.fromkeys(OUTCOMES, 0)
        for r in self.rows:
            out[r.outcome(candidate, measure)] += 1
        return out

    def row(self, qid: str) -> QueryRow:
        found = next((r for r in self.rows if r.qid == qid), None)
        if found is None:
            raise KeyError(f"query {qid!r} is not in this comparison")
        return found

    def to_dict(self, measure: str = "mrr") -> dict[str, Any]:
        return {
            "measure": measure,
            "measures": list(self.measures),
            "labels": list(self.labels),
            "run_ids": list(self.run_ids),
            "counts": {lab: self.counts(i, measure) for i, lab in enumerate(self.labels) if i},
            "rows": [r.to_dict(self.labels, measure) for r in self.rows],
        }


def _values(q: QueryRecord, measures: Sequence[str]) -> dict[str, float]:
    return {m: float(q.metrics.get(m, 0.0)) for m in measures}


def build_matrix(
    records: Sequence[RunRecord],
    labels: Sequence[str],
    modes: Sequence[str] | None = None,
    measures: Sequence[str] | None = None,
) -> QueryMatrix:
    """One row per query of the reference run present in every run (paired by id)."""
    if len(records) != len(labels):
        raise ValueError("one label per run")
    measures = shown("matrix") if measures is None else measures
    modes = list(modes or [r.modes[0] for r in records])
    by_run = [{q.item.id: q for q in r.for_mode(m)} for r, m in zip(records, modes, strict=True)]
    rows = []
    for qid, q0 in by_run[0].items():
        qs = [b.get(qid) for b in by_run]
        if any(q is None for q in qs):
            continue
        present = [q for q in qs if q is not None]
        rows.append(
            QueryRow(
                qid,
                q0.item.query,
                {
                    "difficulty": q0.item.difficulty,
                    "category": q0.item.category,
                    "language": q0.language,
                    "split": q0.item.split,
                },
                tuple(_values(q, measures) for q in present),
                tuple(q.first_relevant_rank for q in present),
            )
        )
    return QueryMatrix(
        tuple(labels),
        tuple(r.run_id for r in records),
        tuple(modes),
        tuple(measures),
        tuple(rows),
    )
