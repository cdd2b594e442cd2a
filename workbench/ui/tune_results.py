"""The Tune page's results: headline deltas, the per-query matrix, one query's ranked lists
side by side, and "Run as experiment" with its verdict in place."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd
import streamlit as st

from engine.config import EngineConfig
from engine.scripts import is_cross_lingual
from workbench.eval.measures import shown
from workbench.tune.compare import Comparison
from workbench.tune.query_matrix import SLICES
from workbench.tune.tried import EarlierTry
from workbench.ui import components as ui
from workbench.ui import snippets, state, tuning_widgets
from workbench.ui.i18n import labelled, t

ALL = "(all)"


def headline(c: Comparison) -> None:
    """Per candidate and tested measure: reference, candidate, delta, paired CI, p, W/L/T."""
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


def matrix(c: Comparison) -> str | None:
    """The query x config matrix, filtered; the id of the query to open (click or link)."""
    m = c.matrix()
    labels = list(c.labels)
    cols = st.columns([1, 1, 1, 1])
    measure = cols[0].selectbox(
        t("Measure"), shown("diff"), index=shown("diff").index("mrr"), key=state.TUNE_MEASURE
    )
    outcomes = ("won", "lost", "changed", "tied")
    show = {ALL: t("all ({n})", n=len(m.rows))}
    show |= {o: f"{t(o)} ({len(m.select(measure, outcome=o))})" for o in outcomes}
    outcome = cols[1].selectbox(
        t("Show"), [ALL, *outcomes], key=state.TUNE_OUTCOME, format_func=labelled(show)
    )
    slice_names = {ALL: t("(all)"), **{s: t(s) for s in SLICES}}
    slice_by = cols[2].selectbox(
        t("Slice"), [ALL, *SLICES], key=state.TUNE_SLICE, format_func=labelled(slice_names)
    )
    values = sorted({r.slices.get(slice_by, "") for r in m.rows}) if slice_by != ALL else []
    slice_value = cols[3].selectbox(
        t("Value"),
        values or [ALL],
        key=state.TUNE_SLICE_VALUE,
        disabled=slice_by == ALL,
        format_func=labelled({ALL: t("(all)"), **{v: t(v) for v in values}}),
    )
    rows = m.select(
        measure,
        outcome=None if outcome == ALL else outcome,
        slice_by=None if slice_by == ALL else slice_by,
        slice_value=None if slice_by == ALL else slice_value,
    )
    st.caption(
        t(
            "{n} of {total} queries · sorted by the change in {measure} · "
            "click a row to open the query",
            n=len(rows),
            total=len(m.rows),
            measure=measure,
        )
    )
    if not rows:
        st.info(t("No query with that outcome."))
        return None
    q_col, o_col = t("query"), t("outcome")
    last = len(labels) - 1
    table = pd.DataFrame(
        [
            {
                "id": r.qid,
                q_col: r.query,
                **{lab: r.value(i, measure) for i, lab in enumerate(labels)},
                **{f"Δ {lab}": r.delta(i, measure) for i, lab in enumerate(labels) if i},
                o_col: t(r.outcome(last, measure)),
            }
            for r in rows
        ]
    )
    deltas = [col for col in table.columns if col.startswith("Δ ")]
    clicked = ui.clickable_table(
        table.style.format(precision=3).map(_cell_colour, subset=deltas),
        [r.qid for r in rows],
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
    return qid if qid in {r.qid for r in m.rows} else None


def _cell_colour(v: Any) -> str:
    """Background by the size of the change: greener the more it gained, redder lost."""
    if not isinstance(v, int | float) or abs(v) <= 1e-9:
        return ""
    alpha = min(0.15 + abs(v) * 0.6, 0.6)
    return f"background-color: rgba({'46,160,67' if v > 0 else '207,34,46'},{alpha:.2f})"


def cross_lingual_line(
    labels: Sequence[str], cfgs: Sequence[EngineConfig], share: float
) -> str | None:
    """Why BM25 counted less for a question in each hybrid config: the question uses only
    scripts ``share`` of the index's chapters are written in (None when it is not
    cross-lingual, or no config fuses)."""
    hybrid = [(label, cfg) for label, cfg in zip(labels, cfgs, strict=True)
              if cfg.search.mode == "hybrid"]  # fmt: skip
    if not is_cross_lingual(share) or not hybrid:
        return None
    if all(cfg.fusion.cross_lingual_bm25 == 1.0 for _, cfg in hybrid):
        return t(
            "Cross-lingual question: only {share} of the chapters are written in its script, "
            "where BM25 can match its words; compare `fusion.cross_lingual_bm25=0.2` to weigh "
            "the keyword channel down for such questions.",
            share=f"{share:.0%}",
        )
    return t(
        "Cross-lingual question: only {share} of the chapters are written in its script, so "
        "fusion weighs the keyword channel by `fusion.cross_lingual_bm25`: {scales}",
        share=f"{share:.0%}",
        scales=" · ".join(
            f"`{label}` × {cfg.fusion.cross_lingual_bm25:g}" for label, cfg in hybrid
        ),
    )


def query_view(
    c: Comparison,
    qid: str,
    kb: Any,
    cfgs: Sequence[EngineConfig] = (),
    script_share: Callable[[str], float] | None = None,
) -> None:
    """One query in every config: ranked lists side by side, gold marked, rank moves against
    the reference, snippets with the query's terms, the stage that lost each gold chapter
    (and, for a cross-lingual question, what each config did to the keyword channel)."""
    sbs = c.side_by_side(qid, kb=kb)
    st.markdown(f"#### {sbs.qid} · {snippets.escape_markdown(sbs.query)}")
    if script_share is not None and len(cfgs) == len(c.labels):
        note = cross_lingual_line(c.labels, cfgs, script_share(sbs.query))
        if note:
            st.caption(note)
    cols = st.columns(len(sbs.columns))
    for i, (col, column) in enumerate(zip(cols, sbs.columns, strict=True)):
        with col, st.container(border=True):
            met = column.metrics
            st.markdown(
                f"**{snippets.escape_markdown(column.label)}**  \n"
                f"MRR {met.get('mrr', 0):.3f} · recall@5 {met.get('recall@5', 0):.2f}"
            )
            for g in column.gold:
                where = t("rank {n}", n=g.rank) if g.rank else t("not in the list")
                verdict = (
                    t(":red[lost: {cause}]", cause=g.cause.message.render(t))
                    if g.cause is not None
                    else t(":green[found in the top 5]")
                )
                title = snippets.escape_markdown(g.title or g.node_id)
                st.markdown(t("**Gold:** {title}", title=title) + f" · {where} · {verdict}")
            lines = []
            for e in column.entries:
                title = snippets.escape_markdown(_short(e.breadcrumb) or e.title or e.node_id)
                title = f":green-badge[{t('gold')}] **{title}**" if e.gold else title
                lines.append(f"{e.rank}. {title} {_move(e.move) if i else ''}")
                if e.snippet is not None:
                    lines.append(f"   :small[:gray[{snippets.snippet_markdown(e.snippet)}]]")
            st.markdown("\n".join(lines) or t("(no results)"))


def _short(breadcrumb: str) -> str:
    """The last two parts of a breadcrumb (columns are narrow)."""
    parts = [p.strip() for p in breadcrumb.replace("›", ">").split(">") if p.strip()]
    return ui.breadcrumb(parts[-2:])


def _move(move: int | None) -> str:
    if move is None:
        return ":blue[" + t("new") + "]"
    if move == 0:
        return ""
    return f":green[↑{move}]" if move > 0 else f":red[↓{-move}]"


def experiment_panel(i: int, spec: str, earlier: EarlierTry | None, result: Any) -> bool:
    """ "Run as experiment" for candidate ``i``; True when it was clicked. Shows the earlier
    try of the same change, and the verdict in place once run."""
    st.markdown(f"**{spec}**")
    if earlier is not None and result is None:
        st.warning(
            ui.sentence(earlier.message.render(t)) + " · " + t("Running it again logs a new entry.")
        )
        log_link(earlier.number)
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
