"""Tune: the tuning loop in one place. A reference and 1-3 candidates run together; headline
deltas with paired statistics, the per-query matrix, one query side by side in every config,
and "Run as experiment" with the verdict in place. ``?ref=&cand=&q=`` reopens a comparison."""

from __future__ import annotations

import streamlit as st

from workbench.tune.compare import compare_configs, parse_config_spec
from workbench.tune.experiment_store import ExperimentStore
from workbench.tune.experiments import run_experiment
from workbench.tune.tried import earlier_try
from workbench.ui import components as ui
from workbench.ui import resources, state, tune_inputs, tune_results
from workbench.ui.i18n import t

st.title(t("Tune"))

with ui.guarded(t("Tune")):
    ws = resources.workspace()
    gs = ui.golden_set_or_stop(ws, t("The tuning loop needs a golden set."))
    st.caption(
        t(
            "Change one thing, see which queries moved and why, keep it or drop it. The "
            "reference is the accepted baseline unless you pick another; each candidate is a "
            "change of it. Runs are saved under their config's name."
        )
    )
    tune_inputs.apply_link()
    specs = tune_inputs.pick_specs(ws)
    auto = st.session_state.pop(state.TUNE_RUN + "_auto", False)
    go = st.button(
        t("Run the comparison"), key=state.TUNE_RUN, type="primary", disabled=len(specs) < 2
    )
    if len(specs) < 2:
        st.caption(t("Type a change such as `fusion.bm25_weight=0.5` to compare."))
    if (go or auto) and len(specs) >= 2:
        configs = [parse_config_spec(s, ws) for s in specs]  # a bad spec fails before any run
        with ui.progress_bar(t("Evaluating")) as progress:
            res = compare_configs(
                ws,
                configs,
                gs,
                split=str(st.session_state.get(state.TUNE_SPLIT, "all")),
                evaluator_for=lambda c: resources.evaluator(ws, c),
                progress=progress,
            )
        resources.clear_data()
        state.set_tune_result((res, [cfg for _, cfg in configs]))
        st.query_params.from_dict(tune_inputs.link_params(list(res.labels)))
    shown = state.tune_result()
    if shown is not None:
        res, cfgs = shown
        st.subheader(t("Headline"))
        tune_results.headline(res)
        st.subheader(t("Per query"))
        qid = tune_results.matrix(res)
        if qid is not None:
            st.query_params.from_dict(tune_inputs.link_params(list(res.labels), qid))
            tune_results.query_view(
                res,
                qid,
                resources.kb(ws),
                cfgs,
                resources.engine(ws, cfgs[0]).query_script_share,
            )
        st.subheader(t("Keep or drop"))
        store = ExperimentStore(ws.experiments)
        baseline = store.baseline_config()
        done = state.tune_experiments()
        for i, col in enumerate(st.columns(len(res.labels) - 1), 1):
            spec = res.labels[i]
            changes = {k: new for k, (_, new) in baseline.diff(cfgs[i]).items()}
            with col:
                earlier = (
                    earlier_try(store, changes, gs.content_hash, baseline) if changes else None
                )
                if tune_results.experiment_panel(i, spec, earlier, done.get(spec)):
                    with st.status(t("Evaluating baseline and candidate on tune and holdout…")):
                        result = run_experiment(
                            ws,
                            lambda c: resources.evaluator(ws, c),
                            changes,
                            title=spec,
                            tier="tune page",
                            notify=ui.warn,
                        )
                    resources.clear_data()
                    state.add_tune_experiment(spec, result)
                    st.rerun()
