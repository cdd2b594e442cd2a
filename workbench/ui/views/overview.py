"""Overview: the KB, the index, the latest run, the scorecard grade and what to do next."""

from __future__ import annotations

import streamlit as st

from workbench.eval.measures import shown
from workbench.tune.experiment_history import trajectory
from workbench.tune.experiment_store import ExperimentStore
from workbench.ui import charts, resources, state
from workbench.ui import components as ui
from workbench.ui.i18n import t

st.title(t("Overview"))
if msg := state.flash():
    st.success(msg)

with ui.guarded(t("Overview")):
    ws = resources.workspace()
    label, cfg = ui.current_config(ws)
    kb = resources.kb(ws)
    stats = kb.stats()
    status = resources.index_status(ws, cfg)
    gs = resources.golden_set(ws)
    runs = resources.run_paths(ws)
    store = ExperimentStore(ws.experiments)

    c = st.columns(5)
    c[0].metric(t("Documents"), stats["totalDocuments"])
    c[1].metric(t("Chapters"), stats["totalChapters"])
    c[2].metric(t("Max depth"), stats["maxDepth"])
    c[3].metric(t("Golden queries"), len(gs.items) if gs else 0)
    c[4].metric(t("Saved runs"), len(runs))
    st.markdown(
        f"{ui.freshness_badge(status)} · "
        + t("config **{label}** `{hash}`", label=label, hash=cfg.hash)
        + " · "
        + (
            t(
                "embedder `{embedder}` ({dims} dims), built {built}",
                embedder=f"{status['embedder'].get('provider')}/"
                f"{status['embedder'].get('model') or '-'}",
                dims=status["embedder"].get("dims"),
                built=status["updated_at"][:19],
            )
            if status.get("exists")
            else t("no index yet")
        )
    )
    if kb.problems:
        with st.expander(t("{n} problems found while parsing the KB", n=len(kb.problems))):
            st.dataframe([p.to_dict() for p in kb.problems], hide_index=True)

    st.subheader(t("What to do next"))
    todo = 0
    if not status.get("exists") or not status.get("fresh"):
        todo += 1
        what = (
            t("There is no index yet.")
            if not status.get("exists")
            else t(
                "The index is stale: {new} new, {changed} changed, {deleted} deleted chapters.",
                new=status["new"],
                changed=status["changed"],
                deleted=status["deleted"],
            )
        )
        st.warning(what + " " + t("Re-index so search and evaluation see the current wiki."))
        if st.button(t("Re-index now"), key=state.OVERVIEW_REINDEX, type="primary"):
            from engine.indexer import build_index

            with ui.progress_bar(t("Indexing")) as progress:
                report = build_index(kb, cfg, str(ws.index), progress=progress)
            resources.forget_engines()
            state.flash(t("Index updated — {summary}", summary=report.summary()))
            st.rerun()
    if gs is None:
        todo += 1
        ui.empty_state(
            t(
                "No golden set at `{path}`: write a few queries with their relevant "
                "chapters to measure search.",
                path=ws.dataset,
            ),
            "views/golden_set.py",
            t("Create the golden set"),
        )
    if not ws.baseline_path.is_file():
        todo += 1
        st.info(
            t(
                "No accepted baseline yet: experiments compare against it. Adopt the selected "
                "config (**{label}**) as the first baseline.",
                label=label,
            )
        )
        if st.button(t("Adopt as baseline"), key=state.OVERVIEW_BASELINE):
            cfg.save(store.baseline)
            store.ensure_initial_version()
            resources.clear_data()
            state.flash(t("Baseline saved to {path} (version 0)", path=store.baseline))
            st.rerun()
    if gs is not None and not runs:
        todo += 1
        ui.empty_state(
            t("No evaluation run yet."), "views/evaluate.py", t("Evaluate the golden set")
        )
    if runs and gs is not None:
        latest = resources.run_record(runs[0])
        misses = latest.mode_summary(latest.modes[0]).misses
        if misses:
            todo += 1
            st.info(
                t(
                    "{n} queries of the latest run miss a relevant chapter at K=5: see where "
                    "each was lost.",
                    n=misses,
                )
            )
            st.page_link(
                "views/evaluate.py", label=t("Open the failures"), icon=":material/arrow_forward:"
            )
    if not todo:
        st.success(t("Everything is in place: try a change on the Experiments page."))
    st.page_link(
        "views/experiments.py",
        label=t("Try one change, or let the optimizer search"),
        icon=":material/science:",
    )

    left, right = st.columns(2)
    with left:
        ui.tune_link()
        st.subheader(t("Latest run"))
        if runs:
            rec = resources.run_record(runs[0])
            means = rec.means()
            st.caption(
                t(
                    "run `{run}` · config `{hash}` · {dataset} ({split})",
                    run=rec.run_id,
                    hash=rec.config_hash,
                    dataset=rec.dataset.name,
                    split=rec.split,
                )
            )
            base_hash = ExperimentStore(ws.experiments).baseline_config().hash
            if rec.config_hash != base_hash:  # numbers of another config read as the baseline's
                st.warning(
                    t(
                        "The latest run is not the baseline's config (`{run}` vs baseline "
                        "`{base}`): evaluate the baseline to see its numbers.",
                        run=rec.config_hash[:12],
                        base=base_hash[:12],
                    )
                )
            m = st.columns(4)
            for col, key in zip(m, shown("headline"), strict=True):
                col.metric(key, f"{means.get(key, 0.0):.3f}")
            st.markdown(
                t("Recall@5 band: {badge}", badge=charts.band_badge(means.get("recall@5", 0.0)))
            )
        else:
            st.caption(t("No runs yet."))
        st.subheader(t("Scorecard"))
        card = state.scorecard()
        if card is not None:
            st.metric(
                t("Grade"), f"{getattr(card, 'grade', '?')}", f"{getattr(card, 'score', 0):.0f}/100"
            )
        else:
            st.caption(t("Not computed in this session yet."))
            st.page_link(
                "views/scorecard.py", label=t("Compute the scorecard"), icon=":material/grade:"
            )
    with right:
        charts.trajectory_chart(trajectory(store))
