"""Reports of an evaluation run: self-contained HTML, Markdown, CSV, JSON (and TREC files).

Sections (DESIGN.md "Reports"): metrics, results, categories, failures, optimizations,
recommendations, scorecard. The HTML is one file that opens offline: plotly.js is inlined
once, every figure is a ``<div>`` + inline script, no CDN, no web fonts, and every piece
of user text (queries, ids, categories, titles) goes through ``html.escape``.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.config import EngineConfig
from engine.credentials import redact_urls
from engine.pipeline import Ranked
from workbench.eval.attribution import CAUSES
from workbench.eval.evaluate import EvalRun, QueryResult
from workbench.eval.golden import GoldenItem, GoldenSet
from workbench.export.csv_writer import to_csv
from workbench.tune.experiments import ExperimentStore, trajectory
from workbench.tune.scorecard import md_cell, scorecard_markdown

SECTIONS = (
    ("metrics", "Metrics"),
    ("results", "Results"),
    ("categories", "Categories"),
    ("failures", "Failures"),
    ("optimizations", "Optimizations"),
    ("recommendations", "Recommendations"),
    ("scorecard", "Scorecard"),
)
KS = (1, 3, 5, 10, 20)
TABLE_MEASURES = ("recall", "precision", "hit", "ndcg", "hrecall", "hndcg", "mrr")
CARDS = ("recall@5", "mrr", "hit@5", "ndcg@10")
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
FONT_STACK = (
    'system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", "Noto Sans CJK SC", '
    '"PingFang SC", "Hiragino Sans GB", "Microsoft YaHei", "Source Han Sans SC", sans-serif'
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


def run_from_record(record: Mapping[str, Any]) -> EvalRun:
    """Rebuild an EvalRun from a saved run record (rankings, metrics, attribution)."""
    results = []
    for q in record.get("queries", []):
        item = GoldenItem(
            id=str(q["id"]),
            query=str(q.get("query", "")),
            relevant=tuple(q.get("relevant") or ()),
            difficulty=str(q.get("difficulty") or "medium"),
            category=str(q.get("category") or ""),
            split=str(q.get("split") or "tune"),
        )
        ranked = [
            Ranked(
                node_id=r["node_id"],
                score=float(r.get("score", 0.0)),
                vector_rank=r.get("vector_rank"),
                bm25_rank=r.get("bm25_rank"),
                fusion_rank=r.get("fusion_rank"),
                rerank_rank=r.get("rerank_rank"),
                rerank_score=r.get("rerank_score"),
                injected_from=r.get("injected_from"),
            )
            for r in q.get("ranked", [])
        ]
        results.append(
            QueryResult(
                item,
                str(q.get("mode", "hybrid")),
                ranked,
                dict(q.get("metrics", {})),
                float(q.get("latency_ms", 0.0)),
                list(q.get("attribution", [])),
                q.get("cause"),
                q.get("error"),
            )
        )
    ds = record.get("dataset", {})
    cache = record.get("cache", {})
    return EvalRun(
        run_id=str(record.get("run_id", "")),
        created=str(record.get("created", "")),
        config=EngineConfig.from_yaml(record.get("config_yaml", "") or "{}"),
        dataset_name=str(ds.get("name", "")),
        dataset_path=str(ds.get("path", "")),
        dataset_hash=str(ds.get("hash", "")),
        split=str(record.get("split", "all")),
        modes=tuple(record.get("modes") or ("hybrid",)),
        rerank=bool(record.get("rerank", False)),
        results=results,
        kb_name=str(record.get("kb", "")),
        index_fingerprint=str(record.get("index_fingerprint", "")),
        seconds=float(record.get("seconds", 0.0)),
        cache_hits=int(cache.get("hits", 0)),
        cache_misses=int(cache.get("misses", 0)),
    )


def golden_from_record(record: Mapping[str, Any]) -> GoldenSet:
    """The run's queries as a golden set (grade 1 labels), e.g. for TREC qrels."""
    run = run_from_record(record)
    items = {r.item.id: r.item for r in run.results}
    return GoldenSet(str(record.get("dataset", {}).get("name", "")), tuple(items.values()))


def _first_rank(q: Mapping[str, Any]) -> int | None:
    rel = set(q.get("relevant") or ())
    return next((i for i, r in enumerate(q.get("ranked", []), 1) if r.get("node_id") in rel), None)


class _Records:
    """Duck-types ExperimentStore.load_records for ``trajectory`` over given records."""

    def __init__(self, records: list[dict[str, Any]]) -> None:
        self._records = records

    def load_records(self) -> list[dict[str, Any]]:
        return self._records


def build_report(
    ws: Any,
    run_record: Mapping[str, Any],
    *,
    scorecard: Any = None,
    log_records: Sequence[Mapping[str, Any]] | None = None,
    mode: str | None = None,
) -> Report:
    """Collect a report's data from a run record, the experiment log and a scorecard.

    ``log_records`` default to ``experiments.jsonl`` of ``ws`` (none when ``ws`` is None).
    ``scorecard``: a Scorecard or its ``to_dict()``.
    """
    modes = list(run_record.get("modes") or ["hybrid"])
    mode = mode or modes[0]
    summ = run_record.get("summary", {}).get(mode, {})
    if log_records is None:
        log_records = ExperimentStore(ws.experiments).load_records() if ws is not None else []
    records = [dict(r) for r in log_records]
    rows = []
    for q in run_record.get("queries", []):
        if q.get("mode", mode) != mode:
            continue
        m = q.get("metrics", {})
        rows.append(
            {
                "id": q.get("id", ""),
                "query": q.get("query", ""),
                "difficulty": q.get("difficulty", ""),
                "category": q.get("category", ""),
                "language": q.get("language", ""),
                "split": q.get("split", ""),
                "recall@5": float(m.get("recall@5", 0.0)),
                "mrr": float(m.get("mrr", 0.0)),
                "hit@5": float(m.get("hit@5", 0.0)),
                "ndcg@10": float(m.get("ndcg@10", 0.0)),
                "first_relevant_rank": _first_rank(q),
                "cause": q.get("cause") or "",
                "latency_ms": float(q.get("latency_ms", 0.0)),
                "relevant": " ".join(q.get("relevant") or ()),
                "top5": " ".join(r["node_id"] for r in q.get("ranked", [])[:5]),
                "error": q.get("error") or "",
            }
        )
    breakdowns: dict[str, dict[str, dict[str, float]]] = {}
    for by in ("difficulty", "category", "language"):
        groups = dict(summ.get(f"by_{by}", {}))
        if by == "difficulty":  # easy, medium, hard first; anything else after
            order = {d: n for n, d in enumerate(("easy", "medium", "hard"))}
            groups = dict(sorted(groups.items(), key=lambda kv: (order.get(kv[0], 3), kv[0])))
        counts: dict[str, int] = {}
        for r in rows:
            counts[str(r[by])] = counts.get(str(r[by]), 0) + 1
        breakdowns[by] = {g: {**v, "n": counts.get(g, 0)} for g, v in groups.items()}
    by_id = {r["id"]: r for r in rows}
    failures = [
        {
            "cause": cause,
            "label": CAUSES.get(cause, cause),
            "queries": [{"id": i, "query": by_id.get(i, {}).get("query", "")} for i in ids],
        }
        for cause, ids in summ.get("failures", {}).items()
    ]
    card = scorecard.to_dict() if hasattr(scorecard, "to_dict") else scorecard
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
    notes = []
    if run_record.get("errors"):
        notes.append(f"{run_record['errors']} queries failed with errors (see the results).")
    ds = run_record.get("dataset", {})
    return Report(
        title=f"WikiRAG evaluation report — {run_record.get('kb') or ds.get('name', '')}",
        run={
            "run_id": run_record.get("run_id", ""),
            "created": run_record.get("created", ""),
            "kb": run_record.get("kb", ""),
            "config_hash": run_record.get("config_hash", ""),
            "dataset": ds.get("name", ""),
            "dataset_hash": ds.get("hash", ""),
            "split": run_record.get("split", ""),
            "modes": modes,
            "rerank": run_record.get("rerank", False),
            "queries": len(rows),
            "errors": run_record.get("errors", 0),
            "engine_version": run_record.get("engine_version", ""),
        },
        mode=mode,
        means=dict(summ.get("means", {})),
        latency=dict(summ.get("latency", {})),
        queries=rows,
        breakdowns=breakdowns,
        failures=failures,
        optimizations=[_opt_row(r) for r in records],
        trajectory=trajectory(_Records(records)),  # type: ignore[arg-type]
        recommendations=recs,
        scorecard=card,
        config_yaml=redact_urls(str(run_record.get("config_yaml", ""))),  # no user:pass@
        notes=notes,
        study=_latest_study(ws),
    )


def _latest_study(ws: Any) -> dict[str, Any] | None:
    if ws is None:
        return None
    from workbench.tune.optimizer import load_studies

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


def _num(v: Any, fmt: str = "{:.3f}") -> str:
    return "-" if v is None else fmt.format(v)


def _pair(p: Sequence[Any]) -> str:
    return f"{_num(p[0])} → {_num(p[1])}"


def render_csv(report: Report) -> str:
    """One row per query, header first; formula-like cells defused (workbench/export/csv_writer.py)."""
    return to_csv(report.queries, CSV_FIELDS)


def render_json(report: Report) -> str:
    return json.dumps(report.to_dict(), ensure_ascii=False, indent=1, default=str)


def render_markdown(report: Report) -> str:
    r = report.run
    out = [
        f"# {md_cell(report.title)}",
        "",
        f"Run `{r['run_id']}` ({r['created']}), config `{r['config_hash']}`, dataset "
        f"{md_cell(r['dataset'])} (`{r['dataset_hash']}`), split {r['split']}, mode "
        f"{report.mode}, rerank {'on' if r['rerank'] else 'off'}, {r['queries']} queries.",
        *(f"\n> {md_cell(n)}" for n in report.notes),
        "",
        "## Metrics",
        "",
        " · ".join(f"**{m}** {report.means.get(m, 0):.3f}" for m in CARDS)
        + f" · **p50** {report.latency.get('p50', 0):.1f} ms"
        + f" · **p95** {report.latency.get('p95', 0):.1f} ms",
        "",
        "| measure | " + " | ".join(f"@{k}" for k in KS) + " |",
        "|---|" + "---:|" * len(KS),
    ]
    for m in TABLE_MEASURES:
        out.append(
            f"| {m} | " + " | ".join(f"{report.means.get(f'{m}@{k}', 0):.3f}" for k in KS) + " |"
        )
    out += [
        "",
        f"MRR {report.means.get('mrr', 0):.3f}, MAP {report.means.get('map', 0):.3f}.",
        "",
        "## Results",
        "",
        "| id | query | difficulty | category | recall@5 | mrr | first relevant rank | cause |",
        "|---|---|---|---|---:|---:|---:|---|",
    ]
    for q in report.queries:
        out.append(
            f"| {md_cell(q['id'])} | {md_cell(q['query'])} | {md_cell(q['difficulty'])} | "
            f"{md_cell(q['category'])} | {q['recall@5']:.2f} | {q['mrr']:.2f} | "
            f"{q['first_relevant_rank'] or '-'} | {CAUSES.get(q['cause'], q['cause']) or '-'} |"
        )
    out += ["", "## Categories", ""]
    for by, groups in report.breakdowns.items():
        out += [
            f"### By {by}",
            "",
            "| group | n | recall@5 | mrr | hit@5 |",
            "|---|---:|---:|---:|---:|",
        ]
        for g, v in groups.items():
            out.append(
                f"| {md_cell(g)} | {v.get('n', 0)} | {v.get('recall@5', 0):.3f} | "
                f"{v.get('mrr', 0):.3f} | {v.get('hit@5', 0):.3f} |"
            )
        out.append("")
    out += ["## Failures", ""]
    if not report.failures:
        out.append("No query missed a relevant chapter in the top 5.")
    for f in report.failures:
        out.append(
            f"- **{md_cell(f['label'])}** ({len(f['queries'])}): "
            + "; ".join(f"{md_cell(q['id'])} {md_cell(q['query'])}" for q in f["queries"])
        )
    out += ["", "## Optimizations", ""]
    if not report.optimizations:
        out.append("No experiments yet (`wikirag experiment try` or `wikirag optimize`).")
    else:
        out += [
            "| # | date | tier | change | decision | tune recall@5 | tune mrr | holdout recall@5 |",
            "|---:|---|---|---|---|---|---|---|",
        ]
        for o in report.optimizations:
            out.append(
                f"| {o['number']} | {md_cell(o['date'])} | {md_cell(o['tier'])} | "
                f"{md_cell(o['title'])} | {md_cell(o['decision'])} | {_pair(o['tune_recall@5'])} | "
                f"{_pair(o['tune_mrr'])} | {_pair(o['holdout_recall@5'])} |"
            )
        if report.trajectory:
            out += [
                "",
                "Trajectory (tune recall@5 after each experiment): "
                + " → ".join(f"{p.get('recall@5', 0):.3f}" for p in report.trajectory),
            ]
    if report.study:
        st = report.study
        by_number = {t["number"]: t for t in st.get("trials", [])}
        pick, best = by_number.get(st.get("pick")), by_number.get(st.get("best"))
        out += [
            "",
            f"Latest search `{st['study_id']}`: {len(by_number)} trials (seed {st['seed']}), "
            f"{st['k_folds']}-fold CV {st['measure']} on {st['queries']} tune queries: "
            f"baseline {st['baseline_score']:.4f}, best trial {st.get('best')} "
            f"{(best or {}).get('value') or 0:.4f}, picked trial {st.get('pick')} "
            f"{(pick or {}).get('value') or 0:.4f} "
            + (f"(experiment {st['experiment']})." if st.get("experiment") else "(not submitted)."),
        ]
    out += ["", "## Recommendations", ""]
    out += _md_recommendations(report)
    out += ["", "## Scorecard", ""]
    if report.scorecard:
        out.append(scorecard_markdown(report.scorecard, heading="###"))
    else:
        out.append("No scorecard in this report; run `wikirag scorecard`.")
    return "\n".join(out).rstrip() + "\n"


def _md_recommendations(report: Report) -> list[str]:
    if not report.recommendations:
        return ["No scorecard weaknesses to act on (run `wikirag scorecard`)."]
    out = []
    for n, r in enumerate(report.recommendations, 1):
        out.append(f"{n}. **{md_cell(r['dimension'])}** ({r['score']:.1f}): {md_cell(r['rule'])}")
        if r["command"]:
            out.append(f"   - `{r['command']}` — {md_cell(r['experiment']['why'])}")
        if r["action"]:
            out.append(f"   - {md_cell(r['action'])}")
    return out


# Report figures carry their own look: a figure left on plotly's *default* template picks
# up whatever is active in the process, and inside Streamlit that is the "streamlit"
# template, whose placeholder colours (#000001 ...) only the Streamlit frontend replaces,
# so every chart of an HTML report downloaded from the UI came out solid black.
REPORT_TEMPLATE = "plotly_white"
REPORT_COLORWAY = (
    "#0969da",  # blue
    "#e36209",  # orange
    "#1a7f37",  # green
    "#8250df",  # purple
    "#cf222e",  # red
    "#57606a",  # grey
    "#bf8700",  # yellow
    "#1b7c83",  # teal
)


def style_figure(fig: Any) -> Any:
    """``fig`` with the report's explicit template and colours (independent of any theme)."""
    import plotly.io as pio

    fig.update_layout(
        template=pio.templates[REPORT_TEMPLATE],
        colorway=list(REPORT_COLORWAY),
        paper_bgcolor="white",
        plot_bgcolor="white",
    )
    return fig


def report_figures(report: Report) -> dict[str, list[Any]]:
    """Plotly figures per section: category/difficulty/language bars, failure causes,
    the optimization trajectory."""
    import plotly.graph_objects as go

    figs: dict[str, list[Any]] = {"categories": [], "failures": [], "optimizations": []}
    for by, groups in report.breakdowns.items():
        if not groups:
            continue
        names = list(groups)
        fig = go.Figure(
            [
                go.Bar(name=m, x=names, y=[groups[g].get(m, 0.0) for g in names])
                for m in ("recall@5", "mrr", "hit@5")
            ]
        )
        fig.update_layout(
            title=f"By {by}", barmode="group", yaxis_range=[0, 1], height=340, xaxis_type="category"
        )
        figs["categories"].append(fig)
    if report.failures:
        fig = go.Figure(
            go.Bar(
                x=[len(f["queries"]) for f in report.failures],
                y=[f["label"] for f in report.failures],
                orientation="h",
            )
        )
        fig.update_layout(title="Misses at K=5 by cause", height=300, xaxis_title="queries")
        figs["failures"].append(fig)
    if report.trajectory:
        xs = [p["experiment"] for p in report.trajectory]
        fig = go.Figure()
        for m in ("recall@5", "mrr", "hit@5"):
            fig.add_scatter(x=xs, y=[p.get(m, 0.0) for p in report.trajectory], name=m)
        fig.update_layout(
            title="Tune score after each experiment",
            xaxis_title="experiment",
            xaxis_dtick=1,
            height=340,
        )
        figs["optimizations"].append(fig)
    if report.study:
        from workbench.tune.optimizer import Study, study_figures

        figs["optimizations"] += list(study_figures(Study.from_dict(report.study)).values())
    return {k: [style_figure(f) for f in v] for k, v in figs.items()}


def _e(v: Any) -> str:
    return html.escape("" if v is None else str(v), quote=True)


def _table(
    head: Sequence[str], rows: Sequence[Sequence[Any]], num_cols: set[int] | None = None
) -> str:
    """An HTML table; every cell is escaped here, so callers pass raw values."""
    num_cols = num_cols or set()
    th = "".join(f"<th>{_e(h)}</th>" for h in head)
    body = []
    for row in rows:
        cells = "".join(
            f'<td class="num">{_e(c)}</td>' if i in num_cols else f"<td>{_e(c)}</td>"
            for i, c in enumerate(row)
        )
        body.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{th}</tr></thead><tbody>{''.join(body)}</tbody></table>"


_CSS = (
    """
:root { color-scheme: light; }
body { font-family: FONTS; margin: 0; color: #1f2328; background: #f6f8fa; line-height: 1.5; }
header, section { max-width: 1200px; margin: 0 auto; padding: 16px 24px; }
header { background: #fff; border-bottom: 1px solid #d0d7de; max-width: none; }
nav a { margin-right: 12px; color: #0969da; text-decoration: none; }
section { background: #fff; margin-top: 16px; border: 1px solid #d0d7de; border-radius: 6px; }
h1 { font-size: 1.5rem; margin: 0 0 4px; } h2 { font-size: 1.25rem; margin-top: 0; }
table { border-collapse: collapse; width: 100%; margin: 8px 0 16px; font-size: 0.9rem; }
th, td { border-bottom: 1px solid #d0d7de; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f6f8fa; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; margin-bottom: 12px; }
.card { border: 1px solid #d0d7de; border-radius: 6px; padding: 8px 16px; min-width: 110px; }
.card .v { font-size: 1.6rem; font-weight: 600; } .card .k { color: #59636e; font-size: 0.85rem; }
.grade { font-size: 2.4rem; font-weight: 700; } .muted { color: #59636e; }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
pre { background: #f6f8fa; padding: 8px; overflow-x: auto; }
.figs > div { margin-bottom: 8px; }
"""
).replace("FONTS", FONT_STACK)


def render_html(report: Report, *, include_plotlyjs: bool = True) -> str:
    """One self-contained HTML file (plotly.js inlined once; no network access needed).

    ``include_plotlyjs=False`` leaves plotly.js out (smaller; the charts then need it
    from elsewhere) — for previews inside a page that already loaded it.
    """
    figs = report_figures(report)

    def charts(section: str) -> str:
        parts = [
            style_figure(f).to_html(  # again here: figures added to report_figures later too
                full_html=False,
                include_plotlyjs=False,
                config={"displaylogo": False, "responsive": True},
            )
            for f in figs.get(section, [])
        ]
        return f'<div class="figs">{"".join(parts)}</div>' if parts else ""

    r = report.run
    plotly_js = ""
    if include_plotlyjs:
        from plotly.offline import get_plotlyjs

        plotly_js = f'<script type="text/javascript">{get_plotlyjs()}</script>'
    nav = "".join(f'<a href="#{sid}">{_e(title)}</a>' for sid, title in SECTIONS)
    sec: dict[str, str] = {}

    cards = "".join(
        f'<div class="card"><div class="v">{report.means.get(m, 0.0):.3f}</div>'
        f'<div class="k">{_e(m)}</div></div>'
        for m in CARDS
    ) + "".join(
        f'<div class="card"><div class="v">{report.latency.get(p, 0.0):.1f}</div>'
        f'<div class="k">latency {p} (ms)</div></div>'
        for p in ("p50", "p95")
    )
    metric_rows = [
        [m, *(f"{report.means.get(f'{m}@{k}', 0.0):.3f}" for k in KS)] for m in TABLE_MEASURES
    ]
    sec["metrics"] = (
        f'<div class="cards">{cards}</div>'
        + _table(["measure", *(f"@{k}" for k in KS)], metric_rows, set(range(1, len(KS) + 1)))
        + f"<p>MRR {report.means.get('mrr', 0.0):.3f} · MAP {report.means.get('map', 0.0):.3f}</p>"
    )
    sec["results"] = _table(
        [
            "id",
            "query",
            "difficulty",
            "category",
            "recall@5",
            "mrr",
            "first relevant rank",
            "cause",
        ],
        [
            [
                q["id"],
                q["query"],
                q["difficulty"],
                q["category"],
                f"{q['recall@5']:.2f}",
                f"{q['mrr']:.2f}",
                q["first_relevant_rank"] or "-",
                (CAUSES.get(q["cause"], q["cause"]) or "-")
                + (f" (error: {q['error']})" if q["error"] else ""),
            ]
            for q in report.queries
        ],
        {4, 5, 6},
    )
    cat_tables = "".join(
        f"<h3>By {_e(by)}</h3>"
        + _table(
            ["group", "n", "recall@5", "mrr", "hit@5", "ndcg@10"],
            [
                [
                    g,
                    v.get("n", 0),
                    f"{v.get('recall@5', 0.0):.3f}",
                    f"{v.get('mrr', 0.0):.3f}",
                    f"{v.get('hit@5', 0.0):.3f}",
                    f"{v.get('ndcg@10', 0.0):.3f}",
                ]
                for g, v in groups.items()
            ],
            {1, 2, 3, 4, 5},
        )
        for by, groups in report.breakdowns.items()
    )
    sec["categories"] = charts("categories") + cat_tables
    if report.failures:
        sec["failures"] = charts("failures") + "".join(
            f"<h3>{_e(f['label'])} ({len(f['queries'])})</h3>"
            + _table(["id", "query"], [[q["id"], q["query"]] for q in f["queries"]])
            for f in report.failures
        )
    else:
        sec["failures"] = "<p>No query missed a relevant chapter in the top 5.</p>"
    if report.optimizations:
        sec["optimizations"] = charts("optimizations") + _table(
            [
                "#",
                "date",
                "tier",
                "change",
                "decision",
                "tune recall@5",
                "tune mrr",
                "holdout recall@5",
            ],
            [
                [
                    o["number"],
                    o["date"],
                    o["tier"],
                    o["title"],
                    o["decision"],
                    _pair(o["tune_recall@5"]),
                    _pair(o["tune_mrr"]),
                    _pair(o["holdout_recall@5"]),
                ]
                for o in report.optimizations
            ],
        )
    else:
        sec["optimizations"] = charts("optimizations") + (
            "<p>No experiments yet (<code>wikirag experiment try</code> or "
            "<code>wikirag optimize</code>).</p>"
        )
    if report.recommendations:
        items = []
        for rec in report.recommendations:
            parts = [
                f"<strong>{_e(rec['dimension'])}</strong> ({rec['score']:.1f}): {_e(rec['rule'])}"
            ]
            if rec["command"]:
                parts.append(
                    f"<br><code>{_e(rec['command'])}</code> — {_e(rec['experiment']['why'])}"
                )
            if rec["action"]:
                parts.append(f"<br>{_e(rec['action'])}")
            items.append(f"<li>{''.join(parts)}</li>")
        sec["recommendations"] = f"<ol>{''.join(items)}</ol>"
    else:
        sec["recommendations"] = (
            "<p>No scorecard weaknesses to act on (run <code>wikirag scorecard</code>).</p>"
        )
    card = report.scorecard
    if card:
        dims = _table(
            ["dimension", "weight", "score", "weighted", "rule", "formula", "evidence"],
            [
                [
                    d["name"],
                    d["weight"],
                    f"{d['score']:.1f}",
                    f"{d['weighted']:.2f}",
                    d["rule"],
                    d["formula"],
                    json.dumps(d["evidence"], ensure_ascii=False, default=str),
                ]
                for d in card["dimensions"]
            ],
            {1, 2, 3},
        )
        sec["scorecard"] = (
            f'<p><span class="grade">{_e(card["grade"])}</span> '
            f'<span class="muted">{card["total"]:.1f} / 100</span></p>' + dims
        )
    else:
        sec["scorecard"] = "<p>No scorecard in this report; run <code>wikirag scorecard</code>.</p>"

    notes = "".join(f'<p class="muted">{_e(n)}</p>' for n in report.notes)
    body = "".join(
        f'<section id="{sid}"><h2>{_e(title)}</h2>{sec[sid]}</section>' for sid, title in SECTIONS
    )
    meta = (
        f"Run <code>{_e(r['run_id'])}</code> ({_e(r['created'])}) · config "
        f"<code>{_e(r['config_hash'])}</code> · dataset {_e(r['dataset'])} "
        f"(<code>{_e(r['dataset_hash'])}</code>) · split {_e(r['split'])} · mode "
        f"{_e(report.mode)} · rerank {'on' if r['rerank'] else 'off'} · {r['queries']} queries"
    )
    config = (
        f"<details><summary>Engine config</summary><pre>{_e(report.config_yaml)}</pre></details>"
        if report.config_yaml
        else ""
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="zh-CN">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{_e(report.title)}</title>\n<style>{_CSS}</style>\n{plotly_js}\n</head>\n"
        f'<body>\n<header><h1>{_e(report.title)}</h1><p class="muted">{meta}</p>'
        f"<nav>{nav}</nav>{notes}{config}</header>\n{body}\n</body>\n</html>\n"
    )


def write_report(report: Report, fmt: str, out: str | Path) -> Path:
    """Render ``report`` in ``fmt`` (html | md | csv | json) and write it atomically."""
    from engine.atomic import atomic_write_text

    renderers = {
        "html": render_html,
        "md": render_markdown,
        "csv": render_csv,
        "json": render_json,
    }
    if fmt not in renderers:
        raise ValueError(f"format must be one of {', '.join(renderers)}; got {fmt!r}")
    path = Path(out)
    atomic_write_text(path, renderers[fmt](report))
    return path
