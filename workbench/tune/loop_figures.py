"""Figures of the tuning loop that say something: the trajectory draws each rolled-back
candidate's own score (a hollow marker) beside the accepted baseline's line, on an
integer experiment axis."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from workbench.eval.measures import shown

COLOURS = {"recall@5": "#0969da", "mrr": "#8250df", "hit@5": "#1a7f37"}
MAX_TICKS = 10  # experiment numbers on the x axis; more crowd a half-width chart


def _same(s: str) -> str:
    return s


def trajectory_figure(
    points: Sequence[Mapping[str, Any]],
    tr: Callable[[str], str] = _same,
    measures: Sequence[str] | None = None,
) -> Any:
    """The baseline's score after each experiment (lines), each rolled-back candidate's score
    (hollow markers, same colour), golden set changes as dotted lines. ``tr`` translates."""
    import plotly.graph_objects as go

    measures = shown("chart") if measures is None else measures
    fig = go.Figure()
    xs = [int(p["experiment"]) for p in points]
    for m in measures:
        if not any(m in p for p in points):
            continue
        colour = COLOURS.get(m)
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=[p.get(m) for p in points],
                mode="lines+markers",
                name=tr("{measure} (baseline)").format(measure=m),
                line={"color": colour, "shape": "hv"},
                marker={"color": colour},
            )
        )
        rolled = [p for p in points if p.get("decision") == "rolled back" and p.get("candidate")]
        if rolled:
            fig.add_trace(
                go.Scatter(
                    x=[int(p["experiment"]) for p in rolled],
                    y=[p["candidate"].get(m) for p in rolled],
                    mode="markers",
                    name=tr("{measure} (rolled back)").format(measure=m),
                    marker={"symbol": "circle-open", "size": 10, "color": colour},
                    text=[str(p.get("title", "")) for p in rolled],
                    hovertemplate="#%{x} %{text}<br>%{y:.3f}<extra></extra>",
                )
            )
    prev = None
    for p in points:
        h = p.get("dataset_hash") or ""
        if prev and h and h != prev:
            # the golden set changed: scores before and after are not on the same questions
            x = int(p["experiment"]) - 0.5
            fig.add_vline(x=x, line_dash="dot", line_color="#9a6700")
            fig.add_annotation(
                x=x, y=1.02, yref="paper", text=tr("golden set changed"), showarrow=False
            )
        prev = h or prev
    fig.update_layout(
        height=380,
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        xaxis_title=tr("experiment"),
        title=tr("Score trajectory (tune split)"),
        # under the plot, not beside it: a side legend of six entries took half the width
        legend={"orientation": "h", "yanchor": "top", "y": -0.22, "x": 0},
    )
    # whole experiment numbers only (plotly's automatic ticks put 2.5 between two of them),
    # few enough to stay level and apart in a narrow column
    last = max(xs, default=0)
    fig.update_xaxes(tickformat="d", dtick=tick_step(last), tick0=0, tickangle=0)
    return fig


def tick_step(last: int, most: int = MAX_TICKS) -> int:
    """The smallest of 1, 2, 5, 10, 20, 50, ... that puts at most ``most`` ticks on 0..last."""
    step = 1
    while last / step > most:
        step = step * 5 // 2 if str(step)[0] == "2" else step * 2
    return step
