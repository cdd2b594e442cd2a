"""Reports: pick a run, preview the report, download HTML / Markdown / CSV / JSON / TREC files."""

from __future__ import annotations

import streamlit as st
import streamlit.components.v1 as components

from workbench.eval.evaluate import trec_qrels_lines, trec_run_lines
from workbench.ui import components as ui
from workbench.ui import resources, state
from workbench.ui.i18n import t

st.title(t("Reports"))

with ui.guarded(t("Reports")):
    ws = resources.workspace()
    runs = resources.run_paths(ws)
    if not runs:
        ui.empty_state(
            t("No evaluation runs to report on yet."), "views/evaluate.py", t("Run an evaluation")
        )
        st.stop()
    report_mod = ui.core("workbench.export.report", "wikirag report")
    if report_mod is None:
        st.stop()
    names = [p.stem for p in runs]
    c = st.columns([2, 1, 1])
    pick = c[0].selectbox(t("Run"), names, key="rep_run")
    record = resources.run_record(runs[names.index(pick)])
    mode = c[1].selectbox(t("Mode"), record["modes"], key="rep_mode")
    view = c[2].radio(t("Preview"), ["Markdown", "HTML"], horizontal=True, key="rep_view")
    card = state.scorecard()
    if card is not None and card.config_hash != record["config_hash"]:
        card = None  # a scorecard of another config does not belong in this report
    report = report_mod.build_report(ws, record, scorecard=card, mode=mode)
    if card is None:
        st.caption(
            t(
                "The scorecard section is empty: compute the scorecard for this run's config "
                "on the Scorecard page to include it."
            )
        )

    html = report_mod.render_html(report)
    markdown = report_mod.render_markdown(report)
    run = report_mod.run_from_record(record)
    gs = report_mod.golden_from_record(record)
    stem = f"report-{record['run_id']}"
    files = [
        ("HTML", html, f"{stem}.html", "text/html"),
        ("Markdown", markdown, f"{stem}.md", "text/markdown"),
        ("CSV", report_mod.render_csv(report), f"{stem}.csv", "text/csv"),
        ("JSON", report_mod.render_json(report), f"{stem}.json", "application/json"),
        ("TREC run", "\n".join(trec_run_lines(run, mode)) + "\n", f"{stem}.run", "text/plain"),
        ("TREC qrels", "\n".join(trec_qrels_lines(gs)) + "\n", f"{stem}.qrels", "text/plain"),
    ]
    cols = st.columns(len(files))
    for col, (label, data, name, mime) in zip(cols, files, strict=True):
        col.download_button(
            t(label),  # HTML / Markdown / CSV / JSON / TREC run / TREC qrels (catalog entries)
            data.encode("utf-8"),
            file_name=name,
            mime=mime,
            key=f"rep_dl_{label}",
            icon=":material/download:",
        )

    with st.container(border=True):
        if view == "HTML":
            components.html(html, height=900, scrolling=True)
        else:
            st.markdown(markdown)
