"""Compare 2-4 engine configs on one golden set: metrics, deltas, paired statistics, queries.

Every config is evaluated through the cached evaluator, so after the first run a
comparison of fusion/rerank/injection settings re-scores cached candidates. The first
config is the reference: deltas, confidence intervals and wins/losses are "other - first".
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.config import EngineConfig, parse_override
from engine.errors import ConfigError, EngineError
from workbench.eval.engines import evaluator
from workbench.eval.golden import GoldenSet
from workbench.eval.measures import shown
from workbench.eval.run_record import RunRecord, save_run
from workbench.eval.saved_runs import RunKey, find_saved_run
from workbench.eval.stats import PairedComparison, compare_paired
from workbench.eval.unjudged import WARN_SHARE
from workbench.tune.experiment_store import ExperimentStore
from workbench.tune.query_matrix import QueryMatrix, build_matrix
from workbench.tune.scorecard_markdown import md_cell
from workbench.tune.side_by_side import SIDE_BY_SIDE_K, SideBySide, side_by_side

LATENCY = ("latency_p50", "latency_p95")
CHANGED_N = 10
EPS = 1e-9

# "x+fusion.k=30,rerank.weight=0.5": split at commas that start another KEY=
_NEXT_OVERRIDE = re.compile(r",(?=\s*[A-Za-z_][\w]*\.[\w]+\s*=)")
_OVERRIDES_START = re.compile(r"\+(?=\s*[A-Za-z_]\w*\.\w+\s*=)")
_VERSION = re.compile(r"v(\d+)")


def parse_config_spec(spec: str, ws: Any) -> tuple[str, EngineConfig]:
    """(label, config) for a CLI CONFIG: a YAML path, ``baseline``, ``defaults``, ``vN``,
    or any of those followed by ``+key=value,key2=value``."""

    text = spec.strip()
    m = _OVERRIDES_START.search(text)  # a '+' inside a file name is not a separator
    base, rest = (text[: m.start()], text[m.end() :]) if m else (text, "")
    base = base.strip()
    store = ExperimentStore(ws.experiments)
    if base == "baseline":
        cfg = store.baseline_config()
    elif base == "defaults":
        cfg = EngineConfig()
    elif v := _VERSION.fullmatch(base):
        path = store.versions / f"v{v.group(1)}.yaml"
        if not path.is_file():
            known = ", ".join(f"v{v['version']}" for v in store.accepted_versions()) or "none"
            raise EngineError(
                f"no accepted baseline version {base}; known versions: {known} "
                "(see `wikirag experiment versions`)"
            )
        cfg = EngineConfig.load(path)
    elif Path(base).is_file():
        cfg = EngineConfig.load(base)
    else:
        raise ConfigError(
            f"config {base!r} is not a file, `baseline`, `defaults` or `vN`; "
            "e.g. `baseline+fusion.k=30`"
        )
    if rest.strip():
        overrides = dict(parse_override(p.strip()) for p in _NEXT_OVERRIDE.split(rest))
        cfg = cfg.with_overrides(overrides)
    return text, cfg


@dataclass(frozen=True)
class ChangedQuery:
    id: str
    query: str
    recall5_before: float
    recall5_after: float
    mrr_before: float
    mrr_after: float
    rank_before: int | None
    rank_after: int | None

    @property
    def delta_recall5(self) -> float:
        return self.recall5_after - self.recall5_before

    @property
    def delta_mrr(self) -> float:
        return self.mrr_after - self.mrr_before

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "query": self.query,
            "recall@5": [self.recall5_before, self.recall5_after],
            "mrr": [self.mrr_before, self.mrr_after],
            "delta_recall@5": self.delta_recall5,
            "delta_mrr": self.delta_mrr,
            "first_relevant_rank": [self.rank_before, self.rank_after],
        }


@dataclass(frozen=True)
class Comparison:
    labels: tuple[str, ...]
    config_hashes: tuple[str, ...]
    modes: tuple[str, ...]
    split: str
    dataset: str
    metrics: tuple[dict[str, float], ...]  # per config: shown("table") + latency
    stats: tuple[dict[str, PairedComparison], ...]  # per other config (index i -> config i+1)
    changed: tuple[tuple[ChangedQuery, ...], ...]  # per other config
    diffs: tuple[dict[str, tuple[Any, Any]], ...]  # config changes vs the first, per other
    queries: int
    records: tuple[RunRecord, ...] = field(default=(), repr=False, compare=False)
    reused: tuple[bool, ...] = ()  # per config: a saved run was re-used, not re-evaluated
    unjudged: tuple[float, ...] = ()  # per config: share of its top 10 no one has judged
    dataset_hashes: tuple[str, ...] = ()  # per config: the golden-set version its run scored

    @property
    def versions_differ(self) -> bool:
        """The runs scored different golden-set versions: deltas mix labels and configs."""
        return len(set(self.dataset_hashes)) > 1

    @property
    def run_ids(self) -> tuple[str, ...]:
        """Each config's saved run (the ids `wikirag runs diff` and reports take)."""
        return tuple(r.run_id for r in self.records)

    def matrix(self) -> QueryMatrix:
        """The per-query matrix: every query, each config's value of every measure."""
        return build_matrix(self.records, self.labels, self.modes)

    def side_by_side(self, qid: str, kb: Any = None, k: int = SIDE_BY_SIDE_K) -> SideBySide:
        """One query's ranked lists, one column per config (``kb`` adds titles, snippets)."""
        return side_by_side(self.records, self.labels, qid, modes=self.modes, kb=kb, k=k)

    def delta(self, i: int, measure: str) -> float:
        return self.metrics[i].get(measure, 0.0) - self.metrics[0].get(measure, 0.0)

    def wins_losses_ties(self, i: int, measure: str = "recall@5") -> tuple[int, int, int]:
        c = self.stats[i - 1][measure]
        return c.wins, c.losses, c.ties

    def to_dict(self) -> dict[str, Any]:
        return {
            "labels": list(self.labels),
            "config_hashes": list(self.config_hashes),
            "modes": list(self.modes),
            "split": self.split,
            "dataset": self.dataset,
            "queries": self.queries,
            "configs": [
                {
                    "label": lab,
                    "run_id": self.run_ids[i] if self.records else None,
                    "reused": self.reused[i] if self.reused else False,
                    "config_hash": h,
                    "mode": m,
                    "metrics": met,
                    "deltas": {k: self.delta(i, k) for k in met} if i else {},
                    "changes": {k: list(v) for k, v in self.diffs[i - 1].items()} if i else {},
                    "stats": {k: v.to_dict() for k, v in self.stats[i - 1].items()} if i else {},
                    "changed_queries": [c.to_dict() for c in self.changed[i - 1]] if i else [],
                    "unjudged_at_10": self.unjudged[i] if self.unjudged else None,
                    "dataset_hash": self.dataset_hashes[i] if self.dataset_hashes else None,
                }
                for i, (lab, h, m, met) in enumerate(
                    zip(self.labels, self.config_hashes, self.modes, self.metrics, strict=True)
                )
            ],
            "matrix": self.matrix().to_dict() if self.records else None,
            "golden_versions_differ": self.versions_differ,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=2)

    def to_markdown(self) -> str:
        return comparison_markdown(self)


def _metrics(run: RunRecord, mode: str) -> dict[str, float]:
    means = run.means(mode)
    out = {m: float(means.get(m, 0.0)) for m in shown("table")}
    lat = run.latency(mode)
    out["latency_p50"], out["latency_p95"] = float(lat["p50"]), float(lat["p95"])
    return out


def _changed(
    base: RunRecord, bmode: str, other: RunRecord, omode: str, n: int
) -> list[ChangedQuery]:
    before = {r.item.id: r for r in base.for_mode(bmode)}
    out = []
    for r in other.for_mode(omode):
        b = before.get(r.item.id)
        if b is None:
            continue
        c = ChangedQuery(
            r.item.id,
            r.item.query,
            b.metrics.get("recall@5", 0.0),
            r.metrics.get("recall@5", 0.0),
            b.metrics.get("mrr", 0.0),
            r.metrics.get("mrr", 0.0),
            b.first_relevant_rank,
            r.first_relevant_rank,
        )
        if abs(c.delta_recall5) > EPS or abs(c.delta_mrr) > EPS:
            out.append(c)
    out.sort(key=lambda c: (-abs(c.delta_recall5), -abs(c.delta_mrr), c.id))
    return out[:n]


def compare_runs(
    runs: Sequence[tuple[str, RunRecord]],
    *,
    modes: Sequence[str] | None = None,
    changed_n: int = CHANGED_N,
    reused: Sequence[bool] = (),
) -> Comparison:
    """Compare evaluated runs (pure). ``modes``: the mode to read from each run (default:
    each run's first mode). Queries are paired by id; only shared ids are tested."""
    if not 2 <= len(runs) <= 4:
        raise ValueError(f"compare needs 2 to 4 configs; got {len(runs)}")
    modes = list(modes or [r.modes[0] for _, r in runs])
    base = runs[0][1]
    per_query = [r.per_query(m) for (_, r), m in zip(runs, modes, strict=True)]
    stats, changed, diffs = [], [], []
    for i in range(1, len(runs)):
        stats.append({m: compare_paired(per_query[0], per_query[i], m) for m in shown("tested")})
        changed.append(tuple(_changed(base, modes[0], runs[i][1], modes[i], changed_n)))
        diffs.append(base.config.diff(runs[i][1].config))
    return Comparison(
        labels=tuple(lab for lab, _ in runs),
        config_hashes=tuple(r.config.hash for _, r in runs),
        modes=tuple(modes),
        split=base.split,
        dataset=base.dataset.name,
        metrics=tuple(_metrics(r, m) for (_, r), m in zip(runs, modes, strict=True)),
        stats=tuple(stats),
        changed=tuple(changed),
        diffs=tuple(diffs),
        queries=len(per_query[0]),
        records=tuple(r for _, r in runs),
        reused=tuple(reused) or (False,) * len(runs),
        unjudged=tuple(r.unjudged_share(m) for (_, r), m in zip(runs, modes, strict=True)),
        dataset_hashes=tuple(r.dataset.hash for _, r in runs),
    )


def compare_configs(
    ws: Any,
    configs: Sequence[tuple[str, EngineConfig]],
    gs: GoldenSet,
    split: str = "all",
    mode: str | None = None,
    *,
    evaluator_for: Callable[[EngineConfig], Any] | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    save: bool = True,
    reuse: bool = True,
) -> Comparison:
    """Evaluate each config (cached re-scoring) on ``gs`` and compare them.

    With a workspace, each config's run is saved under its label (``save``), and a saved
    run of the same config, index build, golden set, split and mode is re-used instead of
    evaluating again (``reuse``), so the matrix, `runs diff` and reports read the same runs.
    """
    if not 2 <= len(configs) <= 4:
        raise ValueError(f"compare needs 2 to 4 configs; got {len(configs)}")
    if evaluator_for is None:

        def evaluator_for(c: EngineConfig) -> Any:
            return evaluator(ws, c)

    runs, modes, reused = [], [], []
    evs = []
    for n, (label, cfg) in enumerate(configs):
        if progress:
            progress(n, len(configs), label)
        m = mode or cfg.search.mode
        ev = evaluator_for(cfg)
        evs.append(ev)
        run: RunRecord | None = None
        if ws is not None and reuse:
            key = RunKey(
                cfg.hash,
                str(getattr(getattr(ev, "engine", None), "index_fingerprint", "") or ""),
                gs.content_hash,
                split,
                m,
                cfg.rerank.provider != "none",
            )
            run = find_saved_run(ws.runs_dir, key)
        reused.append(run is not None)
        if run is None:
            run = ev.run(gs, cfg, modes=[m], split=split, **_kb_name(ws))
            run.label = label
            if ws is not None and save:
                save_run(run, ws.runs_dir)
        runs.append((label, run))
        modes.append(m)
    caches: dict[int, Any] = {}
    for e in evs:
        cache = getattr(e, "cache", None)
        if hasattr(cache, "save"):
            caches[id(cache)] = cache
    for cache in caches.values():
        cache.save()
    if progress:
        progress(len(configs), len(configs), "done")
    return compare_runs(runs, modes=modes, reused=reused)


def _kb_name(ws: Any) -> dict[str, str]:
    return {"kb_name": ws.name} if ws is not None else {}


def _rank(r: int | None) -> str:
    return "-" if r is None else str(r)


def _runs_lines(c: Comparison) -> list[str]:
    """Which saved run each config's numbers are (for `runs diff`, reports, the UI)."""
    if not c.records:
        return []
    lines = [
        f"- `{md_cell(lab)}`: run `{rid}`" + (" (saved run re-used)" if reused else "")
        for lab, rid, reused in zip(
            c.labels, c.run_ids, c.reused or (False,) * len(c.labels), strict=True
        )
    ]
    return ["Runs:", "", *lines, ""]


def _judging_lines(c: Comparison) -> list[str]:
    """Warnings a reader needs before the deltas: unjudged top 10s, mixed golden versions."""
    out = []
    if c.unjudged:
        shares = ", ".join(
            f"`{md_cell(lab)}` {u:.1%}" for lab, u in zip(c.labels, c.unjudged, strict=True)
        )
        warn = (
            f" (above {WARN_SHARE:.0%}: rate them with `wikirag judge --run ...` before trusting "
            "the deltas)"
            if max(c.unjudged) > WARN_SHARE
            else ""
        )
        out += [f"Unjudged in top 10: {shares}{warn}.", ""]
    if c.versions_differ:
        out += [
            "WARNING: the runs scored different golden-set versions ("
            + ", ".join(f"`{h}`" for h in c.dataset_hashes)
            + "); deltas mix label changes with config changes.",
            "",
        ]
    return out


def comparison_markdown(c: Comparison) -> str:
    labels = [md_cell(lab) for lab in c.labels]
    out = [
        f"# Compare: {' vs '.join(labels)}",
        "",
        f"Dataset {md_cell(c.dataset)}, split {c.split}, {c.queries} queries. "
        f"Deltas are against `{labels[0]}`.",
        "",
        *_runs_lines(c),
        *_judging_lines(c),
        "| measure | " + " | ".join(labels) + " |",
        "|---|" + "---:|" * len(labels),
    ]
    for m in (*shown("table"), *LATENCY):
        cells = []
        for i, met in enumerate(c.metrics):
            v = met.get(m, 0.0)
            fmt = "{:.1f}" if m in LATENCY else "{:.3f}"
            cell = fmt.format(v)
            if i:
                d = c.delta(i, m)
                cell += f" ({d:+.1f})" if m in LATENCY else f" ({d:+.3f})"
            cells.append(cell)
        out.append(f"| {m} | " + " | ".join(cells) + " |")
    for i in range(1, len(c.labels)):
        out += ["", f"## {labels[i]} vs {labels[0]}", ""]
        change = "; ".join(f"`{k}`: {a!r} → {b!r}" for k, (a, b) in c.diffs[i - 1].items())
        out.append(f"Config changes: {change or '(none)'}")
        out += [
            "",
            "| measure | delta | 95% CI | p | wins/losses/ties |",
            "|---|---:|---|---:|---|",
        ]
        for m, s in c.stats[i - 1].items():
            sig = " *" if s.significant else ""
            out.append(
                f"| {m} | {s.delta:+.3f}{sig} | [{s.ci_low:+.3f}, {s.ci_high:+.3f}] | "
                f"{s.p_value:.3f} | {s.wins}/{s.losses}/{s.ties} |"
            )
        ch = c.changed[i - 1]
        out += ["", "Queries that changed most (first relevant rank before → after):", ""]
        if not ch:
            out.append("No query changed.")
            continue
        out += [
            "| id | query | recall@5 | mrr | first relevant rank |",
            "|---|---|---|---|---|",
        ]
        for q in ch:
            out.append(
                f"| {md_cell(q.id)} | {md_cell(q.query)} | {q.recall5_before:.2f} → "
                f"{q.recall5_after:.2f} | {q.mrr_before:.2f} → {q.mrr_after:.2f} | "
                f"{_rank(q.rank_before)} → {_rank(q.rank_after)} |"
            )
    out += ["", "`*`: randomization test p < 0.05 (paired over queries)."]
    return "\n".join(out) + "\n"


def comparison_figures(c: Comparison) -> list[Any]:
    """Plotly figures: headline metrics per config, and wins/losses/ties per config."""
    import plotly.graph_objects as go

    measures = shown("headline")
    bars = go.Figure(
        [
            go.Bar(name=lab, x=list(measures), y=[met[m] for m in measures])
            for lab, met in zip(c.labels, c.metrics, strict=True)
        ]
    )
    bars.update_layout(barmode="group", title="Headline metrics", yaxis_range=[0, 1])
    wlt = go.Figure()
    others = list(c.labels[1:])
    # Explicit colours: green wins, red losses, grey ties (a theme's palette once drew the
    # ties, usually the largest group, as a huge red bar).
    for name, idx, colour in (
        ("wins", 0, "#1a7f37"),
        ("losses", 1, "#cf222e"),
        ("ties", 2, "#afb8c1"),
    ):
        wlt.add_bar(
            name=name,
            x=others,
            y=[c.wins_losses_ties(i)[idx] for i in range(1, len(c.labels))],
            marker_color=colour,
        )
    wlt.update_layout(barmode="stack", title=f"Recall@5 per query vs {c.labels[0]}")
    return [bars, wlt]
