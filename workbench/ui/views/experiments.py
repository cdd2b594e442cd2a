"""Experiments: one change vs the baseline, the decision and its reasons, log, restore, optimize
(the Optuna search with its figures, and the catalog walk)."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from engine.config import all_keys
from workbench.tune import optimizer
from workbench.tune import rule as rules
from workbench.tune.catalog import CATALOG, TIER_NAMES, Strategy, change_text, title_message
from workbench.tune.catalog_walk import optimize
from workbench.tune.experiment_entry import log_text
from workbench.tune.experiment_history import log_entry, log_rows, trajectory
from workbench.tune.experiment_store import ExperimentStore
from workbench.tune.experiments import run_experiment
from workbench.tune.study import load_studies
from workbench.tune.study_figures import study_figures
from workbench.tune.verdict import from_decision
from workbench.ui import charts, resources, state, tuning_widgets
from workbench.ui import components as ui
from workbench.ui.i18n import labelled, t

# The log's marks as Streamlit icons: emoji render as boxes where no emoji font is installed
# (the headless Chromium of the tests, many Linux desktops); the file keeps its emoji.
ICONS = {"✅": ":green[:material/check_circle:]", "❌": ":red[:material/cancel:]", "↩️": "↩"}


def with_icons(markdown: str) -> str:
    for emoji, icon in ICONS.items():
        markdown = markdown.replace(emoji, icon)
    return markdown


def preset_labels() -> dict[str, str]:
    """The acceptance presets' names in the UI's language (the values stay the ids)."""
    return {"statistical": t("statistical"), "strict": t("strict")}


st.title(t("Experiments"))
if msg := state.flash():
    st.success(msg)

with ui.guarded(t("Experiments")):
    ws = resources.workspace()
    store = ExperimentStore(ws.experiments)
    gs = ui.golden_set_or_stop(
        ws, t("Experiments are decided on the golden set: create one first.")
    )
    base = store.baseline_config()
    st.caption(
        t(
            "Baseline `{hash}` ({origin}) — experiments always start from it, whatever the "
            "sidebar shows.",
            hash=base.hash,
            origin=t("accepted") if store.baseline.is_file() else t("built-in defaults"),
        )
    )

    def evaluator_for(c):
        return resources.evaluator(ws, c)

    own_rule = ws.experiments / rules.RULE_FILE
    # Option values stay fixed; labels are translated here, not inside format_func (which
    # also runs outside the script, where t() cannot see the session's language).
    own_pick = f"{own_rule.name} (this KB)"
    own_label = t("{name} (this KB)", name=own_rule.name)
    choices = ([own_pick] if own_rule.is_file() else []) + list(rules.PRESETS)
    rule_labels = {own_pick: own_label, **preset_labels()}
    rule_pick = st.selectbox(
        t("Acceptance rule"),
        choices,
        key=state.EXPERIMENT_RULE,
        format_func=labelled(rule_labels),
        help=t(
            "statistical scales with the set (tests, not counts); strict keeps absolute "
            "thresholds for sets under ~50 queries. Edit experiments/<kb>/rule.yaml to change it."
        ),
    )
    rule = rules.PRESETS.get(rule_pick) or rules.resolve(ws.experiments)
    with st.expander(t("Effective rule: {name}", name=rule_labels.get(rule.name, rule.name))):
        st.code(rule.to_yaml(), language="yaml")

    st.subheader(t("One change"))
    ui.tune_link()
    manual = "(choose a knob yourself)"  # the option value; its label is translated
    manual_label = t("(choose a knob yourself)")
    suggestions: dict[str, tuple[Strategy, dict[str, Any]] | None] = {manual: None}
    suggestion_labels = {manual: manual_label}
    for s in CATALOG:
        for change in s.candidates:
            text = change_text(change)
            option = f"{TIER_NAMES[s.tier]} · {s.name}: {text} (risk {s.risk})"
            suggestions[option] = (s, change)
            suggestion_labels[option] = t(
                "{tier} · {strategy}: {change} (risk {risk})",
                tier=t(TIER_NAMES[s.tier]),
                strategy=t(s.name),
                change=text,
                risk=t(s.risk),
            )
    pick = st.selectbox(
        t("Suggestion from the strategy catalog"),
        list(suggestions),
        key=state.EXPERIMENT_SUGGEST,
        format_func=labelled(suggestion_labels),
    )
    chosen = suggestions[pick]
    if chosen is None:
        keys = [k for k in all_keys() if not k.startswith("llm.")]
        key = st.selectbox(
            t("Knob"), keys, index=keys.index("fusion.bm25_weight"), key=state.EXPERIMENT_KNOB
        )
        value = tuning_widgets.config_value_widget(
            key, base.get(key), widget_key=state.item_key(state.EXPERIMENT_VALUE, key)
        )
        overrides = {key: value}
        tier, why = "manual", ""
    else:
        strat, overrides = chosen
        tier, why = TIER_NAMES[strat.tier], strat.why
        st.info(t(why))
    changes = {k: (base.get(k), v) for k, v in overrides.items() if base.get(k) != v}
    st.markdown(
        t("Change:")
        + " "
        + (", ".join(f"`{k}`: {a!r} → **{b!r}**" for k, (a, b) in changes.items()) or t("none yet"))
    )
    row = st.columns([2, 2, 1])
    title = row[0].text_input(t("Title (optional)"), key=state.EXPERIMENT_TITLE)
    notes = row[1].text_input(t("Notes (optional)"), key=state.EXPERIMENT_NOTES)
    if row[2].button(
        t("Run experiment"), key=state.EXPERIMENT_RUN, type="primary", disabled=not changes
    ):
        with st.status(t("Evaluating baseline and candidate on tune and holdout…")) as status:
            result = run_experiment(
                ws,
                evaluator_for,
                overrides,
                title=title or None,
                tier=tier,
                notes=notes,
                notify=ui.warn,
                rule=rule,
            )
            status.update(label=t("Experiment done"), state="complete")
        resources.clear_data()
        state.set_experiment_result(result)
    shown = state.experiment_result()
    if shown is not None:
        tuning_widgets.decision(shown)

    st.subheader(t("Trajectory"))
    charts.trajectory_chart(trajectory(store))
    st.subheader(t("Restore an accepted version"))
    versions = store.accepted_versions()
    if not versions:
        st.caption(t("No accepted versions yet: version 0 is written with the first experiment."))
    else:
        v = st.selectbox(
            t("Version"),
            [x["version"] for x in reversed(versions)],
            key=state.EXPERIMENT_RESTORE_VERSION,
        )
        if st.button(t("Restore version {v} as the baseline", v=v), key=state.EXPERIMENT_RESTORE):
            said: list[str] = []  # a recovery notice must survive the rerun below
            cfg = store.restore(int(v), notify=said.append)
            resources.clear_data()
            state.flash(
                " ".join(
                    [
                        *(f"⚠️ {m}." for m in said),
                        t(
                            "Baseline restored to version {v} (config {hash})",
                            v=v,
                            hash=cfg.hash,
                        ),
                    ]
                )
            )
            st.rerun()

    st.subheader(t("Optimize (search)"))
    st.caption(
        t(
            "A seeded Optuna TPE search over fusion, BM25, expansion, pool size and mode; each "
            "trial is scored by k-fold cross-validation on the tune split, and the pick (the "
            "fewest changes within one standard error of the best) is submitted as one experiment."
        )
    )
    a, b, c, d, e = st.columns([1, 1, 1, 1, 1])
    n_trials = a.number_input(
        t("Trials"), 1, 2000, optimizer.DEFAULT_TRIALS, key=state.OPTIMIZE_TRIALS
    )
    timeout = b.number_input(t("Time limit (s, 0 = none)"), 0, 3600, 0, key=state.OPTIMIZE_TIMEOUT)
    seed = c.number_input(t("Seed"), 0, 2**31 - 1, 0, key=state.OPTIMIZE_SEED)
    folds = d.number_input(t("Folds"), 2, 20, optimizer.K_FOLDS, key=state.OPTIMIZE_FOLDS)
    guard = optimizer.size_guard_for(ws)
    yes = True
    if not guard.ok:  # said before the search runs, as `optimize` does
        st.warning(
            t(
                "The golden set is too small for this search: {q} tune queries for {p} "
                "parameters (about {carried} can be searched), minimum detectable MRR effect "
                "{mde} vs typical effect seen {seen}. A gain found this way is likely fitted "
                "to these queries; grow the set first.",
                q=guard.queries,
                p=guard.params,
                carried=guard.carried_params,
                mde=t("n/a") if guard.mde is None else f"{guard.mde:.3f}",
                seen=t("n/a") if guard.effects_seen is None else f"{guard.effects_seen:.3f}",
            )
        )
        yes = st.checkbox(t("Search anyway"), key=state.OPTIMIZE_YES)
    if e.button(t("Search"), key=state.OPTIMIZE_SEARCH, type="primary", disabled=not yes):
        with ui.progress_bar(t("Searching")) as progress:
            outcome = optimizer.optimize(
                ws,
                evaluator_for,
                trials=int(n_trials),
                timeout_s=float(timeout) or None,
                seed=int(seed),
                k_folds=int(folds),
                progress=progress,
                yes=yes,
            )
        resources.clear_data()
        if outcome.experiment is not None:
            state.set_experiment_result(outcome.experiment)
        for note in outcome.study.note_texts(t):
            st.info(note)
    studies = load_studies(ws.experiments)
    if studies:
        study = studies[-1]
        cv = study.summary()["cv"]
        st.success(
            t(
                "Study {id}: {n} trials, {k}-fold CV {measure} baseline {base} → picked trial "
                "{pick} {pick_cv} (best trial {best} {best_cv})",
                id=study.study_id,
                n=len(study.trials),
                k=study.k_folds,
                measure=study.measure,
                base=f"{cv['baseline']:.4f}",
                pick=study.pick,
                pick_cv=f"{cv['pick']:.4f}",
                best=study.best,
                best_cv=f"{cv['best']:.4f}",
            )
            + (
                t("; experiment {n}", n=study.experiment)
                if study.experiment
                else t("; nothing submitted")
            )
        )
        o = study.optimism()
        if o["optimism"] is not None:
            st.caption(
                t(
                    "Tune gain {tune}, confirmed on folds the search never saw {confirmed}: "
                    "optimism {optimism}. The decision uses the confirmed gain.",
                    tune=f"{o['tune_gain']:+.4f}",
                    confirmed=f"{o['confirmed_gain']:+.4f}",
                    optimism=f"{o['optimism']:+.4f}",
                )
            )
        figs = study_figures(study)
        cols = st.columns(len(figs) or 1)
        for col, fig in zip(cols, figs.values(), strict=False):
            col.plotly_chart(fig, width="stretch")
        with st.expander(t("Trials")):
            st.dataframe(
                pd.DataFrame(
                    [
                        {"#": tr.number, "cv": tr.value, t("changes"): tr.changes, **tr.params}
                        for tr in study.trials
                    ]
                ),
                hide_index=True,
                width="stretch",
            )

    st.subheader(t("Walk the catalog"))
    st.caption(t("The strategy catalog's fixed single changes, one experiment each."))
    a, b, c = st.columns([1, 2, 1])
    budget = a.number_input(t("Budget (experiments)"), 1, 50, 5, key=state.OPTIMIZE_BUDGET)
    tier_labels = {k: t(name) for k, name in TIER_NAMES.items()}  # catalog names have entries
    tiers = b.multiselect(
        t("Tiers"),
        list(TIER_NAMES),
        default=[1, 2],
        format_func=labelled(tier_labels),
        key=state.OPTIMIZE_TIERS,
    )
    if c.button(t("Start"), key=state.OPTIMIZE_RUN, disabled=not tiers):
        # One writer per KB for the whole run.
        with (
            ui.progress_bar(t("Optimizing")) as progress,
            store.writing("optimize (UI)", ui.warn),
        ):
            walked = optimize(
                ws, evaluator_for, budget=int(budget), tiers=set(tiers), progress=progress
            )
        resources.clear_data()
        state.set_optimize_results(walked)
    results = state.optimize_results()
    if results is not None:
        accepted = sum(r.decision.accepted for r in results)
        st.success(t("{n} experiments, {accepted} accepted", n=len(results), accepted=accepted))
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        "#": r.number,
                        t("change"): title_message(r.title).render(t),
                        t("decision"): t("accepted") if r.decision.accepted else t("rolled back"),
                        "recall@5": f"{r.base_tune.get('recall@5', 0):.3f} → {r.cand_tune.get('recall@5', 0):.3f}",
                        t("why not"): "; ".join(
                            m.render(t) for m in from_decision(r.decision).reasons
                        ),
                    }
                    for r in results
                ]
            ),
            hide_index=True,
            width="stretch",
        )

    st.subheader(t("Optimization log"))
    rows = log_rows(store, t)
    if rows:
        numbers = [str(r["number"]) for r in rows]
        headers = {
            "number": "#",
            "date": t("date"),
            "title": t("change"),
            "decision": t("decision"),
            "measure": t("measure"),
            "tune Δ": t("tune Δ"),
            "holdout Δ": t("holdout Δ"),
            "tier": t("tier"),
            "verdict": t("verdict"),
        }
        clicked = ui.clickable_table(  # sortable by any column; newest first
            pd.DataFrame(rows).rename(columns=headers),
            numbers,
            state.EXPERIMENT_LOG_TABLE,
            width="stretch",
            height=ui.fitted_height(len(rows), 360),
            column_config={
                "#": st.column_config.NumberColumn("#", format="%d"),
                headers["tune Δ"]: st.column_config.NumberColumn(format="%+.3f"),
                headers["holdout Δ"]: st.column_config.NumberColumn(format="%+.3f"),
            },
        )
        if clicked is not None:
            st.query_params["experiment"] = clicked
        linked = st.query_params.get("experiment")  # ?experiment=<n>: a pasted link
        entry = log_entry(store, int(linked), t) if linked and linked.isdigit() else None
        if entry is not None:
            with st.container(border=True):
                st.markdown(with_icons(entry.replace("### ", "#### ", 1)))
        elif linked:
            st.warning(t("No experiment {n} in this log.", n=linked))
        else:
            st.caption(t("Click a row to open its entry; the URL then links to it."))
        with st.expander(t("The log as Markdown ({path})", path=store.log_md.name)):
            # made from experiments.jsonl, so it reads in the UI's language (the file: English)
            st.markdown(with_icons(log_text(store.load_records(), t)))
    else:
        st.caption(t("No log yet at `{path}`.", path=store.log_md))
