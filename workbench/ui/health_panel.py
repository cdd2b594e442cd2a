"""The Golden set page's health panel: what the set can tell apart (`wikirag golden health`)."""

from __future__ import annotations

import streamlit as st

from workbench.eval.golden import GoldenSet
from workbench.tune.size_guard import health_of
from workbench.ui.i18n import t
from workbench.workspace import Workspace


def _f(x: float | None, spec: str = ".3f") -> str:
    return "n/a" if x is None else format(x, spec)


def render(ws: Workspace, gs: GoldenSet) -> None:
    st.subheader(t("What this set can detect"))
    h = health_of(ws, gs)
    q = h.queries
    a, b, c, d, e = st.columns(5)
    a.metric(t("Queries (tune / holdout)"), f"{q['tune']} / {q['holdout']}")
    b.metric(t("Judged per query"), f"{h.judged_depth['mean']:.2f}")
    c.metric(t("Unjudged in top 10"), _f(h.unjudged_at_10, ".1%"))
    d.metric(t("Saturated queries"), f"{len(h.saturated)} / {q['all']}")
    e.metric(t("MDE of MRR (tune)"), _f(h.mde["tune"]))
    st.caption(
        t(
            "Saturated: every tried config ({n}) already ranks a relevant chapter first. MDE: "
            "the smallest MRR change a paired test finds 8 times in 10 (alpha 0.05) on this "
            "set, from the spread of its own experiments (holdout {holdout}, all {all}; "
            "typical effect seen {seen}). A change smaller than the MDE is mostly invisible.",
            n=h.configs_tried,
            holdout=_f(h.mde["holdout"]),
            all=_f(h.mde["all"]),
            seen=_f(h.effects_seen),
        )
    )
