"""A report of one evaluation run, as plain data: what every report format shows.

Sections (docs/design.md, "Workbench"): metrics, results, categories, failures, optimizations,
recommendations, scorecard. :func:`build_report` collects them from a run record, the
experiment log and a scorecard; the renderers (``html_report``, ``markdown_report`` and the
CSV / JSON formats in ``formats``) only format them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.credentials import redact_urls
from workbench.eval.attribution import CAUSES
from workbench.eval.messages import Message, Translate, translated
from workbench.eval.run_record import ModeSummary, QueryRecord, RunRecord
from workbench.eval.unjudged import share_message
from workbench.tune.experiment_history import trajectory
from workbench.tune.experiment_store import ExperimentStore
from workbench.tune.study import load_studies

SECTIONS = (
    ("metrics", Message("Metrics")),
    ("results", Message("Results")),
    ("categories", Message("Categories")),
    ("failures", Message("Failures")),
    ("optimizations", Message("Optimizations")),
    ("recommendations", Message("Recommendations")),
    ("scorecard", Message("Scorecard")),
)
KS = (1, 3, 5, 10, 20)
CSV_FIELDS = (
    "id",
    "query",
    "difficulty",
    "category",
    "language",
    "split",
    "recall@5",
    "mrr",
    "hit@5",
    "ndcg@10",
    "first_relevant_rank",
    "cause",
    "latency_ms",
    "relevant",
    "top5",
    "error",
)


@dataclass
class Report:
    """Everything a report shows, as plain data (renderers only format it)."""

    title: str
    run: dict[str, Any]  # run id, created, config hash, dataset, split, mode, counts
    mode: str
    means: dict[str, float]
    latency: dict[str, float]
    queries: list[dict[str, Any]]  # one row per query (CSV_FIELDS)
    breakdowns: dict[str, dict[str, dict[str, float]]]  # by -> group -> measures (+ "n")
    failures: list[dict[str, Any]]  # [{cause, label, queries: [{id, query}]}]
    optimizations: list[dict[str, Any]]
    trajectory: list[dict[str, Any]]
    recommendations: list[dict[str, Any]]
    scorecard: dict[str, Any] | None
    config_yaml: str = ""
    notes: list[str] = field(default_factory=list)
    study: dict[str, Any] | None = None  # the latest optimizer study (trials), as stored
    # the title and notes as messages, for a renderer given a translator (``title`` and
    # ``notes`` are their English text, what --format json carries)
    title_message: Message | None = None
    note_messages: list[Message] = field(default_factory=list)

    def title_text(self, translate: Translate | None = None) -> str:
        return translated(self.title, self.title_message, translate)

    def note_texts(self, translate: Translate | None = None) -> list[str]:
        msgs: list[Message | None] = list(self.note_messages)
        msgs += [None] * (len(self.notes) - len(msgs))
        return [translated(n, m, translate) for n, m in zip(self.notes, msgs, strict=False)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "run": self.run,
            "mode": self.mode,
            "metrics": {"means": self.means, "latency": self.latency},
            "results": self.queries,
            "categories": self.breakdowns,
            "failures": self.failures,
            "optimizations": {
                "records": self.optimizations,
                "trajectory": self.trajectory,
                "study": self.study,
            },
            "recommendations": self.recommendations,
            "scorecard": self.scorecard,
            "config_yaml": self.config_yaml,
            "notes": self.notes,
        }


class _Records:
    """Duck-types ExperimentStore.load_records for ``trajectory`` over given records."""

    def __init__(self, records: list[dict[str, Any]]) -> None:
        self._records = records

    def load_records(self) -> list[dict[str, Any]]:
        return self._records


def build_report(
    ws: Any,
    record: RunRecord,
    *,
    scorecard: Any = None,
    log_records: Sequence[Mapping[str, Any]] | None = None,
    mode: str | None = None,
) -> Report:
    """Collect a report's data from a run record, the experiment log and a scorecard.

    ``log_records`` default to ``experiments.jsonl`` of ``ws`` (none when ``ws`` is None).
    ``scorecard``: a Scorecard or its ``to_dict()``. ``mode``: the run's first by default.
    """
    mode = mode or record.modes[0]
    summ = record.mode_summary(mode)
    if log_records is None:
        log_records = ExperimentStore(ws.experiments).load_records() if ws is not None else []
    records = [dict(r) for r in log_records]
    rows = [_query_row(q) for q in record.for_mode(mode)]
    breakdowns = _breakdowns(summ, rows)
    failures = _failures(summ, rows)
    card = scorecard.to_dict() if hasattr(scorecard, "to_dict") else scorecard
    notes: list[Message] = []
    if record.errors:
        notes.append(
            Message("{n} queries failed with errors (see the results).", {"n": record.errors})
        )
    if summ.unjudged_at_10 is not None:
        notes.append(share_message(summ.unjudged_at_10, sentence=True))
    title = Message("WikiRAG evaluation report — {kb}", {"kb": record.kb or record.dataset.name})
    return Report(
        title=title.render(),
        title_message=title,
        note_messages=notes,
        run={
            "run_id": record.run_id,
            "name": record.name,  # label · time: how the run is listed everywhere
            "created": record.created,
            "kb": record.kb,
            "config_hash": record.config_hash,
            "dataset": record.dataset.name,
            "dataset_hash": record.dataset.hash,
            "split": record.split,
            "modes": list(record.modes),
            "rerank": record.rerank,
            "queries": len(rows),
            "errors": record.errors,
            "engine_version": record.engine_version,
        },
        mode=mode,
        means=dict(summ.means),
        latency=dict(summ.latency),
        queries=rows,
        breakdowns=breakdowns,
        failures=failures,
        optimizations=[_opt_row(r) for r in records],
        trajectory=trajectory(_Records(records)),  # type: ignore[arg-type]
        recommendations=_recommendations(card),
        scorecard=card,
        config_yaml=redact_urls(record.config_yaml),  # no user:pass@ in a shared report
        notes=[n.render() for n in notes],
        study=_latest_study(ws),
    )


def _query_row(q: QueryRecord) -> dict[str, Any]:
    """One query of the run as the report's results table shows it."""
    m = q.metrics
    return {
        "id": q.item.id,
        "query": q.item.query,
        "difficulty": q.item.difficulty,
        "category": q.item.category,
        "language": q.language,
        "split": q.item.split,
        # A measure an older run did not compute reads as 0 (metrics are open-ended).
        "recall@5": float(m.get("recall@5", 0.0)),
        "mrr": float(m.get("mrr", 0.0)),
        "hit@5": float(m.get("hit@5", 0.0)),
        "ndcg@10": float(m.get("ndcg@10", 0.0)),
        "first_relevant_rank": q.first_relevant_rank,
        "cause": q.cause or "",
        "latency_ms": float(q.latency_ms),
        "relevant": " ".join(q.item.relevant),
        "top5": " ".join(q.top(5)),
        "error": q.error or "",
    }


def _breakdowns(
    summ: ModeSummary, rows: Sequence[Mapping[str, Any]]
) -> dict[str, dict[str, dict[str, float]]]:
    """The means by difficulty, category and language, each group with its query count."""
    breakdowns: dict[str, dict[str, dict[str, float]]] = {}
    for by in ("difficulty", "category", "language"):
        groups = {g: dict(v) for g, v in summ.breakdown(by).items()}
        if by == "difficulty":  # easy, medium, hard first; anything else after
            order = {d: n for n, d in enumerate(("easy", "medium", "hard"))}
            groups = dict(sorted(groups.items(), key=lambda kv: (order.get(kv[0], 3), kv[0])))
        counts: dict[str, int] = {}
        for r in rows:
            counts[str(r[by])] = counts.get(str(r[by]), 0) + 1
        breakdowns[by] = {g: {**v, "n": counts.get(g, 0)} for g, v in groups.items()}
    return breakdowns


def _failures(summ: ModeSummary, rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each failure cause with its label and the queries it explains."""
    by_id = {r["id"]: r for r in rows}
    return [
        {
            "cause": cause,
            "label": CAUSES.get(cause, cause),
            "queries": [{"id": i, "query": by_id.get(i, {}).get("query", "")} for i in ids],
        }
        for cause, ids in summ.failures.items()
    ]


def _recommendations(card: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The scorecard's weaknesses, each with the command that tries its next experiment."""
    recs = []
    for d in (card or {}).get("weaknesses", []):
        exp = d.get("next_experiment")
        cmd = ""
        if exp:
            sets = " ".join(f"--set {k}={_yaml_text(v)}" for k, v in exp["overrides"].items())
            cmd = f"wikirag experiment try {sets}"
        recs.append(
            {
                "dimension": d["name"],
                "score": d["score"],
                "loss": d["loss"],
                "rule": d["rule"],
                "experiment": exp,
                "command": cmd,
                "action": d.get("action", ""),
            }
        )
    return recs


def _latest_study(ws: Any) -> dict[str, Any] | None:
    if ws is None:
        return None

    studies = load_studies(ws.experiments)
    return studies[-1].to_dict() if studies else None


def _opt_row(r: Mapping[str, Any]) -> dict[str, Any]:
    base = r.get("baseline", {}) or {}
    res = r.get("result", {}) or {}
    return {
        "number": r.get("number"),
        "date": r.get("date", ""),
        "tier": r.get("tier", ""),
        "title": r.get("title", ""),
        "decision": r.get("decision", ""),
        "tune_recall@5": [
            base.get("tune", {}).get("recall@5"),
            res.get("tune", {}).get("recall@5"),
        ],
        "tune_mrr": [base.get("tune", {}).get("mrr"), res.get("tune", {}).get("mrr")],
        "holdout_recall@5": [
            base.get("holdout", {}).get("recall@5"),
            res.get("holdout", {}).get("recall@5"),
        ],
    }


def _yaml_text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def pair_text(p: Sequence[Any]) -> str:
    """``before → after`` of two optional measures (``-`` for a missing one)."""

    def num(v: Any) -> str:
        return "-" if v is None else f"{v:.3f}"

    return f"{num(p[0])} → {num(p[1])}"
