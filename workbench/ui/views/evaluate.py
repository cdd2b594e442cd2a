"""Evaluate: run the golden set, metric cards with target bands, slices, drill-down, failures."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from workbench.evaluate import CAUSES, save_run
from workbench.ui import components as ui
from workbench.ui import resources, state

st.title("Evaluate")

with ui.guarded("Evaluate"):
    ws = resources.workspace()
    label, cfg = ui.current_config(ws)
    gs = resources.golden_set(ws)
    if gs is None:
        ui.empty_state(
            f"No golden set at `{ws.dataset}`: write some queries first.",
            "views/golden_set.py",
            "Open the golden set",
        )
        st.stop()

    with st.form("eval_form", border=True):
        c = st.columns([2, 1, 1, 1])
        modes = c[0].multiselect(
            "Modes", ["hybrid", "keyword", "vector"], default=[cfg.search.mode], key="eval_modes"
        )
        split = c[1].selectbox("Split", ["all", "tune", "holdout"], key="eval_split")
        rerank = c[2].checkbox("Rerank", value=cfg.rerank.provider != "none", key="eval_rerank")
        c[3].caption(f"config **{label}** `{cfg.hash}` · {len(gs.answerable())} answerable queries")
        go = st.form_submit_button("Run evaluation", type="primary")
    if go:
        if not modes:
            st.warning("Pick at least one mode.")
        else:
            ev = resources.evaluator(ws, cfg)
            progress, bar = ui.progress_callback("Evaluating")
            run = ev.run(
                gs, cfg, modes=modes, rerank=rerank, split=split, progress=progress, kb_name=ws.name
            )
            bar.empty()
            ev.cache.save()
            path = save_run(run, ws.runs_dir)
            state.show_run(path.stem)
            st.success(
                f"{len(run.results)} rankings in {run.seconds:.1f}s "
                f"(cache {run.cache_hits} hits / {run.cache_misses} misses) · saved {path.name}"
            )

    runs = resources.run_paths(ws)
    if not runs:
        st.info("No run yet: press **Run evaluation** above.")
        st.stop()
    names = [p.stem for p in runs]
    pick = st.selectbox("Run shown", names, key=state.EVAL_RUN)
    record = resources.run_record(runs[names.index(pick)])

    mode = record["modes"][0]
    if len(record["modes"]) > 1:
        mode = st.radio("Mode shown", record["modes"], horizontal=True, key="eval_mode_shown")
    summary = record["summary"][mode]
    means = summary["means"]
    st.caption(
        f"run `{record['run_id']}` · config `{record['config_hash']}` · split {record['split']} · "
        f"{summary['queries']} queries · p50 {summary['latency']['p50']:.1f} ms · "
        f"p95 {summary['latency']['p95']:.1f} ms"
        + (f" · :red[{record['errors']} queries failed]" if record.get("errors") else "")
    )
    m = st.columns(3)
    m[0].metric("MRR", f"{means.get('mrr', 0):.3f}")
    m[1].metric("MAP", f"{means.get('map', 0):.3f}")
    m[2].metric("Latency p95", f"{summary['latency']['p95']:.1f} ms")
    ui.metric_cards(means)
    st.caption("Recall bands: poor < 0.5 ≤ acceptable < 0.7 ≤ good < 0.85 ≤ excellent")

    st.subheader("Slices")
    charts = st.columns(3)
    for col, (key, title) in zip(
        charts,
        (
            ("by_difficulty", "By difficulty"),
            ("by_category", "By category"),
            ("by_language", "By language"),
        ),
        strict=True,
    ):
        with col:
            ui.bar_chart(summary[key], title=title)
    if len(record["modes"]) > 1:
        ui.bar_chart(
            {md: record["summary"][md]["means"] for md in record["modes"]}, title="By mode"
        )

    st.subheader("Queries")
    queries = [q for q in record["queries"] if q["mode"] == mode]
    table = pd.DataFrame(
        [
            {
                "id": q["id"],
                "query": q["query"],
                "difficulty": q["difficulty"],
                "category": q["category"],
                "recall@5": q["metrics"].get("recall@5", 0.0),
                "mrr": q["metrics"].get("mrr", 0.0),
                "hit@5": q["metrics"].get("hit@5", 0.0),
                "cause": CAUSES.get(q["cause"], "") if q["cause"] else "",
                "latency ms": q["latency_ms"],
                "error": q.get("error") or "",
            }
            for q in queries
        ]
    )
    st.dataframe(
        table,
        hide_index=True,
        width="stretch",
        column_config={
            "recall@5": st.column_config.ProgressColumn(min_value=0, max_value=1, format="%.2f"),
            "mrr": st.column_config.NumberColumn(format="%.3f"),
        },
    )
    qid = st.selectbox(
        "Drill down into",
        [q["id"] for q in queries],
        key="eval_drill",
        format_func=lambda i: next(f"{i} · {q['query']}" for q in queries if q["id"] == i),
    )
    q = next((x for x in queries if x["id"] == qid), None)
    if q is not None:
        kb = resources.kb(ws)
        relevant = set(q["relevant"])
        ranked = pd.DataFrame(
            [
                {
                    "rank": i,
                    "relevant": "✅" if r["node_id"] in relevant else "",
                    "chapter": ui.breadcrumb(kb.nodes[r["node_id"]].breadcrumb)
                    if r["node_id"] in kb.nodes
                    else r["node_id"],
                    "score": r["score"],
                    "vector": r["vector_rank"],
                    "bm25": r["bm25_rank"],
                    "fusion": r["fusion_rank"],
                    "rerank": r["rerank_rank"],
                }
                for i, r in enumerate(q["ranked"], 1)
            ]
        )
        st.caption(
            "Ranked list against the gold (relevant rows highlighted; stage ranks are 1-based)"
        )
        st.dataframe(
            ranked.style.apply(
                lambda row: (
                    ["background-color: rgba(46,160,67,0.25)" if row["relevant"] else ""] * len(row)
                ),
                axis=1,
            ),
            hide_index=True,
            width="stretch",
        )
        if q["attribution"]:
            st.markdown("**Where the missed chapters were lost**")
            st.dataframe(
                pd.DataFrame(
                    [
                        {
                            "chapter": a["node_id"],
                            "cause": CAUSES[a["cause"]],
                            "final rank": a["final_rank"],
                            "fusion": a["fusion_rank"],
                            "vector (pool)": a["vector_rank"],
                            "bm25 (pool)": a["bm25_rank"],
                            "vector (any)": a["vector_rank_any"],
                            "bm25 (any)": a["bm25_rank_any"],
                        }
                        for a in q["attribution"]
                    ]
                ),
                hide_index=True,
            )
        elif relevant:
            st.success("Every relevant chapter is in the top 5.")

    st.subheader("Failures by cause")
    failures = summary["failures"]
    if not failures:
        st.success("No misses at K=5.")
    by_id = {x["id"]: x for x in queries}
    for cause, ids in failures.items():
        with st.expander(f"{CAUSES[cause]} — {len(ids)} queries"):
            for i in ids:
                st.markdown(f"- `{i}` {by_id[i]['query'] if i in by_id else ''}")
