"""The record of one evaluation run: what ``Evaluator.run`` returns, what `wikirag eval`
saves (experiments/<kb>/runs/<id>.json), and what every reader (compare, reports, the
scorecard, runs diff, the UI pages) gets back, typed and versioned.

A field that is missing or of the wrong type fails when the file is read, with one line
naming the file and the field, instead of a report that silently shows zeros. The JSON
keeps the shape `wikirag eval` has always written; ``schema_version`` says which shape a
file has, and ``record_schema.migrate`` brings older files to the current one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

from engine import __version__ as engine_version
from engine.atomic import atomic_write_text
from engine.config import EngineConfig
from engine.errors import EngineError
from engine.pipeline import Ranked
from workbench.eval import metrics as M
from workbench.eval.attribution import CAUSES, Attribution
from workbench.eval.golden import GoldenItem, GoldenSet
from workbench.eval.percentiles import latency_percentiles
from workbench.eval.record_schema import SCHEMA_VERSION, FieldReader, RunRecordError, migrate
from workbench.eval.run_labels import derived_label, run_name

UNJUDGED_K = 10  # the depth of the unjudged share every run reports

# The reader for each field type of a record read by its fields (Ranked, Attribution).
_READERS: dict[str, Callable[[FieldReader, str], Any]] = {
    "str": FieldReader.text,
    "float": FieldReader.number,
    "int | None": FieldReader.opt_integer,
    "float | None": FieldReader.opt_number,
    "str | None": FieldReader.opt_text,
}
F = TypeVar("F")
# The record's top-level text fields, in the order they are read.
_HEAD_TEXTS = (
    "run_id",
    "created",
    "engine_version",
    "kb",
    "index_fingerprint",
    "config_hash",
)


def _read_fields(cls: type[F], r: FieldReader) -> F:
    """A flat record (its fields, in declared order, are its JSON keys) read field by field."""
    return cls(**{f.name: _READERS[str(f.type)](r, f.name) for f in fields(cls)})  # type: ignore[arg-type]


@dataclass(frozen=True)
class QueryRecord:
    """One golden query scored in one mode."""

    item: GoldenItem  # as scored; a loaded record knows its labels, not their grades
    mode: str
    ranked: tuple[Ranked, ...]
    metrics: Mapping[str, float]
    latency_ms: float
    attribution: tuple[Attribution, ...]  # one per relevant chapter missing from the top K
    cause: str | None  # the query-level cause (the first chapter's), None when nothing missed
    error: str | None = None
    # The language a saved record was written with ("" = the item's own, worked out when
    # asked: most runs are scored and compared, never sliced or saved).
    saved_language: str = ""

    @property
    def language(self) -> str:
        """The language the query is sliced by (``zh`` | ``en``)."""
        return self.saved_language or self.item.language

    @classmethod
    def read(cls, r: FieldReader) -> QueryRecord:
        # Read in the order the fields are written, so an error names the first bad one.
        qid, query, relevant = r.text("id"), r.text("query"), r.texts("relevant")
        difficulty, category = r.text("difficulty"), r.text("category")
        language, split = r.text("language"), r.text("split")
        item = GoldenItem(qid, query, relevant, difficulty, category, split=split)
        mode, metrics, latency = r.text("mode"), r.numbers("metrics"), r.number("latency_ms")
        cause = r.opt_text("cause")
        attribution = tuple(_read_fields(Attribution, a) for a in r.objs("attribution"))
        error = r.opt_text("error")
        ranked = tuple(_read_fields(Ranked, x) for x in r.objs("ranked"))
        return cls(item, mode, ranked, metrics, latency, attribution, cause, error, language)

    def to_dict(self) -> dict[str, Any]:
        it = self.item
        return {
            "id": it.id,
            "query": it.query,
            "relevant": list(it.relevant),
            "difficulty": it.difficulty,
            "category": it.category,
            "language": self.language,
            "split": it.split,
            "mode": self.mode,
            "metrics": self.metrics,
            "latency_ms": self.latency_ms,
            "cause": self.cause,
            "attribution": [asdict(a) for a in self.attribution],
            "error": self.error,
            "ranked": [asdict(x) for x in self.ranked],
        }

    def group(self, by: str) -> str:
        """The query's slice: difficulty | category | language | split."""
        return self.language if by == "language" else str(getattr(self.item, by))

    @property
    def first_relevant_rank(self) -> int | None:
        """1-based rank of the first relevant chapter in the ranked list, None if absent."""
        rel = set(self.item.relevant)
        return next((i for i, r in enumerate(self.ranked, 1) if r.node_id in rel), None)

    def top(self, k: int) -> list[str]:
        return [r.node_id for r in self.ranked[:k]]

    def distinct_top(self, k: int) -> list[str]:
        """The first ``k`` distinct chapters (what the measures score)."""
        return M.dedupe(h.node_id for h in self.ranked)[:k]

    def current_item(self, gs: GoldenSet | None) -> GoldenItem:
        """The golden set's current version of this query (its judgments may be newer)."""
        current = gs.get(self.item.id) if gs is not None else None
        return current if current is not None else self.item


@dataclass(frozen=True)
class ModeSummary:
    """A mode's aggregates, as computed when the run was scored."""

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
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        if self.unjudged_at_10 is None:
            del out["unjudged_at_10"]
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


@dataclass
class RunRecord:
    """One evaluation run: config, golden set, per-query rankings and aggregates."""

    run_id: str
    created: str
    # The config: the EngineConfig a fresh run was scored with, or a saved record's YAML
    # text, parsed when first asked (a record whose config no longer parses still lists).
    config_source: EngineConfig | str
    config_hash: str
    dataset: DatasetRef
    split: str
    modes: tuple[str, ...]
    rerank: bool
    queries: tuple[QueryRecord, ...]
    kb: str = ""
    index_fingerprint: str = ""
    seconds: float = 0.0
    cache_hits: int = 0
    cache_misses: int = 0
    label: str = ""  # the config's name: `baseline`, `v7` ...; "" = derived from the config
    answers: Mapping[str, Any] | None = None  # `eval --answers`: answer metrics, per query
    # The aggregates as saved. A loaded record keeps them: its latencies were rounded and
    # its items lost their grades on disk, so recomputing would not give the saved numbers.
    # None (a fresh run) computes them from the queries.
    saved_summary: Mapping[str, ModeSummary] | None = None
    engine_version: str = engine_version
    schema_version: int = SCHEMA_VERSION

    @classmethod
    def of(cls, config: EngineConfig, queries: Sequence[QueryRecord], **rest: Any) -> RunRecord:
        """A record of ``queries`` scored with ``config``; ``rest`` as the fields (modes
        default to the queries' own, the dataset to an unnamed one)."""
        rest.setdefault("run_id", "")
        rest.setdefault("created", "")
        rest.setdefault("dataset", DatasetRef("", "", ""))
        rest.setdefault("split", "all")
        rest.setdefault("modes", tuple(dict.fromkeys(q.mode for q in queries)))
        rest.setdefault("rerank", False)
        return cls(config_source=config, config_hash=config.hash, queries=tuple(queries), **rest)

    def with_queries(self, queries: Sequence[QueryRecord], **changes: Any) -> RunRecord:
        """This run with other queries (rescored, one mode renamed ...): its aggregates are
        computed again."""
        return replace(self, queries=tuple(queries), saved_summary=None, **changes)

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
        # Read in the order the fields are written, so an error names the first bad one.
        head = {key: r.text(key) for key in _HEAD_TEXTS}
        config_yaml = r.text("config_yaml")
        dataset = DatasetRef(ds.text("name"), ds.text("path"), ds.text("hash"))
        split, rerank, seconds = r.text("split"), r.flag("rerank"), r.number("seconds")
        hits, misses = cache.integer("hits"), cache.integer("misses")
        r.integer("errors")  # checked; the count itself is the queries'
        summary = {m: ModeSummary.read(summ.obj(m)) for m in modes}
        queries = tuple(QueryRecord.read(q) for q in r.objs("queries"))
        return cls(
            **head,
            config_source=config_yaml,
            dataset=dataset,
            split=split,
            modes=modes,
            rerank=rerank,
            seconds=seconds,
            cache_hits=hits,
            cache_misses=misses,
            saved_summary=summary,
            queries=queries,
            answers=answers,
            label=r.text("label"),
            schema_version=r.integer("schema_version"),
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON object `wikirag eval` writes (version 3 added ``label``)."""
        out: dict[str, Any] = {
            "schema_version": self.schema_version,
            "run_id": self.run_id,
            "label": self.label or derived_label(self.config_yaml, self.config_hash),
            "created": self.created,
            "engine_version": self.engine_version,
            "kb": self.kb,
            "index_fingerprint": self.index_fingerprint,
            "config_hash": self.config_hash,
            "config_yaml": self.config_yaml,
            "dataset": asdict(self.dataset),
            "split": self.split,
            "modes": list(self.modes),
            "rerank": self.rerank,
            "seconds": self.seconds,
            "cache": {"hits": self.cache_hits, "misses": self.cache_misses},
            "errors": self.errors,
            "summary": {m: self.mode_summary(m).to_dict() for m in self.modes},
            "queries": [q.to_dict() for q in self.queries],
        }
        if self.answers is not None:
            out["answers"] = self.answers
        return out

    @cached_property
    def config(self) -> EngineConfig:
        source = self.config_source
        return (
            source if isinstance(source, EngineConfig) else EngineConfig.from_yaml(source or "{}")
        )

    @cached_property
    def config_yaml(self) -> str:
        """The config as saved: its YAML text."""
        source = self.config_source
        return source.to_yaml() if isinstance(source, EngineConfig) else source

    @property
    def name(self) -> str:
        """How the run is listed: its config label and when it ran (``baseline · 2026-12-02
        02:53``); the run id stays the key every command accepts."""
        return run_name(
            self.label or derived_label(self.config_yaml, self.config_hash), self.created
        )

    @property
    def errors(self) -> int:
        return sum(1 for q in self.queries if q.error)

    def golden(self) -> GoldenSet:
        """The run's queries as a golden set (as far as the record knows them)."""
        items = {q.item.id: q.item for q in self.queries}
        return GoldenSet(self.dataset.name, tuple(items.values()))

    def for_mode(self, mode: str) -> list[QueryRecord]:
        return [q for q in self.queries if q.mode == mode]

    def per_query(self, mode: str) -> dict[str, Mapping[str, float]]:
        out: dict[str, Mapping[str, float]] = {}
        for q in self.for_mode(mode):
            # Two results under one id would silently become one in every mean and in
            # the paired statistics; golden.checked() refuses such sets before scoring.
            if q.item.id in out:
                raise EngineError(
                    f"query id {q.item.id!r} appears twice in this run; ids must be unique "
                    "(run `wikirag golden validate`)"
                )
            out[q.item.id] = q.metrics
        return out

    def mode_summary(self, mode: str) -> ModeSummary:
        """The aggregates of ``mode``; a one-line error when the run did not score it."""
        if mode not in self.modes:
            raise RunRecordError(f"run {self.run_id} has modes {', '.join(self.modes)}, not {mode}")
        if self.saved_summary is not None:
            return self.saved_summary[mode]
        return ModeSummary(
            means=self.means(mode),
            latency=self.latency(mode),
            by_difficulty=self.breakdown(mode, "difficulty"),
            by_category=self.breakdown(mode, "category"),
            by_language=self.breakdown(mode, "language"),
            failures=self.failures(mode),
            queries=len(self.for_mode(mode)),
            unjudged_at_10=round(self.unjudged_share(mode), 4),
        )

    def means(self, mode: str | None = None) -> dict[str, float]:
        """Mean measures of ``mode`` (default: the run's first mode)."""
        mode = mode or self.modes[0]
        if self.saved_summary is not None:
            return dict(self.mode_summary(mode).means)
        return M.mean_scores(self.per_query(mode))

    def breakdown(self, mode: str, by: str) -> dict[str, dict[str, float]]:
        """Mean metrics per difficulty | category | language | split."""
        groups = {q.item.id: q.group(by) for q in self.for_mode(mode)}
        return M.aggregate(self.per_query(mode), groups)

    def latency(self, mode: str) -> dict[str, float]:
        return latency_percentiles([q.latency_ms for q in self.for_mode(mode)])

    def failures(self, mode: str) -> dict[str, list[str]]:
        """Query ids grouped by the cause of their miss (stage attribution)."""
        out: dict[str, list[str]] = {c: [] for c in CAUSES}
        for q in self.for_mode(mode):
            if q.cause:
                out[q.cause].append(q.item.id)
        return {c: ids for c, ids in out.items() if ids}

    def worst(self, mode: str, measure: str = "recall@5", n: int = 10) -> list[tuple[str, float]]:
        return M.worst_queries(self.per_query(mode), measure, n)

    def unjudged_share(self, mode: str, gs: GoldenSet | None = None, k: int = UNJUDGED_K) -> float:
        """Share of the top-``k`` slots of ``mode``'s queries that carry no judgment (0 when
        empty); ``gs``: judge by the golden set's current judgments, not the run's."""
        slots = unjudged = 0
        for q in self.for_mode(mode):
            if q.error:
                continue
            judged = q.current_item(gs).qrels
            top = q.distinct_top(k)
            slots += len(top)
            unjudged += sum(1 for nid in top if nid not in judged)
        return unjudged / slots if slots else 0.0


def save_run(run: RunRecord, runs_dir: str | Path) -> Path:
    """Write the run record (exact config YAML + hash, dataset hash, rankings, metrics).

    Run ids are to the second plus the config hash, so two runs of one config in the same
    second (two clicks, a script) would share one; the later gets ``-2``, ``-3``... instead
    of overwriting the first (``run.run_id`` is set to the id it was saved under).
    """
    folder = Path(runs_dir)
    folder.mkdir(parents=True, exist_ok=True)
    n = 1
    while True:
        run_id = run.run_id if n == 1 else f"{run.run_id}-{n}"
        try:  # O_EXCL claims the name atomically, so concurrent savers never share one
            with open(folder / f"{run_id}.json", "x", encoding="utf-8"):
                pass
        except FileExistsError:
            n += 1
            continue
        break
    run.run_id = run_id
    path = folder / f"{run_id}.json"
    atomic_write_text(path, json.dumps(run.to_dict(), ensure_ascii=False, indent=1))
    return path


def list_runs(runs_dir: str | Path) -> list[Path]:
    """Saved run records, newest first (``X-2`` was saved after ``X`` in the same second)."""
    d = Path(runs_dir)
    return sorted(d.glob("*.json"), key=_run_order, reverse=True) if d.is_dir() else []


def _run_order(path: Path) -> tuple[str, int]:
    # Ids are ``YYYYmmdd-HHMMSS-<hash6>`` plus ``-N`` for the N-th save in one second; plain
    # string order would put ``X.json`` above ``X-2.json``.
    parts = path.stem.split("-")
    if len(parts) == 4 and parts[3].isdigit():
        return "-".join(parts[:3]), int(parts[3])
    return path.stem, 1


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
    "UNJUDGED_K",
    "DatasetRef",
    "ModeSummary",
    "QueryRecord",
    "RunRecord",
    "latest_run_record",
    "list_runs",
    "load_run_record",
    "save_run",
]
