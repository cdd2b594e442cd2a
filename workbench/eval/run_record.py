"""The run record: what `wikirag eval` saves of one run (experiments/<kb>/runs/<id>.json),
typed and versioned.

Every reader (report, scorecard, failures, runs diff, the UI pages) gets a
:class:`RunRecord`, never the raw JSON: a field that is missing or of the wrong type fails
when the file is read, with one line naming the file and the field, instead of a report
that silently shows zeros. The JSON keeps the shape `wikirag eval` has always written;
``schema_version`` says which shape a file has, and :func:`migrate` brings older files to
the current one (records written before the version existed are version 1).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Self, TypeVar

from engine import __version__ as engine_version
from engine.config import EngineConfig
from engine.pipeline import Ranked
from workbench.eval.evaluate import EvalRun, QueryResult, list_runs
from workbench.eval.golden import GoldenItem, GoldenSet
from workbench.eval.record_schema import SCHEMA_VERSION, FieldReader, RunRecordError, migrate
from workbench.eval.run_labels import derived_label, run_name

# The reader for each field type a record read by its fields (RankedEntry, Attribution,
# QueryRecord) declares.
_READERS: dict[str, Callable[[FieldReader, str], Any]] = {
    "str": FieldReader.text,
    "float": FieldReader.number,
    "int | None": FieldReader.opt_integer,
    "float | None": FieldReader.opt_number,
    "str | None": FieldReader.opt_text,
    "tuple[str, ...]": FieldReader.texts,
    "Mapping[str, float]": FieldReader.numbers,
    "tuple[Attribution, ...]": lambda r, key: tuple(Attribution.read(a) for a in r.objs(key)),
    "tuple[RankedEntry, ...]": lambda r, key: tuple(RankedEntry.read(x) for x in r.objs(key)),
}
F = TypeVar("F")


def _read_fields(cls: type[F], r: FieldReader) -> F:
    """A record read field by field, in declared order, by the reader its type names."""
    return cls(**{f.name: _READERS[str(f.type)](r, f.name) for f in fields(cls)})  # type: ignore[arg-type]


@dataclass(frozen=True)
class _FlatRecord:
    """A record whose fields, in declared order, are its JSON keys (no nesting)."""

    @classmethod
    def read(cls, r: FieldReader) -> Self:
        return _read_fields(cls, r)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RankedEntry(_FlatRecord):
    """One chapter of a query's ranked list, with the rank each stage gave it."""

    node_id: str
    score: float
    vector_rank: int | None
    bm25_rank: int | None
    fusion_rank: int | None
    rerank_rank: int | None
    rerank_score: float | None
    injected_from: str | None

    def to_ranked(self) -> Ranked:
        return Ranked(**self.to_dict())


@dataclass(frozen=True)
class Attribution(_FlatRecord):
    """Where one relevant chapter missing from the top K was lost (evaluate.attribute)."""

    node_id: str
    cause: str  # a key of evaluate.CAUSES
    final_rank: int | None
    fusion_rank: int | None
    vector_rank: int | None  # rank within the channel's candidate pool
    bm25_rank: int | None
    vector_rank_any: int | None  # rank in the channel's whole cached list
    bm25_rank_any: int | None


# The golden item's fields a query record carries as they are (plus ``relevant``, as a
# tuple, and ``language``, which the item derives).
_ITEM_FIELDS = ("id", "query", "difficulty", "category", "split")


@dataclass(frozen=True)
class QueryRecord:
    """One golden query scored in one mode."""

    id: str
    query: str
    relevant: tuple[str, ...]
    difficulty: str
    category: str
    language: str
    split: str
    mode: str
    metrics: Mapping[str, float]
    latency_ms: float
    cause: str | None  # the query-level cause of a miss at K=5, None when nothing missed
    attribution: tuple[Attribution, ...]
    error: str | None
    ranked: tuple[RankedEntry, ...]

    @classmethod
    def read(cls, r: FieldReader) -> QueryRecord:
        return _read_fields(cls, r)

    @classmethod
    def from_result(cls, res: QueryResult) -> QueryRecord:
        it = res.item
        return cls(
            **{name: getattr(it, name) for name in _ITEM_FIELDS},
            relevant=tuple(it.relevant),
            language=it.language,
            mode=res.mode,
            metrics=res.metrics,
            latency_ms=round(res.latency_ms, 3),
            cause=res.cause,
            attribution=tuple(Attribution(**a) for a in res.attribution),
            error=res.error,
            ranked=tuple(RankedEntry(**vars(x)) for x in res.ranked),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "query": self.query,
            "relevant": list(self.relevant),
            "difficulty": self.difficulty,
            "category": self.category,
            "language": self.language,
            "split": self.split,
            "mode": self.mode,
            "metrics": self.metrics,
            "latency_ms": self.latency_ms,
            "cause": self.cause,
            "attribution": [a.to_dict() for a in self.attribution],
            "error": self.error,
            "ranked": [x.to_dict() for x in self.ranked],
        }

    @property
    def first_relevant_rank(self) -> int | None:
        """1-based rank of the first relevant chapter in the ranked list, None if absent."""
        rel = set(self.relevant)
        return next((i for i, r in enumerate(self.ranked, 1) if r.node_id in rel), None)

    def top(self, k: int) -> list[str]:
        return [r.node_id for r in self.ranked[:k]]

    def to_item(self) -> GoldenItem:
        """The golden item as far as the record knows it (labels as grade 1)."""
        return GoldenItem(
            **{name: getattr(self, name) for name in _ITEM_FIELDS}, relevant=self.relevant
        )


@dataclass(frozen=True)
class ModeSummary:
    """A mode's aggregates as computed when the run was saved."""

    means: Mapping[str, float]
    latency: Mapping[str, float]  # p50, p95 (ms)
    by_difficulty: Mapping[str, Mapping[str, float]]
    by_category: Mapping[str, Mapping[str, float]]
    by_language: Mapping[str, Mapping[str, float]]
    failures: Mapping[str, Sequence[str]]  # cause -> query ids
    queries: int
    # Share of the top 10 no one had judged when the run was scored (None: older records).
    unjudged_at_10: float | None = None

    @classmethod
    def read(cls, r: FieldReader) -> ModeSummary:
        def groups(key: str) -> dict[str, dict[str, float]]:
            g = r.obj(key)
            return {name: g.numbers(name) for name in g.data}

        f = r.obj("failures")
        return cls(
            means=r.numbers("means"),
            latency=r.numbers("latency"),
            by_difficulty=groups("by_difficulty"),
            by_category=groups("by_category"),
            by_language=groups("by_language"),
            failures={cause: list(f.texts(cause)) for cause in f.data},
            queries=r.integer("queries"),
            unjudged_at_10=r.opt_number("unjudged_at_10") if "unjudged_at_10" in r.data else None,
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "means": self.means,
            "latency": self.latency,
            "by_difficulty": self.by_difficulty,
            "by_category": self.by_category,
            "by_language": self.by_language,
            "failures": self.failures,
            "queries": self.queries,
        }
        if self.unjudged_at_10 is not None:
            out["unjudged_at_10"] = self.unjudged_at_10
        return out

    def breakdown(self, by: str) -> Mapping[str, Mapping[str, float]]:
        """Mean measures per group; ``by`` is difficulty | category | language."""
        return {
            "difficulty": self.by_difficulty,
            "category": self.by_category,
            "language": self.by_language,
        }[by]

    @property
    def misses(self) -> int:
        return sum(len(ids) for ids in self.failures.values())


@dataclass(frozen=True)
class DatasetRef:
    """The golden set a run scored: its name, file and content hash at the time."""

    name: str
    path: str
    hash: str


@dataclass(frozen=True)
class RunRecord:
    """One saved evaluation run: config, golden set, per-query rankings and aggregates."""

    run_id: str
    created: str
    engine_version: str
    kb: str
    index_fingerprint: str
    config_hash: str
    config_yaml: str
    dataset: DatasetRef
    split: str
    modes: tuple[str, ...]
    rerank: bool
    seconds: float
    cache_hits: int
    cache_misses: int
    errors: int
    summary: Mapping[str, ModeSummary]
    queries: tuple[QueryRecord, ...]
    answers: Mapping[str, Any] | None = None  # `eval --answers`: answer metrics, per query
    label: str = ""  # the config's name: `baseline`, `baseline+fusion.k=30`, `v7` ...
    schema_version: int = SCHEMA_VERSION

    @classmethod
    def from_run(cls, run: EvalRun) -> RunRecord:
        """The record of a run just evaluated."""
        return cls(
            run_id=run.run_id,
            created=run.created,
            engine_version=engine_version,
            kb=run.kb_name,
            index_fingerprint=run.index_fingerprint,
            config_hash=run.config.hash,
            config_yaml=run.config.to_yaml(),
            dataset=DatasetRef(run.dataset_name, run.dataset_path, run.dataset_hash),
            split=run.split,
            modes=tuple(run.modes),
            rerank=run.rerank,
            seconds=round(run.seconds, 3),
            cache_hits=run.cache_hits,
            cache_misses=run.cache_misses,
            errors=run.errors,
            summary={m: ModeSummary(**s) for m, s in run.summary().items()},
            queries=tuple(QueryRecord.from_result(r) for r in run.results),
            label=run.label or derived_label(run.config.to_yaml(), run.config.hash),
        )

    @classmethod
    def from_dict(cls, data: Any, source: str = "run record") -> RunRecord:
        """Parse (and migrate) a record's JSON object; ``source`` names it in errors."""
        if not isinstance(data, dict):
            raise RunRecordError(
                f"{source} is not a run record (expected a JSON object); delete it or re-run "
                "`wikirag eval`"
            )
        r = FieldReader(migrate(data, source), "", source)
        ds, cache, summ = r.obj("dataset"), r.obj("cache"), r.obj("summary")
        modes = r.texts("modes")
        answers = r.data.get("answers")
        if answers is not None and not isinstance(answers, dict):
            raise r.wrong("answers", answers, "an object")
        return cls(
            run_id=r.text("run_id"),
            created=r.text("created"),
            engine_version=r.text("engine_version"),
            kb=r.text("kb"),
            index_fingerprint=r.text("index_fingerprint"),
            config_hash=r.text("config_hash"),
            config_yaml=r.text("config_yaml"),
            dataset=DatasetRef(ds.text("name"), ds.text("path"), ds.text("hash")),
            split=r.text("split"),
            modes=modes,
            rerank=r.flag("rerank"),
            seconds=r.number("seconds"),
            cache_hits=cache.integer("hits"),
            cache_misses=cache.integer("misses"),
            errors=r.integer("errors"),
            summary={m: ModeSummary.read(summ.obj(m)) for m in modes},
            queries=tuple(QueryRecord.read(q) for q in r.objs("queries")),
            answers=answers,
            label=r.text("label"),
            schema_version=r.integer("schema_version"),
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON object `wikirag eval` writes (version 3 added ``label``)."""
        out: dict[str, Any] = {
            "schema_version": self.schema_version,
            "run_id": self.run_id,
            "label": self.label,
            "created": self.created,
            "engine_version": self.engine_version,
            "kb": self.kb,
            "index_fingerprint": self.index_fingerprint,
            "config_hash": self.config_hash,
            "config_yaml": self.config_yaml,
            "dataset": {
                "name": self.dataset.name,
                "path": self.dataset.path,
                "hash": self.dataset.hash,
            },
            "split": self.split,
            "modes": list(self.modes),
            "rerank": self.rerank,
            "seconds": self.seconds,
            "cache": {"hits": self.cache_hits, "misses": self.cache_misses},
            "errors": self.errors,
            "summary": {m: s.to_dict() for m, s in self.summary.items()},
            "queries": [q.to_dict() for q in self.queries],
        }
        if self.answers is not None:
            out["answers"] = self.answers
        return out

    def for_mode(self, mode: str) -> list[QueryRecord]:
        return [q for q in self.queries if q.mode == mode]

    def mode_summary(self, mode: str) -> ModeSummary:
        """The aggregates of ``mode``; a one-line error when the run did not score it."""
        if mode not in self.summary:
            raise RunRecordError(f"run {self.run_id} has modes {', '.join(self.modes)}, not {mode}")
        return self.summary[mode]

    def means(self, mode: str | None = None) -> dict[str, float]:
        """Mean measures of ``mode`` (default: the run's first mode)."""
        return dict(self.mode_summary(mode or self.modes[0]).means)

    @property
    def name(self) -> str:
        """How the run is listed: its config label and when it ran (``baseline · 2026-12-02
        02:53``); the run id stays the key every command accepts."""
        return run_name(self.label, self.created)

    def config(self) -> EngineConfig:
        return EngineConfig.from_yaml(self.config_yaml or "{}")

    def golden(self) -> GoldenSet:
        """The run's queries as a golden set (grade 1 labels), e.g. for TREC qrels."""
        items = {q.id: q.to_item() for q in self.queries}
        return GoldenSet(self.dataset.name, tuple(items.values()))

    def to_run(self) -> EvalRun:
        """The EvalRun this record was saved from (for the scorecard and statistics)."""
        return EvalRun(
            run_id=self.run_id,
            created=self.created,
            config=self.config(),
            dataset_name=self.dataset.name,
            dataset_path=self.dataset.path,
            dataset_hash=self.dataset.hash,
            split=self.split,
            modes=self.modes,
            rerank=self.rerank,
            results=[
                QueryResult(
                    q.to_item(),
                    q.mode,
                    [x.to_ranked() for x in q.ranked],
                    dict(q.metrics),
                    q.latency_ms,
                    [a.to_dict() for a in q.attribution],
                    q.cause,
                    q.error,
                )
                for q in self.queries
            ],
            kb_name=self.kb,
            index_fingerprint=self.index_fingerprint,
            seconds=self.seconds,
            cache_hits=self.cache_hits,
            cache_misses=self.cache_misses,
            label=self.label,
        )


def load_run_record(path: str | Path) -> RunRecord:
    """A saved run record; a one-line RunRecordError naming the file (and field) when the
    file is not one (edited, truncated, written by a newer wikirag)."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RunRecordError(f"run record {p}: no such file; run `wikirag eval`") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise RunRecordError(
            f"run record {p} is not valid JSON ({exc}); delete it or re-run eval"
        ) from exc
    return RunRecord.from_dict(data, f"run record {p}")


def latest_run_record(runs_dir: str | Path) -> RunRecord | None:
    runs = list_runs(runs_dir)
    return load_run_record(runs[0]) if runs else None


__all__ = [
    "Attribution",
    "DatasetRef",
    "ModeSummary",
    "QueryRecord",
    "RankedEntry",
    "RunRecord",
    "latest_run_record",
    "load_run_record",
]
