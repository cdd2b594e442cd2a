"""The report's figures: category / difficulty / language bars, failure causes, the
optimization trajectory and the latest optimizer study, in the report's own colours."""

from __future__ import annotations

from typing import Any

from workbench.eval.measures import shown
from workbench.eval.messages import Translate
from workbench.export.markdown_report import BY
from workbench.export.report import Report
from workbench.tune.study import Study
from workbench.tune.study_figures import study_figures

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


def report_figures(report: Report, translate: Translate | None = None) -> dict[str, list[Any]]:
    """Plotly figures per section: category/difficulty/language bars, failure causes,
    the optimization trajectory; titles and axes in the words ``translate`` gives."""
    import plotly.graph_objects as go

    def tr(text: str) -> str:
        return translate(text) if translate and text else text

    figs: dict[str, list[Any]] = {"categories": [], "failures": [], "optimizations": []}
    for by, groups in report.breakdowns.items():
        if not groups:
            continue
        names = list(groups)
        shown_names = [tr(g) for g in names] if by == "difficulty" else names
        fig = go.Figure(
            [
                go.Bar(name=m, x=shown_names, y=[groups[g].get(m, 0.0) for g in names])
                for m in shown("chart")
            ]
        )
        fig.update_layout(
            title=tr(BY[by]) if by in BY else tr("By {by}").format(by=by),
            barmode="group",
            yaxis_range=[0, 1],
            height=340,
            xaxis_type="category",
        )
        figs["categories"].append(fig)
    if report.failures:
        fig = go.Figure(
            go.Bar(
                x=[len(f["queries"]) for f in report.failures],
                y=[tr(f["label"]) for f in report.failures],
                orientation="h",
            )
        )
        fig.update_layout(title=tr("Misses at K=5 by cause"), height=300, xaxis_title=tr("queries"))
        figs["failures"].append(fig)
    if report.trajectory:
        xs = [p["experiment"] for p in report.trajectory]
        fig = go.Figure()
        for m in shown("chart"):
            fig.add_scatter(x=xs, y=[p.get(m, 0.0) for p in report.trajectory], name=m)
        fig.update_layout(
            title=tr("Tune score after each experiment"),
            xaxis_title=tr("experiment"),
            xaxis_dtick=1,
            height=340,
        )
        figs["optimizations"].append(fig)
    if report.study:
        figs["optimizations"] += list(study_figures(Study.from_dict(report.study)).values())
    return {k: [style_figure(f) for f in v] for k, v in figs.items()}
