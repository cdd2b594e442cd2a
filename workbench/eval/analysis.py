"""Follow a number to its cause: failing queries worst first, one query's full story, and
saved runs compared query by query.

Pure functions over run records (:class:`workbench.eval.run_record.RunRecord`), so the
Evaluate and Compare pages, the CLI (`wikirag failures`, `wikirag runs diff`) and tests read one truth.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from workbench.eval.causes import MissCause, QueryMiss, gold_fate, query_miss
from workbench.eval.run_record import QueryRecord, RunRecord

# Which stage of the pipeline a cause blames: the detail view highlights that column.
CAUSE_STAGE = {
    "lost_in_both": "candidates",
    "lost_in_bm25": "bm25",
    "lost_in_vector": "vector",
    "dropped_by_fusion": "fusion",
    "demoted_by_rerank": "rerank",
    "cut_at_k": "final",
}
SLICES = ("difficulty", "category", "language")
OUTCOMES = ("won", "lost", "tied", "changed")
EPS = 1e-9


@dataclass(frozen=True)
class FailureRow:
    id: str
    query: str
    cause: str  # key of CAUSES
    difficulty: str
    category: str
    language: str
    recall5: float
    mrr: float
    missing: int  # relevant chapters not in the top 5
    miss: QueryMiss | None = None  # the one story of this miss (workbench.eval.causes)

    @property
    def cause_text(self) -> str:
        return self.miss.text() if self.miss else ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "query": self.query,
            "cause": self.cause,
            "cause_text": self.cause_text,
            "difficulty": self.difficulty,
            "category": self.category,
            "language": self.language,
            "recall@5": self.recall5,
            "mrr": self.mrr,
            "missing": self.missing,
        }


def failures(
    record: RunRecord,
    mode: str,
    *,
    cause: str | None = None,
    slice_by: str | None = None,
    slice_value: str | None = None,
) -> list[FailureRow]:
    """Queries that missed a relevant chapter at K=5 (or errored), worst first.

    Worst = lowest recall@5, then lowest MRR, then id; filter by cause and by one slice.
    """
    if slice_by is not None and slice_by not in SLICES:
        raise ValueError(f"slice must be one of {', '.join(SLICES)}; got {slice_by!r}")
    rows = []
    for q in record.for_mode(mode):
        c = q.cause or ("error" if q.error else None)
        if c is None:
            continue
        if cause is not None and c != cause:
            continue
        if slice_by is not None and slice_of(q, slice_by) != str(slice_value):
            continue
        rows.append(
            FailureRow(
                id=q.item.id,
                query=q.item.query,
                cause=c,
                difficulty=q.item.difficulty,
                category=q.item.category,
                language=q.language,
                recall5=float(q.metrics.get("recall@5", 0.0)),
                mrr=float(q.metrics.get("mrr", 0.0)),
                missing=len(q.attribution),
                miss=query_miss(q),
            )
        )
    rows.sort(key=lambda r: (r.recall5, r.mrr, r.id))
    return rows


@dataclass(frozen=True)
class RankedRow:
    rank: int
    node_id: str
    relevant: bool
    score: float
    vector: int | None
    bm25: int | None
    fusion: int | None
    rerank: int | None
    injected_from: str | None = None


@dataclass(frozen=True)
class GoldRow:
    node_id: str
    final: int | None  # 1-based rank in the evaluated list, None when absent
    vector: int | None  # rank within the channel's candidate pool
    bm25: int | None
    fusion: int | None
    vector_any: int | None  # rank in the channel's whole cached list (past the pool)
    bm25_any: int | None
    cause: str | None  # None: found in the top 5
    lost_at: str | None  # the stage to highlight (CAUSE_STAGE)
    fate: MissCause | None = None  # the cause as the failures table and compare show it


@dataclass(frozen=True)
class QueryStory:
    id: str
    query: str
    mode: str
    metrics: Mapping[str, float]
    ranked: list[RankedRow]
    gold: list[GoldRow]
    error: str | None = None
    meta: Mapping[str, str] = field(default_factory=dict)
    miss: QueryMiss | None = None  # the same story the failures table shows


def slice_of(q: QueryRecord, by: str) -> str:
    """The query's value of slice ``by`` (one of SLICES)."""
    if by not in SLICES:
        raise ValueError(f"slice must be one of {', '.join(SLICES)}; got {by!r}")
    return q.group(by)


def _query(record: RunRecord, mode: str, qid: str) -> QueryRecord | None:
    return next((x for x in record.for_mode(mode) if x.item.id == qid), None)


def story(record: RunRecord, mode: str, qid: str) -> QueryStory:
    """One query: its ranked list (integer stage ranks) and each gold chapter's journey."""
    q = _query(record, mode, qid)
    if q is None:
        raise KeyError(f"query {qid!r} is not in run {record.run_id} ({mode})")
    relevant = list(q.item.relevant)
    ranked = [
        RankedRow(
            rank=i,
            node_id=r.node_id,
            relevant=r.node_id in relevant,
            score=float(r.score or 0.0),
            vector=r.vector_rank,
            bm25=r.bm25_rank,
            fusion=r.fusion_rank,
            rerank=r.rerank_rank,
            injected_from=r.injected_from,
        )
        for i, r in enumerate(q.ranked, 1)
    ]
    at = {a.node_id: a for a in q.attribution}
    pos = {r.node_id: r for r in ranked}
    gold = []
    for nid in relevant:
        a = at.get(nid)
        r = pos.get(nid)
        if a is not None:
            gold.append(
                GoldRow(
                    nid,
                    a.final_rank,
                    a.vector_rank,
                    a.bm25_rank,
                    a.fusion_rank,
                    a.vector_rank_any,
                    a.bm25_rank_any,
                    a.cause,
                    CAUSE_STAGE.get(a.cause),
                    gold_fate(q, nid),
                )
            )
        else:
            gold.append(
                GoldRow(
                    nid,
                    r.rank if r else None,
                    r.vector if r else None,
                    r.bm25 if r else None,
                    r.fusion if r else None,
                    None,
                    None,
                    None,
                    None,
                )
            )
    return QueryStory(
        id=q.item.id,
        query=q.item.query,
        mode=mode,
        metrics=dict(q.metrics),
        ranked=ranked,
        gold=gold,
        error=q.error,
        meta={**{k: slice_of(q, k) for k in SLICES}, "split": q.item.split},
        miss=query_miss(q),
    )


@dataclass(frozen=True)
class MatrixRow:
    id: str
    query: str
    values: tuple[float, ...]  # the measure in each run, in the order given
    deltas: tuple[float, ...]  # run i - run 0, for i >= 1
    outcome: str  # won | lost | tied | changed, of the last run vs the first
    first_relevant: tuple[int | None, ...]  # rank of the first relevant chapter per run

    def to_dict(self, labels: Sequence[str], measure: str) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "query": self.query, "outcome": self.outcome}
        for lab, v in zip(labels, self.values, strict=True):
            out[f"{measure} {lab}"] = v
        for lab, d in zip(labels[1:], self.deltas, strict=True):
            out[f"Δ {lab}"] = d
        return out


def _modes(records: Sequence[RunRecord], mode: str | Sequence[str]) -> list[str]:
    """One mode for every run, or one per run (a candidate may change ``search.mode``)."""
    modes = [mode] * len(records) if isinstance(mode, str) else list(mode)
    if len(modes) != len(records):
        raise ValueError(f"{len(records)} runs need {len(records)} modes; got {len(modes)}")
    return modes


def run_matrix(
    records: Sequence[RunRecord],
    mode: str | Sequence[str],
    measure: str = "mrr",
    *,
    outcome: str | None = None,
) -> list[MatrixRow]:
    """Every query present in all runs: the measure per run and the outcome of the last run
    against the first (won / lost / tied; ``changed`` = same measure, different top 10).

    Sorted by the largest absolute delta first, so the queries that moved lead.
    """
    if len(records) < 2:
        raise ValueError("compare at least two runs")
    if outcome is not None and outcome not in OUTCOMES:
        raise ValueError(f"outcome must be one of {', '.join(OUTCOMES)}; got {outcome!r}")
    by_run = [
        {q.item.id: q for q in r.for_mode(m)}
        for r, m in zip(records, _modes(records, mode), strict=True)
    ]
    common = [qid for qid in by_run[0] if all(qid in b for b in by_run[1:])]
    rows = []
    for qid in common:
        qs = [b[qid] for b in by_run]
        vals = tuple(float(q.metrics.get(measure, 0.0)) for q in qs)
        deltas = tuple(v - vals[0] for v in vals[1:])
        last = deltas[-1]
        if last > EPS:
            oc = "won"
        elif last < -EPS:
            oc = "lost"
        else:
            top = [q.top(10) for q in (qs[0], qs[-1])]
            oc = "changed" if top[0] != top[1] else "tied"
        if outcome is not None and oc != outcome:
            continue
        rows.append(
            MatrixRow(
                qid,
                qs[0].item.query,
                vals,
                deltas,
                oc,
                tuple(q.first_relevant_rank for q in qs),
            )
        )
    rows.sort(key=lambda r: (-max((abs(d) for d in r.deltas), default=0.0), r.id))
    return rows


def outcome_counts(rows: Sequence[MatrixRow]) -> dict[str, int]:
    counts = dict.fromkeys(OUTCOMES, 0)
    for r in rows:
        counts[r.outcome] += 1
    return counts


def side_by_side(
    records: Sequence[RunRecord], mode: str | Sequence[str], qid: str, depth: int = 10
) -> tuple[list[str], list[list[tuple[str, bool]]]]:
    """The gold ids and each run's top ``depth`` as (node_id, is_relevant) for one query."""
    lists: list[list[tuple[str, bool]]] = []
    gold: list[str] = []
    for rec, m in zip(records, _modes(records, mode), strict=True):
        q = _query(rec, m, qid)
        if q is None:
            lists.append([])
            continue
        gold = list(q.item.relevant)
        rel = set(gold)
        lists.append([(nid, nid in rel) for nid in q.top(depth)])
    return gold, lists


def run_label(record: RunRecord) -> str:
    """How a saved run is listed: its config label and time (``RunRecord.name``)."""
    return record.name
