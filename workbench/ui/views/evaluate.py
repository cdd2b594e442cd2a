"""Evaluate: run the golden set, metric cards with target bands, slices, drill-down, failures."""

from __future__ import annotations

import streamlit as st

from engine.config import SEARCH_MODES
from workbench.eval import golden
from workbench.eval.run_record import save_run
from workbench.ui import charts, resources, state
from workbench.ui import components as ui
from workbench.ui.failures import failure_analysis
from workbench.ui.i18n import labelled, t

st.title(t("Evaluate"))

with ui.guarded(t("Evaluate")):
    ws = resources.workspace()
    label, cfg = ui.current_config(ws)
    gs = ui.golden_set_or_stop(
        ws,
        t("No golden set at `{path}`: write some queries first.", path=ws.dataset),
        t("Open the golden set"),
    )

    with st.form(state.EVAL_FORM, border=True):
        c = st.columns([2, 1, 1, 1])
        modes = c[0].multiselect(
            t("Modes"), list(SEARCH_MODES), default=[cfg.search.mode], key=state.EVAL_MODES
        )
        split = c[1].selectbox(t("Split"), ["all", "tune", "holdout"], key=state.EVAL_SPLIT)
        rerank = c[2].checkbox(
            t("Rerank"), value=cfg.rerank.provider != "none", key=state.EVAL_RERANK
        )
        c[3].caption(
            t(
                "config **{label}** `{hash}` · {n} answerable queries",
                label=label,
                hash=cfg.hash,
                n=len(gs.answerable()),
            )
        )
        allow_invalid = st.checkbox(
            t("Score an invalid golden set (skip the items with errors)"),
            key=state.EVAL_ALLOW_INVALID,
        )
        go = st.form_submit_button(t("Run evaluation"), type="primary")
    if go:
        ev = resources.evaluator(ws, cfg) if modes else None
        skipped: list[str] = []
        try:
            valid = (
                golden.checked(gs, ev.engine.kb, allow_invalid=allow_invalid, notify=skipped.append)
                if ev is not None
                else None
            )
        except golden.GoldenSetError as exc:
            # Scores of an invalid set look fine and mean little: refuse, say how to go on.
            st.error(str(exc))
            st.caption(
                t(
                    "Tick **Score an invalid golden set** above to score only the valid items, "
                    "or fix the set on the Golden set page."
                )
            )
            valid = None
        for note in skipped:
            st.warning(note.replace("--allow-invalid: ", t("Invalid items skipped: ")))
        if not modes:
            st.warning(t("Pick at least one mode."))
        elif valid is not None and ev is not None:
            with ui.progress_bar(t("Evaluating")) as progress:
                run = ev.run(
                    valid,
                    cfg,
                    modes=modes,
                    rerank=rerank,
                    split=split,
                    progress=progress,
                    kb_name=ws.name,
                )
            ev.cache.save()
            run.label = label  # the sidebar's config name: runs are listed by it, not by hash
            path = save_run(run, ws.runs_dir)
            state.show_run(path.stem)
            st.success(
                t(
                    "{n} rankings in {s}s (cache {hits} hits / {misses} misses) · saved {name}",
                    n=len(run.queries),
                    s=f"{run.seconds:.1f}",
                    hits=run.cache_hits,
                    misses=run.cache_misses,
                    name=resources.run_names([path])[path.stem],
                )
            )

    runs = resources.run_paths(ws)
    if not runs:
        st.info(t("No run yet: press **Run evaluation** above."))
        st.stop()
    ui.tune_link()
    names = [p.stem for p in runs]  # run ids: the options, the deep link's value
    run_names = resources.run_names(runs)
    linked = st.query_params.get("run")  # ?run=<id>: a pasted link opens that run
    if linked in names and state.changed("run_query_param", linked):
        state.show_run(linked)
    pick = st.selectbox(t("Run shown"), names, key=state.EVAL_RUN, format_func=labelled(run_names))
    st.query_params["run"] = pick
    record = resources.run_record(runs[names.index(pick)])

    mode = record.modes[0]
    if len(record.modes) > 1:
        mode = st.radio(t("Mode shown"), record.modes, horizontal=True, key=state.EVAL_MODE_SHOWN)
    summary = record.mode_summary(mode)
    means = summary.means
    st.caption(
        t(
            "run **{name}** (`{run}`) · config `{hash}` · split {split} · {n} queries · "
            "p50 {p50} ms · p95 {p95} ms",
            name=record.name,
            run=record.run_id,
            hash=record.config_hash,
            split=record.split,
            n=summary.queries,
            p50=f"{summary.latency['p50']:.1f}",
            p95=f"{summary.latency['p95']:.1f}",
        )
        + (" · " + t(":red[{n} queries failed]", n=record.errors) if record.errors else "")
    )
    m = st.columns(3)
    m[0].metric(t("MRR"), f"{means.get('mrr', 0):.3f}")
    m[1].metric(t("MAP"), f"{means.get('map', 0):.3f}")
    m[2].metric(t("Latency p95"), f"{summary.latency['p95']:.1f} ms")
    charts.metric_cards(means)
    st.caption(t("Recall bands: poor < 0.5 ≤ acceptable < 0.7 ≤ good < 0.85 ≤ excellent"))

    failure_analysis(record, mode, resources.kb(ws))

    st.subheader(t("Slices"))
    slice_cols = st.columns(3)
    for col, (by, title) in zip(
        slice_cols,
        (
            ("difficulty", t("By difficulty")),
            ("category", t("By category")),
            ("language", t("By language")),
        ),
        strict=True,
    ):
        with col:
            charts.bar_chart(summary.breakdown(by), title=title)
    if len(record.modes) > 1:
        charts.bar_chart({md: record.means(md) for md in record.modes}, title=t("By mode"))
