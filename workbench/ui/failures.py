"""The Evaluate page's failure analysis: failing queries worst first, filterable by cause and
slice; a row opens the query with its gold chapters beside the ranked list."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from workbench.answer.safe_markdown import escape_text
from workbench.eval import analysis as A
from workbench.eval.attribution import CAUSES
from workbench.eval.run_record import RunRecord
from workbench.ui import components as ui
from workbench.ui import state
from workbench.ui.i18n import t

ALL = "(all)"
STAGE_COLUMN = {"vector": "vector", "bm25": "bm25", "fusion": "fusion", "rerank": "rerank"}
HIGHLIGHT = "background-color: rgba(207,34,46,0.22)"
GOLD = "background-color: rgba(46,160,67,0.25)"


def failure_analysis(record: RunRecord, mode: str, kb: Any) -> None:
    st.subheader(t("Failures"))
    summary = record.mode_summary(mode)
    counts = {c: len(ids) for c, ids in summary.failures.items()}
    if not counts and not record.errors:
        st.success(t("No misses at K=5: every relevant chapter is in the top 5."))
    f = st.columns([2, 1, 1])
    # Labels translated here: format_func also runs outside the script, where t() cannot
    # see the session's language.
    cause_labels = {
        ALL: t("all causes ({n})", n=sum(counts.values())),
        **{c: f"{t(CAUSES.get(c, c))} ({counts.get(c, 0)})" for c in counts},
    }
    cause = f[0].selectbox(
        t("Cause"),
        [ALL, *counts],
        key=state.EVAL_FAIL_CAUSE,
        format_func=lambda c: cause_labels.get(c, c),
    )
    slice_labels = {ALL: t("(all)"), **{s: t(s) for s in A.SLICES}}
    slice_by = f[1].selectbox(
        t("Slice"),
        [ALL, *A.SLICES],
        key=state.EVAL_FAIL_SLICE,
        format_func=lambda s: slice_labels.get(s, s),
    )
    values = sorted({A.slice_of(q, slice_by) for q in record.queries}) if slice_by != ALL else []
    slice_value = f[2].selectbox(
        t("Value"), values or [ALL], key=state.EVAL_FAIL_VALUE, disabled=slice_by == ALL
    )
    rows = A.failures(
        record,
        mode,
        cause=None if cause == ALL else cause,
        slice_by=None if slice_by == ALL else slice_by,
        slice_value=None if slice_by == ALL else slice_value,
    )
    queries = record.for_mode(mode)
    st.caption(
        t(
            "{n} of {total} queries miss a relevant chapter at K=5 · worst first · "
            "click a row to open it",
            n=len(rows),
            total=len(queries),
        )
    )
    picked_id: str | None = None
    if rows:
        table = pd.DataFrame([r.to_dict() for r in rows]).drop(columns=["cause", "language"])
        table["cause_text"] = [t(c) for c in table["cause_text"]]  # cause texts have entries
        table["difficulty"] = [t(d) for d in table["difficulty"]]
        table = table.rename(columns=_headers("query", "difficulty", "category"))
        picked_id = ui.clickable_table(
            table,
            [r.id for r in rows],
            state.EVAL_FAIL_TABLE,
            width="stretch",
            height=ui.fitted_height(len(rows), 320),
            column_config={
                "recall@5": st.column_config.ProgressColumn(
                    min_value=0, max_value=1, format="%.2f"
                ),
                "mrr": st.column_config.NumberColumn(format="%.3f"),
                "cause_text": st.column_config.TextColumn(t("cause")),
                "missing": st.column_config.NumberColumn(t("gold missing"), format="%d"),
            },
        )
    ids = [r.id for r in rows] + [
        q.item.id for q in queries if q.item.id not in {r.id for r in rows}
    ]
    if not ids:
        return
    by_id = {q.item.id: q for q in queries}
    qid = ui.query_picker(
        ids,
        state.EVAL_DRILL,
        lambda i: f"{i} · {by_id[i].item.query}" if i in by_id else i,
        picked=picked_id,
    )
    query_story(A.story(record, mode, qid), kb)
    with st.expander(t("All {n} queries", n=len(queries))):
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        "id": q.item.id,
                        t("query"): q.item.query,
                        t("difficulty"): t(q.item.difficulty),
                        t("category"): q.item.category,
                        "recall@5": q.metrics.get("recall@5", 0.0),
                        "mrr": q.metrics.get("mrr", 0.0),
                        t("cause"): t(CAUSES.get(q.cause, "")) if q.cause else "",
                    }
                    for q in queries
                ]
            ),
            hide_index=True,
            width="stretch",
            column_config={"mrr": st.column_config.NumberColumn(format="%.3f")},
        )


def _headers(*names: str) -> dict[str, str]:
    """Column name -> its header in the current language (the frame keeps English keys)."""
    return {n: t(n) for n in names}


def _title(kb: Any, node_id: str) -> str:
    node = kb.nodes.get(node_id) if kb is not None else None
    return (
        ui.breadcrumb(node.breadcrumb)
        if node is not None
        else t("{id} (not in the KB)", id=node_id)
    )


def query_story(s: A.QueryStory, kb: Any) -> None:
    if s.error:
        st.error(t("This query failed: {error}", error=s.error))
    st.markdown(
        f"**{s.id}** · {s.query}  \n"
        + " · ".join(f"{t(k)} {t(v)}" for k, v in s.meta.items() if v)
        + f" · MRR {s.metrics.get('mrr', 0):.3f} · recall@5 {s.metrics.get('recall@5', 0):.2f}"
    )
    left, right = st.columns([3, 2])
    with left:
        st.markdown(t("**Ranked list** (gold rows green; stage ranks are 1-based)"))
        frame = pd.DataFrame(  # English keys for the code, translated headers for people
            [
                {
                    "rank": r.rank,
                    "chapter": _title(kb, r.node_id),
                    "score": r.score,
                    "vector": r.vector,
                    "bm25": r.bm25,
                    "fusion": r.fusion,
                    "rerank": r.rerank,
                    "gold": r.relevant,
                }
                for r in s.ranked
            ],
            columns=["rank", "chapter", "score", "vector", "bm25", "fusion", "rerank", "gold"],
        )
        for col in ("vector", "bm25", "fusion", "rerank"):
            frame[col] = frame[col].astype("Int64")  # integers; absent stays blank
        gold = frame["gold"].tolist()
        st.dataframe(
            frame.rename(columns=_headers("rank", "chapter", "score", "gold"))
            .style.apply(lambda row: [GOLD if gold[row.name] else ""] * len(row), axis=1)
            .format({t("score"): "{:.4f}"}),
            hide_index=True,
            width="stretch",
            column_config={t("gold"): None},
        )
    with right:
        st.markdown(t("**Gold chapters**"))
        for g in s.gold:
            with st.container(border=True):
                where = t("rank {n}", n=g.final) if g.final else t("not in the list")
                verdict = (
                    t(":red[lost: {cause}]", cause=t(CAUSES.get(g.cause, g.cause)))
                    if g.cause
                    else t(":green[found in the top 5]")
                )
                st.markdown(f"**{escape_text(_title(kb, g.node_id))}**  \n{where} · {verdict}")
                cells = {
                    "vector": g.vector_any if g.vector is None else g.vector,
                    "bm25": g.bm25_any if g.bm25 is None else g.bm25,
                    "fusion": g.fusion,
                }
                lost = (
                    {"vector", "bm25"}
                    if g.lost_at == "candidates"
                    else {STAGE_COLUMN.get(g.lost_at or "")}
                )
                stage = pd.DataFrame([cells]).astype("Int64")
                st.dataframe(
                    stage.style.apply(
                        lambda row, lost=lost: [HIGHLIGHT if c in lost else "" for c in row.index],
                        axis=1,
                    ),
                    hide_index=True,
                )
                if g.vector is None and g.vector_any:
                    st.caption(t("vector rank {n} is past the candidate pool", n=g.vector_any))
                if g.bm25 is None and g.bm25_any:
                    st.caption(t("BM25 rank {n} is past the candidate pool", n=g.bm25_any))
                node = kb.nodes.get(g.node_id) if kb is not None else None
                if node is not None:
                    with st.expander(t("Chapter text")):
                        st.text(node.content[:1500])
                    st.page_link(
                        "views/knowledge_base.py",
                        label=t("Open in Knowledge base"),
                        icon=":material/account_tree:",
                        query_params={"node": g.node_id},
                    )
