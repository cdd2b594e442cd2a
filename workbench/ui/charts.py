"""Numbers drawn: recall bands, metric cards, bar charts, the experiment trajectory."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import pandas as pd
import streamlit as st

from workbench.eval.measures import shown
from workbench.tune.loop_figures import trajectory_figure
from workbench.ui.i18n import t

# Target bands for recall (docs/design.md, "Workbench"): poor < 0.5 <= acceptable < 0.7 <= good < 0.85 <= excellent.
BandColour = Literal["green", "blue", "orange", "red"]
BANDS: tuple[tuple[float, str, BandColour], ...] = (
    (0.85, "excellent", "green"),
    (0.7, "good", "blue"),
    (0.5, "acceptable", "orange"),
)


def band(value: float) -> tuple[str, BandColour]:
    """(label, colour) of a recall value's target band."""
    for lo, label, color in BANDS:
        if value >= lo:
            return label, color
    return "poor", "red"


def band_badge(value: float) -> str:
    label, color = band(value)
    return f":{color}-badge[{t(label)}]"  # excellent / good / acceptable / poor


def metric_cards(means: Mapping[str, float], ks: Sequence[int] = (5, 10, 20)) -> None:
    """Cards per K: recall (with its target band), precision, hit rate, NDCG, tree NDCG,
    hierarchical recall (the tree-aware numbers beside the strict ones)."""
    for k in ks:
        cols = st.columns(6)
        for col, (name, label) in zip(
            cols,
            (
                ("recall", t("Recall")),
                ("precision", t("Precision")),
                ("hit", t("Hit rate")),
                ("ndcg", "NDCG"),
                ("hndcg", t("Tree NDCG")),
                ("hrecall", t("Hier. recall")),
            ),
            strict=True,
        ):
            if f"{name}@{k}" not in means:  # a run recorded before this measure existed
                col.metric(f"{label}@{k}", "—", help=t("not in this run; run the evaluation again"))
                continue
            value = float(means[f"{name}@{k}"])
            if name == "recall":
                text, color = band(value)
                col.metric(
                    f"{label}@{k}",
                    f"{value:.3f}",
                    delta=t(text),  # excellent / good / acceptable / poor
                    delta_color=color,
                    delta_arrow="off",
                    border=True,
                )
            else:
                col.metric(f"{label}@{k}", f"{value:.3f}", border=True)


def bar_chart(
    groups: Mapping[str, Mapping[str, float]],
    measures: Sequence[str] | None = None,
    title: str = "",
) -> None:
    """Grouped bars: one group per slice, one bar per measure (default: the chart measures)."""
    import plotly.express as px

    measures = shown("chart") if measures is None else measures

    rows = [
        # An empty slice name (items without a category) gets a label, not a blank bar.
        {
            "slice": str(g) if str(g).strip() else t("(none)"),
            "measure": m,
            "value": float(vals.get(m, 0.0)),
        }
        for g, vals in groups.items()
        for m in measures
    ]
    if not rows:
        st.caption(t("{title}: no data", title=title))
        return
    fig = px.bar(
        pd.DataFrame(rows),
        x="slice",
        y="value",
        color="measure",
        barmode="group",
        title=title,
        range_y=[0, 1],
    )
    fig.update_layout(height=300, margin={"l": 10, "r": 10, "t": 40, "b": 10}, xaxis_title="")
    st.plotly_chart(fig, width="stretch")


def trajectory_chart(points: Sequence[Mapping[str, Any]]) -> None:
    """The baseline's score after each experiment; rolled-back candidates as hollow markers."""

    if not points:
        st.caption(
            t("No experiments yet: run one on the Experiments page to start the trajectory.")
        )
        return
    st.plotly_chart(trajectory_figure(points, t), width="stretch")
