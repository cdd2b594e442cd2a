"""Experiments: one change vs the baseline, the decision and its reasons, log, restore, optimize
(the Optuna search with its figures, and the catalog walk)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from engine.config import all_keys
from workbench import optimizer
from workbench import rule as rules
from workbench.catalog import CATALOG, TIER_NAMES
from workbench.experiments import ExperimentStore, optimize, run_experiment, trajectory
from workbench.ui import components as ui
from workbench.ui import resources, state
from workbench.ui.i18n import t

st.title(t("Experiments"))
if msg := state.flash():
    st.success(msg)

with ui.guarded("Experiments"):
    ws = resources.workspace()
    store = ExperimentStore(ws.experiments)
    gs = resources.golden_set(ws)
    if gs is None:
        ui.empty_state(
            "Experiments are decided on the golden set: create one first.",
            "views/golden_set.py",
            "Create the golden set",
        )
        st.stop()
    base = store.baseline_config()
    st.caption(
        f"Baseline `{base.hash}` ({'accepted' if store.baseline.is_file() else 'built-in defaults'})"
        " — experiments always start from it, whatever the sidebar shows."
    )

    def evaluator_for(c):
        return resources.evaluator(ws, c)

    own_rule = ws.experiments / rules.RULE_FILE
    choices = ([f"{own_rule.name} (this KB)"] if own_rule.is_file() else []) + list(rules.PRESETS)
    rule_pick = st.selectbox(
        "Acceptance rule",
        choices,
        key="exp_rule",
        help="statistical scales with the set (tests, not counts); strict keeps absolute "
        "thresholds for sets under ~50 queries. Edit experiments/<kb>/rule.yaml to change it.",
    )
    rule = rules.PRESETS.get(rule_pick) or rules.resolve(ws.experiments)
    with st.expander(f"Effective rule: {rule.name}"):
        st.code(rule.to_yaml(), language="yaml")

    st.subheader("One change")
    suggestions = {"(choose a knob yourself)": None}
    for s in CATALOG:
        for change in s.candidates:
            text = ", ".join(f"{k}={v}" for k, v in change.items())
            suggestions[f"{TIER_NAMES[s.tier]} · {s.name}: {text} (risk {s.risk})"] = (s, change)
    pick = st.selectbox(
        "Suggestion from the strategy catalog", list(suggestions), key="exp_suggest"
    )
    chosen = suggestions[pick]
    if chosen is None:
        keys = [k for k in all_keys() if not k.startswith("llm.")]
        key = st.selectbox("Knob", keys, index=keys.index("fusion.k"), key="exp_key")
        value = ui.config_value_widget(key, base.get(key), widget_key=f"exp_value_{key}")
        overrides = {key: value}
        tier, why = "manual", ""
    else:
        strat, overrides = chosen
        tier, why = TIER_NAMES[strat.tier], strat.why
        st.info(why)
    changes = {k: (base.get(k), v) for k, v in overrides.items() if base.get(k) != v}
    st.markdown(
        "Change: "
        + (", ".join(f"`{k}`: {a!r} → **{b!r}**" for k, (a, b) in changes.items()) or "none yet")
    )
    c = st.columns([2, 2, 1])
    title = c[0].text_input("Title (optional)", key="exp_title")
    notes = c[1].text_input("Notes (optional)", key="exp_notes")
    if c[2].button("Run experiment", key="exp_run", type="primary", disabled=not changes):
        with st.status("Evaluating baseline and candidate on tune and holdout…") as status:
            result = run_experiment(
                ws,
                evaluator_for,
                overrides,
                title=title or None,
                tier=tier,
                notes=notes,
                notify=st.warning,
                rule=rule,
            )
            status.update(label="Experiment done", state="complete")
        resources.clear_data()
        state.set_experiment_result(result)
    result = state.experiment_result()
    if result is not None:
        ui.decision(result)

    left, right = st.columns(2)
    with left:
        st.subheader("Trajectory")
        ui.trajectory_chart(trajectory(store))
    with right:
        st.subheader("Restore an accepted version")
        versions = store.accepted_versions()
        if not versions:
            st.caption("No accepted versions yet: version 0 is written with the first experiment.")
        else:
            v = st.selectbox(
                "Version", [x["version"] for x in reversed(versions)], key="exp_restore_v"
            )
            if st.button(f"Restore version {v} as the baseline", key="exp_restore"):
                said: list[str] = []  # a recovery notice must survive the rerun below
                cfg = store.restore(int(v), notify=said.append)
                resources.clear_data()
                state.flash(
                    " ".join(
                        [
                            *(f"⚠️ {m}." for m in said),
                            f"Baseline restored to version {v} (config {cfg.hash})",
                        ]
                    )
                )
                st.rerun()

    st.subheader("Optimize (search)")
    st.caption(
        "A seeded Optuna TPE search over fusion, BM25, expansion, pool size and mode; each "
        "trial is scored by k-fold cross-validation on the tune split, and the pick (the "
        "fewest changes within one standard error of the best) is submitted as one experiment."
    )
    a, b, c, d, e = st.columns([1, 1, 1, 1, 1])
    n_trials = a.number_input("Trials", 1, 2000, optimizer.DEFAULT_TRIALS, key="opt_trials")
    timeout = b.number_input("Time limit (s, 0 = none)", 0, 3600, 0, key="opt_timeout")
    seed = c.number_input("Seed", 0, 2**31 - 1, 0, key="opt_seed")
    folds = d.number_input("Folds", 2, 20, optimizer.K_FOLDS, key="opt_folds")
    if e.button("Search", key="opt_search", type="primary"):
        progress, bar = ui.progress_callback("Searching")
        outcome = optimizer.optimize(
            ws,
            evaluator_for,
            trials=int(n_trials),
            timeout_s=float(timeout) or None,
            seed=int(seed),
            k_folds=int(folds),
            progress=progress,
        )
        bar.empty()
        resources.clear_data()
        if outcome.experiment is not None:
            state.set_experiment_result(outcome.experiment)
        for note in outcome.study.notes:
            st.info(note)
    studies = optimizer.load_studies(ws.experiments)
    if studies:
        study = studies[-1]
        cv = study.summary()["cv"]
        st.success(
            f"Study {study.study_id}: {len(study.trials)} trials, {study.k_folds}-fold CV "
            f"{study.measure} baseline {cv['baseline']:.4f} → picked trial {study.pick} "
            f"{cv['pick']:.4f} (best trial {study.best} {cv['best']:.4f})"
            + (f"; experiment {study.experiment}" if study.experiment else "; nothing submitted")
        )
        figs = optimizer.study_figures(study)
        cols = st.columns(len(figs) or 1)
        for col, fig in zip(cols, figs.values(), strict=False):
            col.plotly_chart(fig, width="stretch")
        with st.expander("Trials"):
            st.dataframe(
                pd.DataFrame(
                    [
                        {"#": t.number, "cv": t.value, "changes": t.changes, **t.params}
                        for t in study.trials
                    ]
                ),
                hide_index=True,
                width="stretch",
            )

    st.subheader("Walk the catalog")
    st.caption("The strategy catalog's fixed single changes, one experiment each.")
    a, b, c = st.columns([1, 2, 1])
    budget = a.number_input("Budget (experiments)", 1, 50, 5, key="opt_budget")
    tiers = b.multiselect(
        "Tiers", list(TIER_NAMES), default=[1, 2], format_func=TIER_NAMES.get, key="opt_tiers"
    )
    if c.button("Start", key="opt_run", disabled=not tiers):
        progress, bar = ui.progress_callback("Optimizing")
        with store.writing("optimize (UI)", st.warning):  # one writer per KB for the whole run
            results = optimize(
                ws, evaluator_for, budget=int(budget), tiers=set(tiers), progress=progress
            )
        bar.empty()
        resources.clear_data()
        state.set_optimize_results(results)
    results = state.optimize_results()
    if results is not None:
        accepted = sum(r.decision.accepted for r in results)
        st.success(f"{len(results)} experiments, {accepted} accepted")
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        "#": r.number,
                        "change": r.title,
                        "decision": "accepted" if r.decision.accepted else "rolled back",
                        "recall@5": f"{r.base_tune.get('recall@5', 0):.3f} → {r.cand_tune.get('recall@5', 0):.3f}",
                        "why not": "; ".join(r.decision.reasons),
                    }
                    for r in results
                ]
            ),
            hide_index=True,
            width="stretch",
        )

    st.subheader("Optimization log")
    if store.log_md.is_file():
        log = store.log_md.read_text(encoding="utf-8")
        with st.container(border=True, height=420):
            st.markdown(log.replace("# Optimization log\n", "", 1))  # the section has a title
    else:
        st.caption(f"No log yet at `{store.log_md}`.")
