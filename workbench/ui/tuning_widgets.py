"""Widgets of the tuning pages: config pickers, a comparison, an experiment's decision."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from engine.config import field_spec
from workbench.eval.measures import shown
from workbench.tune import compare
from workbench.tune.compare import Comparison
from workbench.tune.experiment_log import ExperimentResult
from workbench.tune.experiment_store import ExperimentStore
from workbench.tune.verdict import from_decision
from workbench.ui.components import sentence
from workbench.ui.i18n import t
from workbench.workspace import Workspace


def config_specs(ws: Workspace) -> list[str]:
    """Config names `workbench.tune.compare.parse_config_spec` understands, baseline first."""
    versions = ExperimentStore(ws.experiments).accepted_versions()
    return ["baseline", "defaults", *[f"v{v['version']}" for v in reversed(versions)]]


def delta_colour(v: Any) -> str:
    """Gains green, losses red, ties uncoloured (for Styler.map over delta cells)."""
    if not isinstance(v, int | float) or abs(v) <= 1e-9:
        return ""
    return "color: #1a7f37" if v > 0 else "color: #cf222e"


def comparison(c: Comparison) -> None:
    """A Comparison: metrics with deltas, paired statistics, wins/losses, changed queries."""
    measures = [*shown("table"), *compare.LATENCY]
    table: dict[str, list[Any]] = {"measure": measures}
    for i, lab in enumerate(c.labels):
        name = f"{i + 1}. {lab}"
        table[name] = [c.metrics[i].get(m, 0.0) for m in measures]
        if i:
            table[f"Δ {i + 1}"] = [c.delta(i, m) for m in measures]
    st.markdown(
        t(
            "**{dataset}** · split {split} · {n} queries",
            dataset=c.dataset,
            split=c.split,
            n=c.queries,
        )
    )
    st.dataframe(
        pd.DataFrame(table)
        .style.format(precision=3)
        .map(delta_colour, subset=[k for k in table if k.startswith("Δ")]),
        hide_index=True,
        width="stretch",
    )
    rows = []
    for i in range(1, len(c.labels)):
        for m, s in c.stats[i - 1].items():
            rows.append(
                {
                    "config": f"{i + 1}. {c.labels[i]}",
                    "measure": m,
                    "delta": s.delta,
                    "95% CI": f"[{s.ci_low:+.3f}, {s.ci_high:+.3f}]",
                    "p": s.p_value,
                    "significant": t("yes") if s.significant else t("no"),
                    "wins/losses/ties": f"{s.wins}/{s.losses}/{s.ties}",
                }
            )
    st.markdown(t("**Paired statistics** (vs config 1)"))
    st.dataframe(pd.DataFrame(rows).style.format(precision=3), hide_index=True, width="stretch")
    cols = st.columns(2)
    for col, fig in zip(cols, compare.comparison_figures(c), strict=False):
        fig.update_layout(height=340, margin={"l": 10, "r": 10, "t": 40, "b": 10})
        col.plotly_chart(fig, width="stretch")
    for i in range(1, len(c.labels)):
        changed = c.changed[i - 1]
        diff = ", ".join(f"`{k}`: {a!r} → {b!r}" for k, (a, b) in c.diffs[i - 1].items())
        with st.expander(
            t(
                "Queries that changed most: {label} vs {base} ({n})",
                label=c.labels[i],
                base=c.labels[0],
                n=len(changed),
            )
        ):
            st.caption(t("config changes: {diff}", diff=diff or t("none")))
            if changed:
                st.dataframe(
                    pd.DataFrame(
                        [
                            {
                                "id": q.id,
                                "query": q.query,
                                "Δ recall@5": q.delta_recall5,
                                "Δ mrr": q.delta_mrr,
                                "first relevant rank": f"{q.rank_before or '-'} → {q.rank_after or '-'}",
                            }
                            for q in changed
                        ]
                    ).style.format(precision=3),
                    hide_index=True,
                    width="stretch",
                )


def config_value_widget(key: str, current: Any, widget_key: str) -> Any:
    """A widget for one config key, built from ``engine.config.field_spec``."""
    spec = field_spec(key)
    tp, choices = spec["type"], spec["choices"]
    lo, hi = spec["range"] or (None, None)
    label = t("New value for `{key}` (now {current})", key=key, current=repr(current))
    if choices:
        opts = list(choices)
        return st.selectbox(label, opts, index=opts.index(current), key=widget_key)
    if tp is bool:
        return st.toggle(label, value=not current, key=widget_key)
    if tp in (int, float):  # Streamlit makes an int or float input (int: steps of 1) by type
        return tp(
            st.number_input(
                label,
                min_value=None if lo is None else tp(lo),
                max_value=None if hi is None else tp(hi),
                value=tp(current),
                key=widget_key,
                format=None if tp is int else "%.4g",
            )
        )
    return st.text_input(label, value=str(current), key=widget_key)


def verdict_line(result: ExperimentResult) -> None:
    """An ExperimentResult's verdict in plain words: accepted, or rolled back and why."""
    d = result.decision
    if result.no_effect:
        st.info(
            t(
                "No effect: {title} leaves every ranking identical, so it was not logged as an "
                "experiment.",
                title=result.title,
            )
        )
        return
    v = from_decision(d)
    verdict = t("Accepted — new baseline") if d.accepted else t("Rolled back")
    why = "; ".join(r.render(t) for r in v.reasons)
    # text and colour, not emoji alone (emoji render as boxes without an emoji font)
    (st.success if d.accepted else st.error)(
        t(
            "Experiment {n} · {title}: **{verdict}**",
            n=result.number,
            title=result.title,
            verdict=verdict,
        )
        + "  \n"
        + sentence(v.message.render(t))
        + (f" — {why}" if why else "")
    )


def decision(result: ExperimentResult) -> None:
    """An ExperimentResult: verdict, every criterion with its measured value, tune vs holdout."""
    verdict_line(result)
    if result.no_effect:
        return
    d = result.decision
    st.caption(
        t(
            "Rule: **{name}** (primary {primary}, α = {alpha})",
            name=d.rule.name,
            primary=d.rule.primary,
            alpha=f"{d.rule.alpha:g}",
        )
    )
    result_col, passed = t("result"), t("pass")  # the styled column and value, translated
    st.dataframe(
        pd.DataFrame(
            [
                {
                    t("criterion"): c.name,
                    t("measured"): c.shown,
                    t("needs"): c.threshold,
                    result_col: passed if c.passed else t("FAIL"),
                    t("detail"): c.detail,
                }
                for c in d.criteria
            ]
        ).style.map(
            lambda v: "color: #1a7f37" if v == passed else "color: #cf222e; font-weight: 600",
            subset=[result_col],
        ),
        hide_index=True,
        width="stretch",
    )
    measures = (*shown("headline"), "latency_p50")
    st.dataframe(
        pd.DataFrame(
            {
                t("measure"): measures,
                t("baseline (tune)"): [result.base_tune.get(m, 0.0) for m in measures],
                t("candidate (tune)"): [result.cand_tune.get(m, 0.0) for m in measures],
                t("baseline (holdout)"): [result.base_holdout.get(m, 0.0) for m in measures],
                t("candidate (holdout)"): [result.cand_holdout.get(m, 0.0) for m in measures],
            }
        ).style.format(precision=3),
        hide_index=True,
        width="stretch",
    )
    moves = result.extra.get("queries") or {}
    cols = st.columns(2)
    for col, kind, colour in zip(
        cols, ("improved", "regressed"), ("#1a7f37", "#cf222e"), strict=True
    ):
        rows = moves.get(kind) or []
        col.markdown(f"**{t(kind.capitalize())}** ({d.rule.primary}, tune) · {len(rows)}")
        if rows:
            col.dataframe(
                pd.DataFrame(rows)
                .style.map(lambda _v, c=colour: f"color: {c}", subset=["delta"])
                .format({"delta": "{:+.3f}"}),
                hide_index=True,
                width="stretch",
            )
