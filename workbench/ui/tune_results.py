"""The Tune page's results: headline deltas, the per-query matrix, one query's ranked lists
side by side, and "Run as experiment" with its verdict in place."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from workbench.eval import analysis as A
from workbench.eval.attribution import CAUSES
from workbench.tune import compare
from workbench.tune.tune_loop import LoopResult
from workbench.ui import components as ui
from workbench.ui import snippets, state, tuning_widgets
from workbench.ui.i18n import labelled, t

MEASURES = ("mrr", "recall@5", "hit@5", "ndcg@10", "recall@10")
ALL = "(all)"


def headline(res: LoopResult) -> None:
    """Per candidate and tested measure: reference, candidate, delta, paired CI, p, W/L/T."""
    c = res.comparison
    rows = []
    for i in range(1, len(c.labels)):
        for m, s in c.stats[i - 1].items():
            rows.append(
                {
                    t("candidate"): c.labels[i],
                    t("measure"): m,
                    c.labels[0]: c.metrics[0].get(m, 0.0),
                    t("candidate value"): c.metrics[i].get(m, 0.0),
                    "Δ": s.delta,
                    "95% CI": f"{s.ci_low:+.3f} … {s.ci_high:+.3f}",
                    "p": s.p_value,
                    t("better / worse / same"): f"{s.wins} / {s.losses} / {s.ties}",
                }
            )
        s = c.stats[i - 1]["mrr"]
        st.markdown(
            t(
                "**{label}**: MRR {delta} (95% CI {low} to {high}, p {p}), "
                "{wins} queries better, {losses} worse",
                label=c.labels[i],
                delta=f"{s.delta:+.3f}",
                low=f"{s.ci_low:+.3f}",
                high=f"{s.ci_high:+.3f}",
                p=f"{s.p_value:.2f}",
                wins=s.wins,
                losses=s.losses,
            )
        )
    st.dataframe(
        pd.DataFrame(rows).style.format(precision=3).map(tuning_widgets.delta_colour, subset=["Δ"]),
        hide_index=True,
        width="stretch",
    )


def matrix(res: LoopResult) -> str | None:
    """The query x config matrix, filtered; the id of the query to open (click or link)."""
    records, labels = res.records, list(res.specs)
    c = st.columns([1, 1, 1, 1])
    measure = c[0].selectbox(t("Measure"), MEASURES, key=state.TUNE_MEASURE)
    everything = A.run_matrix(records, res.modes, measure)
    counts = A.outcome_counts(everything)
    show = {ALL: t("all ({n})", n=len(everything))}
    show |= {o: f"{t(o)} ({counts[o]})" for o in A.OUTCOMES}
    outcome = c[1].selectbox(
        t("Show"), [ALL, *A.OUTCOMES], key=state.TUNE_OUTCOME, format_func=labelled(show)
    )
    slice_names = {ALL: t("(all)"), **{s: t(s) for s in A.SLICES}}
    slice_by = c[2].selectbox(
        t("Slice"), [ALL, *A.SLICES], key=state.TUNE_SLICE, format_func=labelled(slice_names)
    )
    meta = {q.id: q for q in records[0].for_mode(res.modes[0])}
    values = sorted({A.slice_of(q, slice_by) for q in meta.values()}) if slice_by != ALL else []
    value_labels = {v: t(v) for v in values}
    slice_value = c[3].selectbox(
        t("Value"),
        values or [ALL],
        key=state.TUNE_SLICE_VALUE,
        disabled=slice_by == ALL,
        format_func=labelled({ALL: t("(all)"), **value_labels}),
    )
    rows = [
        r
        for r in everything
        if (outcome == ALL or r.outcome == outcome)
        and (slice_by == ALL or A.slice_of(meta[r.id], slice_by) == slice_value)
    ]
    st.caption(
        t(
            "{n} of {total} queries · sorted by the change in {measure} · "
            "click a row to open the query",
            n=len(rows),
            total=len(everything),
            measure=measure,
        )
    )
    if not rows:
        st.info(t("No query with that outcome."))
        return None
    q_col, o_col = t("query"), t("outcome")
    table = pd.DataFrame(
        [
            {
                "id": r.id,
                q_col: r.query,
                **{lab: v for lab, v in zip(labels, r.values, strict=True)},
                **{f"Δ {lab}": d for lab, d in zip(labels[1:], r.deltas, strict=True)},
                o_col: t(r.outcome),
            }
            for r in rows
        ]
    )
    deltas = [col for col in table.columns if col.startswith("Δ ")]
    ids = [r.id for r in rows]
    clicked = ui.clickable_table(
        table.style.format(precision=3).map(_cell_colour, subset=deltas),
        ids,
        state.TUNE_MATRIX,
        width="stretch",
        height=ui.fitted_height(len(rows), 420),
        column_config={
            "id": st.column_config.TextColumn(width="small"),
            q_col: st.column_config.TextColumn(width="medium"),
            **{lab: st.column_config.NumberColumn(format="%.3f") for lab in labels},
            **{col: st.column_config.NumberColumn(format="%+.3f") for col in deltas},
        },
    )
    if clicked is not None:
        st.session_state[state.TUNE_QUERY] = clicked
    qid = st.session_state.get(state.TUNE_QUERY)
    return qid if qid in meta else None


def _cell_colour(v: Any) -> str:
    """Background by the size of the change: greener the more it gained, redder lost."""
    if not isinstance(v, int | float) or abs(v) <= 1e-9:
        return ""
    alpha = min(0.15 + abs(v) * 0.6, 0.6)
    return f"background-color: rgba({'46,160,67' if v > 0 else '207,34,46'},{alpha:.2f})"


def query_view(res: LoopResult, qid: str, kb: Any) -> None:
    """One query in every config: ranked lists side by side, gold marked, rank moves against
    the reference, snippets with the query's terms, the stage that lost each gold chapter."""
    stories = [A.story(r, m, qid) for r, m in zip(res.records, res.modes, strict=True)]
    first = stories[0]
    st.markdown(f"#### {first.id} · {snippets.escape_markdown(first.query)}")
    ref_rank = {r.node_id: r.rank for r in first.ranked}
    cols = st.columns(len(stories))
    for i, (col, s) in enumerate(zip(cols, stories, strict=True)):
        with col, st.container(border=True):
            mrr = s.metrics.get("mrr", 0.0)
            st.markdown(
                f"**{res.specs[i]}**  \nMRR {mrr:.3f} · recall@5 {s.metrics.get('recall@5', 0):.2f}"
            )
            for g in s.gold:
                where = t("rank {n}", n=g.final) if g.final else t("not in the list")
                verdict = (
                    t(":red[lost: {cause}]", cause=t(CAUSES.get(g.cause, g.cause)))
                    if g.cause
                    else t(":green[found in the top 5]")
                )
                st.markdown(
                    t("**Gold:** {title}", title=_title(kb, g.node_id)) + f" · {where} · {verdict}"
                )
            lines = []
            for r in s.ranked[:10]:
                move = _move(ref_rank.get(r.node_id), r.rank) if i else ""
                title = snippets.escape_markdown(_title(kb, r.node_id, short=True))
                title = f":green-badge[{t('gold')}] **{title}**" if r.relevant else title
                lines.append(f"{r.rank}. {title} {move}")
                node = kb.nodes.get(r.node_id) if kb is not None else None
                if node is not None:
                    text = snippets.snippet_markdown(snippets.snippet(node.content, s.query, 110))
                    lines.append(f"   :small[:gray[{text}]]")
            st.markdown("\n".join(lines) or t("(no results)"))


def _move(before: int | None, after: int) -> str:
    if before is None:
        return ":blue[" + t("new") + "]"
    if before == after:
        return ""
    return f":green[↑{before - after}]" if after < before else f":red[↓{after - before}]"


def _title(kb: Any, node_id: str, *, short: bool = False) -> str:
    """A chapter's breadcrumb (``short``: its last two parts, for narrow columns)."""
    node = kb.nodes.get(node_id) if kb is not None else None
    if node is None:
        return node_id
    return ui.breadcrumb(node.breadcrumb[-2:] if short else node.breadcrumb)


def experiment_panel(i: int, spec: str, earlier: dict[str, Any] | None, result: Any) -> bool:
    """ "Run as experiment" for candidate ``i``; True when it was clicked. Shows the earlier
    try of the same change, and the verdict in place once run."""
    st.markdown(f"**{spec}**")
    if earlier is not None and result is None:
        st.warning(
            t(
                "Already tried against this baseline and golden set: experiment {n} ({date}), "
                "{decision}. Running it again logs a new entry.",
                n=earlier.get("number"),
                date=earlier.get("date", ""),
                decision=t(str(earlier.get("decision", ""))),
            )
        )
        log_link(int(earlier.get("number", 0)))
    clicked = st.button(
        t("Run as experiment"),
        key=state.item_key(state.TUNE_EXPERIMENT, i),
        disabled=result is not None,
        help=t("Baseline vs this change on tune and holdout, decided by the acceptance rule."),
    )
    if result is not None:
        tuning_widgets.verdict_line(result)
        if not result.no_effect:
            log_link(result.number)
    return bool(clicked)


def log_link(number: int) -> None:
    st.page_link(
        "views/experiments.py",
        label=t("Experiment {n} in the log", n=number),
        icon=":material/science:",
        query_params={"experiment": str(number)},
    )


def changed_keys(c: compare.Comparison, i: int) -> str:
    return ", ".join(f"`{k}`: {a!r} → {b!r}" for k, (a, b) in c.diffs[i - 1].items())
