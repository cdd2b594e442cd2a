"""The HTML report: one self-contained file from the jinja2 template ``templates/report.html.j2``.

The page opens offline: plotly.js is inlined once, every figure is a ``<div>`` + inline
script, no CDN, no web fonts. Queries, ids, categories and titles come from the wiki and the
golden set, i.e. from whoever edits them, so the template escapes every value by default
(autoescape) rather than trusting each f-string to remember ``html.escape``. Values are
escaped with the standard library's ``html.escape`` (``&#x27;`` for a quote), as the
report always was, so old and new reports compare byte for byte.
"""

from __future__ import annotations

import functools
import html
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from workbench.eval.attribution import CAUSES
from workbench.eval.measures import shown
from workbench.eval.messages import Translate
from workbench.eval.metrics import DEFAULT_FAMILIES
from workbench.export.figures import report_figures, style_figure
from workbench.export.markdown_report import BY
from workbench.export.report import KS, SECTIONS, Report, pair_text
from workbench.tune.catalog import tier_message, title_message

TEMPLATES = Path(__file__).parent / "templates"


@dataclass(frozen=True)
class Table:
    """A table for the template: raw cell values (escaped there), numeric column indices."""

    head: Sequence[str]
    rows: Sequence[Sequence[Any]]
    num: frozenset[int] = field(default_factory=frozenset)


def _escape(value: Any) -> Any:
    """Every ``{{ value }}``: Markup passes (the template's own macros, figures), anything
    else is escaped here; None prints as nothing."""
    if isinstance(value, Markup):
        return value
    return Markup(html.escape("" if value is None else str(value), quote=True))


@functools.cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        finalize=_escape,
        undefined=jinja2.StrictUndefined,  # a misspelt name fails instead of printing ""
        keep_trailing_newline=True,
    )
    env.filters["fixed"] = lambda v, digits: f"{v:.{digits}f}"
    return env


def render_html(
    report: Report, *, include_plotlyjs: bool = True, translate: Translate | None = None
) -> str:
    """One self-contained HTML file (plotly.js inlined once; no network access needed).

    ``include_plotlyjs=False`` leaves plotly.js out (smaller; the charts then need it
    from elsewhere) — for previews inside a page that already loaded it. ``translate``
    gives the report's own words in the reader's language (English without it).
    """
    tr = translate or _same
    plotly_js = Markup("")
    if include_plotlyjs:
        from plotly.offline import get_plotlyjs

        plotly_js = Markup(f'<script type="text/javascript">{get_plotlyjs()}</script>')
    figures = {
        section: [
            Markup(
                style_figure(f).to_html(  # again here: figures added to report_figures later too
                    full_html=False,
                    include_plotlyjs=False,
                    config={"displaylogo": False, "responsive": True},
                )
            )
            for f in figs
        ]
        for section, figs in report_figures(report, translate).items()
    }
    return (
        _environment()
        .get_template("report.html.j2")
        .render(
            report=report,
            report_title=report.title_text(translate),
            notes=report.note_texts(translate),
            sections=[(sid, m.render(translate)) for sid, m in SECTIONS],
            plotly_js=plotly_js,
            figures=figures,
            t=tr,
            th=lambda text: Markup(tr(text)),  # the catalog's own markup, not user text
            **_tables(report, tr),
        )
    )


def _same(text: str) -> str:
    return text


def _word(tr: Translate, text: Any) -> Any:
    return tr(text) if isinstance(text, str) and text else text


def _tables(report: Report, tr: Translate = _same) -> dict[str, Any]:
    """The report's tables and cards with numbers formatted as the page shows them."""
    means, lat = report.means, report.latency
    cards = [(m, f"{means.get(m, 0.0):.3f}") for m in shown("headline")] + [
        (tr("latency {p} (ms)").format(p=p), f"{lat.get(p, 0.0):.1f}") for p in ("p50", "p95")
    ]
    metric_table = Table(
        [tr("measure"), *(f"@{k}" for k in KS)],
        [[m, *(f"{means.get(f'{m}@{k}', 0.0):.3f}" for k in KS)] for m in DEFAULT_FAMILIES],
        frozenset(range(1, len(KS) + 1)),
    )
    return {
        "cards": cards,
        "metric_table": metric_table,
        "results_table": _results_table(report, tr),
        "category_tables": _category_tables(report, tr),
        "failure_tables": _failure_tables(report, tr),
        "optimization_table": _optimization_table(report, tr),
        "scorecard_table": _scorecard_table(report, tr),
    }


def _results_table(report: Report, tr: Translate) -> Table:
    """One row per query: its labels, scores and the cause of a miss."""
    return Table(
        [
            tr(h)
            for h in (
                "id",
                "query",
                "difficulty",
                "category",
                "recall@5",
                "mrr",
                "first relevant rank",
                "cause",
            )
        ],
        [
            [
                q["id"],
                q["query"],
                _word(tr, q["difficulty"]),
                q["category"],
                f"{q['recall@5']:.2f}",
                f"{q['mrr']:.2f}",
                q["first_relevant_rank"] or "-",
                (_word(tr, CAUSES.get(q["cause"], q["cause"])) or "-")
                + (tr(" (error: {error})").format(error=q["error"]) if q["error"] else ""),
            ]
            for q in report.queries
        ],
        frozenset({4, 5, 6}),
    )


def _category_tables(report: Report, tr: Translate) -> list[tuple[str, Table]]:
    """A (title, table) per breakdown of the means (by difficulty, category, ...)."""
    return [
        (
            tr(BY[by]) if by in BY else tr("By {by}").format(by=by),
            Table(
                [tr("group"), "n", *shown("headline")],
                [
                    [
                        _word(tr, g) if by == "difficulty" else g,
                        v.get("n", 0),
                        *(f"{v.get(m, 0.0):.3f}" for m in shown("headline")),
                    ]
                    for g, v in groups.items()
                ],
                frozenset({1, 2, 3, 4, 5}),
            ),
        )
        for by, groups in report.breakdowns.items()
    ]


def _failure_tables(report: Report, tr: Translate) -> list[tuple[Any, int, Table]]:
    """A (label, count, table of queries) per failure cause."""
    return [
        (
            _word(tr, f["label"]),
            len(f["queries"]),
            Table([tr("id"), tr("query")], [[q["id"], q["query"]] for q in f["queries"]]),
        )
        for f in report.failures
    ]


def _optimization_table(report: Report, tr: Translate) -> Table | None:
    """The experiment log, one row per decision; None without experiments."""
    return (
        Table(
            [
                "#",
                *(
                    tr(h)
                    for h in (
                        "date",
                        "tier",
                        "change",
                        "decision",
                        "tune recall@5",
                        "tune mrr",
                        "holdout recall@5",
                    )
                ),
            ],
            [
                [
                    o["number"],
                    o["date"],
                    tier_message(str(o["tier"])).render(tr),
                    title_message(str(o["title"])).render(tr),
                    _word(tr, o["decision"]),
                    pair_text(o["tune_recall@5"]),
                    pair_text(o["tune_mrr"]),
                    pair_text(o["holdout_recall@5"]),
                ]
                for o in report.optimizations
            ],
        )
        if report.optimizations
        else None
    )


def _scorecard_table(report: Report, tr: Translate) -> Table | None:
    """The scorecard's dimensions with rule, formula and raw evidence; None without one."""
    card = report.scorecard
    return (
        Table(
            [
                tr(h)
                for h in ("dimension", "weight", "score", "weighted", "rule", "formula", "evidence")
            ],
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
            frozenset({1, 2, 3}),
        )
        if card
        else None
    )
