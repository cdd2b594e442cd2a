"""Compare & sweep: 2-4 configs side by side with paired statistics; a 1-2 parameter grid."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from engine.config import all_keys
from workbench.eval.measures import shown
from workbench.tune import compare
from workbench.tune import sweep as sweep_mod
from workbench.ui import components as ui
from workbench.ui import resources, state, tuning_widgets
from workbench.ui.i18n import t
from workbench.ui.runs_diff import runs_diff

st.title(t("Compare & sweep"))

with ui.guarded(t("Compare & sweep")):
    ws = resources.workspace()
    label, cfg = ui.current_config(ws)
    gs = ui.golden_set_or_stop(ws, t("Comparisons need a golden set."))
    bases = tuning_widgets.config_specs(ws)

    compare_tab, runs_tab, sweep_tab = st.tabs(
        [t("Compare configs"), t("Runs per query"), t("Sweep parameters")]
    )
    with runs_tab:
        runs_diff(ws)
    with compare_tab:
        st.caption(
            t(
                "The first config is the reference: deltas, 95% bootstrap CIs, randomization-test "
                "p-values and per-query wins/losses are “other − first”. Edit a config on the fly "
                "with overrides such as `fusion.k=30, fusion.bm25_weight=2`."
            )
        )
        n = st.radio(t("Configs"), [2, 3, 4], horizontal=True, key=state.COMPARE_N)
        specs = []
        for i in range(int(n)):
            a, b = st.columns([1, 3])
            base = a.selectbox(
                t("Config {n}", n=i + 1), bases, key=state.item_key(state.COMPARE_BASE, i)
            )
            edits = b.text_input(
                t("Overrides {n}", n=i + 1),
                key=state.item_key(state.COMPARE_EDIT, i),
                placeholder=t("key=value, key=value (optional)"),
                help=t("Known keys: ") + ", ".join(all_keys()),
            )
            specs.append(base + ("+" + edits.strip() if edits.strip() else ""))
        c = st.columns(2)
        split = c[0].selectbox(t("Split"), ["all", "tune", "holdout"], key=state.COMPARE_SPLIT)
        if c[1].button(t("Compare"), key=state.COMPARE_RUN, type="primary"):
            configs = [compare.parse_config_spec(s, ws) for s in specs]
            with ui.progress_bar(t("Evaluating")) as progress:
                result = compare.compare_configs(
                    ws,
                    configs,
                    gs,
                    split=split,
                    evaluator_for=lambda c_: resources.evaluator(ws, c_),
                    progress=progress,
                )
            state.set_compare_result(result)
        result = state.compare_result()
        if result is not None:
            tuning_widgets.comparison(result)

    with sweep_tab:
        st.caption(
            t(
                "Sweeps start from the sidebar config (**{label}** `{hash}`); decisions read "
                "the tune split, the holdout columns show whether a gain generalises.",
                label=label,
                hash=cfg.hash,
            )
        )
        numeric = [k for k in all_keys() if not k.startswith(("llm.", "embedding."))]
        a, b = st.columns(2)
        k1 = a.selectbox(
            t("Parameter 1"),
            numeric,
            index=numeric.index("fusion.bm25_weight"),
            key=state.SWEEP_KNOB_1,
        )
        v1 = a.text_input(t("Values 1"), "0.5, 0.7, 0.9", key=state.SWEEP_VALUES_1)
        none_label = t("(none)")  # translated here: format_func also runs outside the script
        k2 = b.selectbox(
            t("Parameter 2 (optional)"),
            ["(none)", *numeric],
            key=state.SWEEP_KNOB_2,
            format_func=lambda k: none_label if k == "(none)" else k,
        )
        v2 = b.text_input(
            t("Values 2"), "", key=state.SWEEP_VALUES_2, placeholder=t("e.g. 0.5, 1, 2")
        )
        row = st.columns(3)
        split = row[0].selectbox(t("Decide on"), ["tune", "all"], key=state.SWEEP_SPLIT)
        measure = row[1].selectbox(t("Measure"), list(shown("headline")), key=state.SWEEP_MEASURE)
        if row[2].button(t("Run sweep"), key=state.SWEEP_RUN, type="primary"):
            grid = dict([sweep_mod.parse_grid_arg(f"{k1}={v1}")])
            if k2 != "(none)" and v2.strip():
                grid.update([sweep_mod.parse_grid_arg(f"{k2}={v2}")])
            with ui.progress_bar(t("Sweeping")) as progress:
                res = sweep_mod.sweep(
                    ws,
                    cfg,
                    grid,
                    gs,
                    split=split,
                    progress=progress,
                    evaluator_for=lambda c_: resources.evaluator(ws, c_),
                )
            state.set_sweep_result(res)
        res = state.sweep_result()
        if res is not None:
            best = res.best
            st.success(
                t(
                    "Best on {split}: {values} — {measure} {score}, holdout MRR {mrr}, "
                    "p95 {p95} ms",
                    split=res.split,
                    values=", ".join(f"`{k}={v}`" for k, v in best.values.items()),
                    measure=measure,
                    score=f"{best.tune.get(measure, 0):.3f}",
                    mrr=f"{best.holdout.get('mrr', 0):.3f}",
                    p95=f"{best.latency_p95:.1f}",
                )
            )
            if warning := res.holdout_warning(measure):
                st.warning(warning.capitalize())
            if res.latency_within_noise():
                st.caption(
                    t(
                        "Latency: every point is within the noise floor ({ms} ms); read no "
                        "latency difference into it.",
                        ms=f"{res.latency_noise_ms():.1f}",
                    )
                )
            rows = pd.DataFrame(res.rows())
            marks = [
                (t("current") if i == res.current_index else "")
                + (" · " + t("best") if i == res.best_index else "")
                for i in range(len(res.points))
            ]
            rows.insert(0, "", [m.strip(" ·") for m in marks])
            st.dataframe(
                rows.style.highlight_max(
                    subset=[f"{res.split}_{measure}"], color="rgba(46,160,67,0.3)"
                ).format(precision=3),
                hide_index=True,
                width="stretch",
            )
            figs = sweep_mod.sweep_figures(res, measure)
            cols = st.columns(len(figs))
            for col, fig in zip(cols, figs, strict=True):
                fig.update_layout(height=380, margin={"l": 10, "r": 10, "t": 40, "b": 10})
                col.plotly_chart(fig, width="stretch")
            labels = [", ".join(f"{k}={v}" for k, v in p.values.items()) for p in res.points]
            a, b = st.columns([3, 1])
            point = a.selectbox(
                t("Run a point as an experiment (baseline vs that value, through the rule)"),
                range(len(labels)),
                index=res.best_index,
                format_func=lambda i: labels[i],
                key=state.SWEEP_EXPERIMENT_POINT,
            )
            if b.button(t("Run as experiment"), key=state.SWEEP_EXPERIMENT):
                from workbench.tune.experiments import run_experiment

                with st.status(
                    t("Evaluating baseline and candidate on tune and holdout…")
                ) as status:
                    experiment = run_experiment(
                        ws,
                        lambda c_: resources.evaluator(ws, c_),
                        res.points[point].values,
                        title=f"sweep point {labels[point]}",
                        tier="sweep",
                    )
                    status.update(label=t("Experiment done"), state="complete")
                resources.clear_data()
                state.set_experiment_result(experiment)
                tuning_widgets.decision(experiment)
