"""Compare's "Runs per query" tab: 2-4 saved runs over every query, filtered by outcome,
with both ranked lists side by side and the gold chapters marked."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import streamlit as st

from workbench.answer.safe_markdown import escape_text
from workbench.eval import analysis as A
from workbench.eval.measures import shown
from workbench.eval.run_record import RunRecord
from workbench.ui import components as ui
from workbench.ui import resources, state, tuning_widgets
from workbench.ui.i18n import labelled, t
from workbench.workspace import Workspace

OUTCOME_COLOUR = {"won": "#1a7f37", "lost": "#cf222e", "changed": "#9a6700", "tied": ""}


def runs_diff(ws: Workspace) -> None:
    records = _picked_runs(ws)
    if records is None:
        return
    modes = [m for m in records[0].modes if all(m in r.modes for r in records[1:])]
    if not modes:
        st.warning(t("These runs share no search mode; pick runs evaluated in the same mode."))
        return
    c = st.columns(3)
    mode = c[0].selectbox(t("Mode"), modes, key=state.RUNS_DIFF_MODE)
    measure = c[1].selectbox(
        t("Measure"), shown("diff"), index=shown("diff").index("mrr"), key=state.RUNS_DIFF_MEASURE
    )
    everything = A.run_matrix(records, mode, measure)
    counts = A.outcome_counts(everything)
    # won / lost / changed / tied: values stay English, labels translated here (format_func
    # also runs outside the script, where t() cannot see the session's language)
    named = {o: t(o) for o in A.OUTCOMES}
    show_labels = {"all": t("all ({n})", n=len(everything))}
    show_labels |= {o: f"{named[o]} ({counts[o]})" for o in A.OUTCOMES}
    outcome = c[2].selectbox(
        t("Show"),
        ["all", *A.OUTCOMES],
        key=state.RUNS_DIFF_OUTCOME,
        format_func=labelled(show_labels),
    )
    if any(r.dataset.hash != records[0].dataset.hash for r in records):
        st.warning(t("These runs used different versions of the golden set: compare with care."))
    rows = everything if outcome == "all" else [r for r in everything if r.outcome == outcome]
    st.caption(
        " · ".join(f"**{i + 1}.** {A.run_label(r)}" for i, r in enumerate(records))
        + t(" — outcome of run {n} vs run 1 on {measure}: ", n=len(records), measure=measure)
        + ", ".join(f"{n} {t(k)}" for k, n in counts.items())
    )
    if not rows:
        st.info(t("No query with that outcome."))
        return
    clicked = _outcome_table(rows, len(records), measure)
    by_id = {r.id: r for r in rows}
    qid = ui.query_picker(
        [r.id for r in rows],
        state.RUNS_DIFF_QUERY,
        lambda i: f"{i} · {by_id[i].query} ({named.get(by_id[i].outcome, by_id[i].outcome)})",
        picked=clicked,
    )
    _ranked_side_by_side(ws, records, mode, measure, qid, by_id[qid].values)


def _picked_runs(ws: Workspace) -> list[RunRecord] | None:
    """The 2-4 run records picked (the first is the reference), None when fewer."""
    paths = resources.run_paths(ws)
    if len(paths) < 2:
        ui.empty_state(
            t("Per-query comparison needs at least two saved runs: evaluate two configs first."),
            "views/evaluate.py",
            t("Evaluate"),
        )
        return None
    names = [p.stem for p in paths]
    picked = st.multiselect(
        t("Runs (the first is the reference; 2-4)"),
        names,
        default=names[:2][::-1],
        max_selections=4,
        key=state.RUNS_DIFF_PICK,
        format_func=labelled(resources.run_names(paths)),
    )
    if len(picked) < 2:
        st.info(t("Pick at least two runs."))
        return None
    return [resources.run_record(paths[names.index(n)]) for n in picked]


def _outcome_table(rows: list[A.MatrixRow], n_runs: int, measure: str) -> str | None:
    """Every query's value per run and its deltas, coloured by outcome; the clicked query."""
    labels = [f"{i + 1}" for i in range(n_runs)]
    table = pd.DataFrame([r.to_dict(labels, measure) for r in rows])
    table["outcome"] = [t(o) for o in table["outcome"]]
    colour = {t(o): c for o, c in OUTCOME_COLOUR.items()}
    table = table.rename(columns={"query": t("query"), "outcome": t("outcome")})
    deltas = [col for col in table.columns if col.startswith("Δ")]
    return ui.clickable_table(
        table.style.map(tuning_widgets.delta_colour, subset=deltas)
        .map(
            lambda o: f"color: {colour[o]}" if colour.get(o) else "",
            subset=[t("outcome")],
        )
        .format(precision=3),
        [r.id for r in rows],
        state.RUNS_DIFF_TABLE,
        width="stretch",
        height=ui.fitted_height(len(rows), 360),
    )


def _ranked_side_by_side(
    ws: Workspace,
    records: list[RunRecord],
    mode: str,
    measure: str,
    qid: str,
    values: Sequence[float],
) -> None:
    """The query's gold chapters, then each run's ranked list with the gold ones marked."""
    gold, lists = A.side_by_side(records, mode, qid)
    kb = resources.kb(ws)
    st.markdown(
        t("**Gold:**")
        + " "
        + escape_text(
            "; ".join(ui.breadcrumb(kb.nodes[g].breadcrumb) if g in kb.nodes else g for g in gold)
        )
    )
    cols = st.columns(len(lists))
    gold_col = t("gold")
    for i, (col, ranked) in enumerate(zip(cols, lists, strict=True)):
        with col:
            st.markdown(f"**{i + 1}.** {A.run_label(records[i])} · {measure} {values[i]:.3f}")
            st.dataframe(
                pd.DataFrame(
                    [
                        {
                            t("rank"): n,
                            t("chapter"): ui.breadcrumb(kb.nodes[nid].breadcrumb)
                            if nid in kb.nodes
                            else nid,
                            t("gold"): rel,
                        }
                        for n, (nid, rel) in enumerate(ranked, 1)
                    ],
                    columns=[t("rank"), t("chapter"), t("gold")],
                ).style.apply(
                    lambda row: (
                        ["background-color: rgba(46,160,67,0.25)" if row[gold_col] else ""]
                        * len(row)
                    ),
                    axis=1,
                ),
                hide_index=True,
                width="stretch",
                column_config={gold_col: None},
            )
