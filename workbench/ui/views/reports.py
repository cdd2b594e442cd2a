"""Reports: pick a run, preview the report, download HTML / Markdown / CSV / JSON / TREC files."""

from __future__ import annotations

import streamlit as st
import streamlit.components.v1 as components

from workbench.export.formats import FORMATS, ExportSource, render
from workbench.export.report import build_report
from workbench.ui import components as ui
from workbench.ui import resources, state
from workbench.ui.i18n import labelled, t

st.title(t("Reports"))

with ui.guarded(t("Reports")):
    ws = resources.workspace()
    runs = resources.run_paths(ws)
    if not runs:
        ui.empty_state(
            t("No evaluation runs to report on yet."), "views/evaluate.py", t("Run an evaluation")
        )
        st.stop()
    names = [p.stem for p in runs]
    c = st.columns([2, 1, 1])
    pick = c[0].selectbox(
        t("Run"), names, key=state.REPORT_RUN, format_func=labelled(resources.run_names(runs))
    )
    record = resources.run_record(runs[names.index(pick)])
    mode = c[1].selectbox(t("Mode"), record.modes, key=state.REPORT_MODE)
    view = c[2].radio(t("Preview"), ["Markdown", "HTML"], horizontal=True, key=state.REPORT_VIEW)
    card = state.scorecard()
    if card is not None and card.config_hash != record.config_hash:
        card = None  # a scorecard of another config does not belong in this report
    # The scorecard's prose in the UI's language, like the rest of the report on this page.
    report = build_report(ws, record, scorecard=card.to_dict(t) if card else None, mode=mode)
    if card is None:
        st.caption(
            t(
                "The scorecard section is empty: compute the scorecard for this run's config "
                "on the Scorecard page to include it."
            )
        )

    source = ExportSource(record, mode, report, translate=t)  # the files, in the UI's language
    files = {name: render(name, source) for name in FORMATS}
    stem = f"report-{record.run_id}"
    cols = st.columns(len(FORMATS))
    for col, fmt in zip(cols, FORMATS.values(), strict=True):
        col.download_button(
            t(fmt.label),  # HTML / Markdown / CSV / JSON / TREC run / TREC qrels (catalog entries)
            files[fmt.name].encode("utf-8"),
            file_name=f"{stem}.{fmt.suffix}",
            mime=fmt.mime,
            key=state.item_key(state.REPORT_DOWNLOAD, fmt.label),
            icon=":material/download:",
        )

    with st.container(border=True):
        if view == "HTML":
            components.html(files["html"], height=900, scrolling=True)
        else:
            st.markdown(files["md"])
