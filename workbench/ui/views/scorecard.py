"""Scorecard: 9 weighted dimensions with evidence and formulas, the grade, the top 3 weaknesses."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from workbench.answer.llm import llm_settings
from workbench.tune import scorecard as sc
from workbench.tune.dimension import rendered
from workbench.tune.experiments import run_experiment
from workbench.tune.verdict import OUTCOME_WORDS
from workbench.ui import components as ui
from workbench.ui import resources, state, tune_inputs, tuning_widgets
from workbench.ui.i18n import t

st.title(t("Scorecard"))

with ui.guarded(t("Scorecard")):
    ws = resources.workspace()
    label, cfg = ui.current_config(ws)
    ui.golden_set_or_stop(
        ws, t("The scorecard reads an evaluation of the golden set: create one first.")
    )

    def evaluator_for(c):
        return resources.evaluator(ws, c)

    recompute = st.button(
        t("Recompute"), key=state.SCORECARD_RECOMPUTE, help=t("after a new run or KB edit")
    )
    card = state.scorecard()
    if recompute or card is None or card.config_hash != cfg.hash:
        with ui.progress_bar(t("Scoring")) as progress:
            card = sc.compute_scorecard(
                ws,
                cfg,
                progress=progress,
                evaluator_for=evaluator_for,
                llm_configured=llm_settings(cfg.llm) is not None,
            )
        state.set_scorecard(card)

    grade_col, score_col, info = st.columns([1, 1, 3])
    grade_col.metric(t("Grade"), card.grade)
    score_col.metric(t("Score"), f"{card.total:.1f} / 100")
    info.caption(
        t(
            "config **{label}** `{hash}` · mode {mode} · {n} queries ({split}) · "
            "A ≥ 90, B ≥ 80, C+ ≥ 70, C ≥ 60, D ≥ 50, else F",
            label=label,
            hash=card.config_hash,
            mode=card.mode,
            n=card.meta.get("queries", "?"),
            split=card.meta.get("split", "all"),
        )
    )

    heads = {
        "dimension": t("dimension"),
        "weight": t("weight"),
        "score": t("score"),
        "points": t("points"),
        "evidence": t("evidence"),
    }
    dims = pd.DataFrame(
        [
            {
                heads["dimension"]: t(d.name),  # dimension names are in the core catalogue
                heads["weight"]: d.weight,
                heads["score"]: d.score,
                heads["points"]: d.weight * d.score / 100.0,
                heads["evidence"]: d.rule.render(t),
            }
            for d in card.dimensions
        ]
    )
    st.dataframe(
        dims,
        hide_index=True,
        width="stretch",
        column_config={
            # one decimal everywhere: "%.0f" rounds half up in the browser and half to even
            # in Python, so the table once said 59 where the card said 58
            heads["score"]: st.column_config.ProgressColumn(
                min_value=0, max_value=100, format="%.1f"
            ),
            heads["points"]: st.column_config.NumberColumn(format="%.1f"),
            heads["evidence"]: st.column_config.TextColumn(width="large"),
        },
    )
    with st.expander(t("Formulas and raw evidence")):
        for d in card.dimensions:
            st.markdown(t("**{name}** (weight {weight})", name=t(d.name), weight=d.weight))
            st.code(d.formula.render(t), language=None, wrap_lines=True)  # keeps its * signs
            st.json(rendered(d.evidence, t), expanded=False)

    ui.tune_link()
    st.subheader(t("Top 3 weaknesses"))
    if not card.weaknesses:
        st.success(t("Every dimension scores 100."))
    for i, d in enumerate(card.weaknesses):
        with st.container(border=True):
            st.markdown(
                t(
                    "**{n}. {name}** — {score}/100, costs {loss} points",
                    n=i + 1,
                    name=t(d.name),
                    score=f"{d.score:.1f}",
                    loss=f"{d.loss / 100:.1f}",
                )
            )
            st.caption(d.rule.render(t))
            if d.action:
                st.markdown(t("What would raise it: {action}", action=d.action.render(t)))
            exp = d.next_experiment
            if exp:
                change = ", ".join(f"`{k}={v}`" for k, v in exp["overrides"].items())
                why = rendered(exp["why"], t)
                st.markdown(t("Next experiment: {change} — {why}", change=change, why=why))
                if st.button(t("Run this experiment"), key=state.item_key(state.SCORECARD_FIX, i)):
                    with st.status(
                        t("Trying {change} against the baseline…", change=change)
                    ) as status:
                        result = run_experiment(
                            ws,
                            evaluator_for,
                            exp["overrides"],
                            tier="scorecard",
                            notes=f"suggested by the scorecard ({d.name})",
                            notify=ui.warn,
                        )
                        status.update(label=t("Experiment done"), state="complete")
                    resources.clear_data()
                    state.set_experiment_result(result)
                    tuning_widgets.decision(result)
            for step in getattr(d, "next_steps", ()):
                tune_inputs.next_step_link(step)
            for alt in d.alternatives:
                change = ", ".join(f"`{k}={v}`" for k, v in alt["overrides"].items())
                if alt.get("tried"):
                    tr = alt["tried"]
                    st.caption(
                        t(
                            "Already tried: {change} in experiment #{number} ({decision}, "
                            "MRR {delta:+.3f})",
                            change=change,
                            number=tr["number"],
                            decision=t(OUTCOME_WORDS.get(tr["decision"], str(tr["decision"]))),
                            delta=tr["delta_mrr"],
                        )
                    )
                elif alt.get("disabled"):
                    st.caption(
                        t(
                            "Not available: {change} — {why}",
                            change=change,
                            why=rendered(alt["disabled"], t),
                        )
                    )
