"""Golden set: edit queries and labels, pick chapters, fix drift, pool candidates, save safely."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import streamlit as st

from workbench.answer.drafting import draft_queries
from workbench.answer.safe_markdown import code_span
from workbench.eval import golden, golden_drift
from workbench.eval.pooling import pool_candidates
from workbench.eval.snippets import plain_text
from workbench.ui import components as ui
from workbench.ui import golden_table, health_panel, rating_panel, resources, state
from workbench.ui.i18n import t
from workbench.ui.snippets import escape_markdown

st.title(t("Golden set"))
if msg := state.flash():
    st.success(msg)

with ui.guarded(t("Golden set")):
    ws = resources.workspace()
    label, cfg = ui.current_config(ws)
    kb = resources.kb(ws)
    saved = resources.golden_set(ws)
    state.restore_golden_working()
    draft = state.golden_draft()
    stale = saved is not None and draft is not None and draft.sha256 != saved.sha256
    if draft is None or (stale and not state.golden_dirty()):  # reload what changed on disk
        draft = saved or golden.GoldenSet(name=ws.name, items=(), path=ws.dataset)
        state.set_golden_draft(draft, dirty=False)
    rating_panel.rater_input()
    deep_link = st.query_params.get("queue") == "unjudged"
    if saved is not None and deep_link:  # opened from "N unjudged in top 10"
        rating_panel.render(ws, saved, kb)
    if saved is None:
        st.info(
            t(
                "No golden set at `{path}` yet. Add queries below (type in the last row of "
                "the table, or use “New query”); saving creates the file.",
                path=ws.dataset,
            )
        )

    st.caption(
        t(
            "`{path}` · {n} queries · one row per query; relevant chapter ids separated by `{sep}`",
            path=ws.dataset,
            n=len(draft.items),
            sep=golden_table.SEP.strip(),
        )
    )
    # The golden file's field names, shown in the UI's language (the file keeps its own).
    heads = {
        "id": "id",
        "query": t("query"),
        "relevant": t("relevant"),
        "difficulty": t("difficulty"),
        "category": t("category"),
        "split": t("split"),
        "unanswerable": t("unanswerable"),
        "answer_contains": t("answer_contains"),
        "notes": t("notes"),
    }
    # A click on a row picks that query for labelling below; the toggle turns the table
    # into an editor (on from the start when there is no set yet: rows are typed there).
    editing = st.toggle(t("Edit in the table"), value=saved is None, key=state.GOLDEN_TABLE_EDIT)
    if not editing:
        shown_set = state.golden_working() or draft
        clicked = ui.clickable_table(
            golden_table.golden_frame(shown_set).rename(columns=heads),
            [it.id for it in shown_set.items],
            state.GOLDEN_TABLE_PICK,
            width="stretch",
            height=ui.fitted_height(len(shown_set.items), 420),
        )
        if clicked is not None:
            st.session_state[state.GOLDEN_TARGET] = clicked  # before its picker is drawn
        st.caption(t("Click a row to label that query below; turn on the toggle to edit."))
        working = shown_set
    else:
        edited = st.data_editor(
            golden_table.golden_frame(draft).rename(columns=heads),
            key=state.golden_editor_key(),
            num_rows="dynamic",
            hide_index=True,
            width="stretch",
            column_config={
                heads["id"]: st.column_config.TextColumn(width="small"),
                heads["query"]: st.column_config.TextColumn(width="large", required=True),
                heads["relevant"]: st.column_config.TextColumn(width="large"),
                heads["difficulty"]: st.column_config.SelectboxColumn(
                    options=list(golden.DIFFICULTIES), default="medium"
                ),
                heads["split"]: st.column_config.SelectboxColumn(options=list(golden.SPLITS)),
                heads["unanswerable"]: st.column_config.CheckboxColumn(default=False),
            },
        ).rename(columns={v: k for k, v in heads.items()})
        working = golden_table.frame_golden(edited, draft)
        if working.content_hash != draft.content_hash:
            state.keep_golden_working(working)
    dirty = state.golden_dirty()

    issues = golden.validate(working, kb)
    errors = [i for i in issues if i.level == "error"]
    warnings = [i for i in issues if i.level == "warning"]
    for issue in errors:
        st.error(issue.render(t))
    if warnings:
        with st.expander(t("{n} coverage warnings", n=len(warnings))):
            for issue in warnings:
                st.warning(issue.render(t))
    if not errors:
        st.caption(t(":green-badge[valid] no errors"))

    save_col, new_col = st.columns([1, 2])
    with save_col:
        st.markdown(t(":orange-badge[unsaved changes]") if dirty else t(":green-badge[saved]"))
        if st.button(
            t("Save golden set"), key=state.GOLDEN_SAVE, type="primary", disabled=not dirty
        ):
            try:
                new = golden.save(working)
            except golden.ConflictError as exc:
                state.set_golden_conflict(str(exc))
                state.set_golden_draft(working, dirty=True)
            else:
                state.set_golden_conflict(None)
                state.set_golden_draft(new, dirty=False)
                resources.clear_data()
                state.flash(f"Saved {len(new.items)} queries to {new.path}")
            st.rerun()
    conflict = state.golden_conflict()
    if conflict:
        st.error(conflict)
        st.caption(t("Your edits are kept on this page until you choose."))
        a, b = st.columns(2)
        if a.button(t("Reload from disk (discard my edits)"), key=state.GOLDEN_RELOAD):
            resources.clear_data()
            state.set_golden_conflict(None)
            state.set_golden_draft(golden.load(ws.dataset), dirty=False)
            st.rerun()
        if b.button(t("Overwrite the file with my edits"), key=state.GOLDEN_OVERWRITE):
            new = golden.save(working, force=True)
            state.set_golden_conflict(None)
            state.set_golden_draft(new, dirty=False)
            resources.clear_data()
            state.flash(f"Overwrote {new.path} with {len(new.items)} queries")
            st.rerun()
    with new_col, st.form(state.GOLDEN_NEW_FORM, clear_on_submit=True, border=False):
        q = st.text_input(
            t("New query"), key=state.GOLDEN_NEW_QUERY, placeholder=t("例如：MCP 网关做什么？")
        )
        if st.form_submit_button(t("Add query")) and q.strip():
            item = golden.GoldenItem(id=golden.next_id(working), query=q.strip())
            item = replace(item, split=golden.default_split(item.id))
            state.set_golden_draft(golden.with_item(working, item), dirty=True)
            st.session_state[state.GOLDEN_TARGET] = item.id  # label the query just added
            st.rerun()

    st.subheader(t("Label relevant chapters"))
    ids = [it.id for it in working.items]
    if not ids:
        st.caption(t("Add a query first."))
    else:
        if st.session_state.get(state.GOLDEN_TARGET) not in ids:
            st.session_state.pop(state.GOLDEN_TARGET, None)

        def query_label(item_id: str) -> str:
            item = working.get(item_id)
            return f"{item_id} · {item.query if item else ''}"

        target_id = st.selectbox(
            t("Query to label"), ids, key=state.GOLDEN_TARGET, format_func=query_label
        )
        target = working.get(target_id)
        if target is None:  # cannot happen: the picker offers only the set's ids
            st.stop()
        if target.relevant:
            st.markdown(t("**Relevant now**"))
            for j, rid in enumerate(target.relevant):
                c1, c2 = st.columns([6, 1])
                node = kb.nodes.get(rid)
                c1.markdown(
                    (
                        f"{escape_markdown(ui.breadcrumb(node.breadcrumb))}  \n"
                        if node
                        else t(":red[not in the KB]") + " "
                    )
                    + code_span(rid)
                )
                if c2.button(t("Remove"), key=state.item_key(state.GOLDEN_REMOVE, j)):
                    rel = tuple(r for r in target.relevant if r != rid)
                    state.set_golden_draft(
                        golden.with_item(working, replace(target, relevant=rel)), dirty=True
                    )
                    state.flash(t("{rid} removed from {id}", rid=rid, id=target.id))
                    st.rerun()
        else:
            st.caption(t("Relevant now: none"))

        def add_relevant(item: golden.GoldenItem, node_id: str) -> None:
            rel = tuple(dict.fromkeys([*item.relevant, node_id]))
            # A query gets a category from its first label (the chapter's), unless it has one.
            category = item.category or (kb.nodes[node_id].category if node_id in kb.nodes else "")
            changed = replace(item, relevant=rel, unanswerable=False, category=category)
            state.set_golden_draft(golden.with_item(working, changed), dirty=True)
            state.flash(t("{node} added to {id}", node=node_id, id=item.id))

        tree_tab, search_tab = st.tabs([t("From the tree"), t("From search results")])
        with tree_tab:
            needle = (
                st.text_input(t("Filter chapters"), key=state.GOLDEN_TREE_FILTER).strip().lower()
            )
            options = [
                n.node_id
                for n in kb.nodes.values()
                if n.level > 0 and (not needle or needle in " ".join(n.breadcrumb).lower())
            ]
            pick = st.selectbox(
                t("Chapter"),
                options,
                key=state.GOLDEN_TREE_PICK,
                format_func=lambda nid: f"{ui.breadcrumb(kb.nodes[nid].breadcrumb)} · {nid}",
            )
            if pick is not None:
                preview = plain_text(kb.nodes[pick].content)
                st.caption(
                    f"{code_span(pick)} · "
                    f"{escape_markdown(f'{kb.nodes[pick].file_path}:{kb.nodes[pick].line}')}  \n"
                    + escape_markdown(preview[:300] + ("…" if len(preview) > 300 else ""))
                )
            add_col, draft_col = st.columns(2)
            if add_col.button(
                t("Add to relevant"), key=state.GOLDEN_ADD_TREE, disabled=pick is None
            ):
                add_relevant(target, pick)
                st.rerun()
            if draft_col.button(
                t("Draft a new query for this chapter"),
                key=state.GOLDEN_DRAFT_TREE,
                disabled=pick is None,
                help=t(
                    "An LLM paraphrase when one is configured, else a question built from "
                    "the heading. Review the wording before saving."
                ),
            ):
                [drafted] = draft_queries(
                    [kb.nodes[pick]], existing_ids=ids, llm=resources.llm_client(cfg)
                )
                item = golden.item_from_dict(drafted)
                state.set_golden_draft(golden.with_item(working, item), dirty=True)
                state.flash(t("Drafted {id}: {query}", id=item.id, query=item.query))
                st.rerun()
        with search_tab, ui.guarded(t("Search")):
            if not target.query:
                st.caption(t("The query is empty."))
            else:
                resp = resources.engine(ws, cfg).search(target.query, top_k=10)
                for i, r in enumerate(resp.results, 1):
                    c1, c2 = st.columns([5, 1])
                    mark = " ✅" if r.node_id in target.relevant else ""
                    c1.markdown(
                        f"{i}. **{escape_markdown(ui.breadcrumb(r.breadcrumb))}** ({r.score:.3f}){mark}"
                    )
                    if c2.button(
                        t("Add"), key=state.item_key(state.GOLDEN_ADD_HIT, i), disabled=bool(mark)
                    ):
                        add_relevant(target, r.node_id)
                        st.rerun()

    st.subheader(t("Drift: labels that no longer exist"))
    drift = golden_drift.drift_report(working, kb)
    if not drift:
        st.caption(t("Every relevant id exists in the KB."))
    else:
        mapping = {}
        leave_label = t("(leave as is)")  # translated here: format_func also runs outside
        for d in drift:
            choice = st.selectbox(
                f"{d.item_id}: `{d.stale_id}` →",
                [*d.suggestions, "(leave as is)"],
                key=state.item_key(state.GOLDEN_DRIFT, d.item_id, d.stale_id),
                format_func=lambda o: leave_label if o == "(leave as is)" else o,
            )
            if choice != "(leave as is)":
                mapping[d.stale_id] = choice
        if st.button(
            t("Remap {n} ids", n=len(mapping)), key=state.GOLDEN_REMAP, disabled=not mapping
        ):
            state.set_golden_draft(golden_drift.remap(working, mapping), dirty=True)
            state.flash(t("Remapped {n} stale ids; review and save", n=len(mapping)))
            st.rerun()

    st.subheader(t("Candidate pooling"))
    st.caption(
        t(
            "Chapters that at least two of hybrid / keyword / vector rank in their top 5 for a "
            "query, but that nobody labelled: review, tick and add."
        )
    )
    if st.button(t("Pool candidates"), key=state.GOLDEN_POOL_RUN):
        ev = resources.evaluator(ws, cfg)
        with ui.progress_bar(t("Ranking")) as progress:
            run = ev.run(
                working, cfg, modes=("hybrid", "keyword", "vector"), rerank=False, progress=progress
            )
        state.set_golden_pool([c.to_dict() for c in pool_candidates([(label, run)])])
    pool = state.golden_pool()
    if pool is not None:
        if not pool:
            st.success(t("No unlabelled chapter is ranked high by two systems."))
        else:
            df = pd.DataFrame(pool)
            df.insert(0, "add", False)
            df["chapter"] = [
                ui.breadcrumb(kb.nodes[n].breadcrumb) if n in kb.nodes else n for n in df["node_id"]
            ]
            picked = st.data_editor(
                df[["add", "item_id", "query", "chapter", "votes", "best_rank", "node_id"]],
                key=state.GOLDEN_POOL_TABLE,
                hide_index=True,
                disabled=["item_id", "query", "chapter", "votes", "best_rank", "node_id"],
            )
            chosen = picked[picked["add"]]
            if st.button(
                t("Add {n} to relevant", n=len(chosen)),
                key=state.GOLDEN_POOL_ADD,
                disabled=chosen.empty,
            ):
                gs = working
                for row in chosen.to_dict("records"):
                    it = gs.get(row["item_id"])
                    if it is not None and len(it.relevant) < golden.MAX_RELEVANT:
                        rel = tuple(dict.fromkeys([*it.relevant, row["node_id"]]))
                        gs = golden.with_item(gs, replace(it, relevant=rel))
                state.set_golden_draft(gs, dirty=True)
                state.set_golden_pool(None)
                st.rerun()

    if saved is not None:
        if not deep_link:
            rating_panel.render(ws, saved, kb)
        health_panel.render(ws, saved)
