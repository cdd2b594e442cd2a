"""Knowledge base: the chapter tree (filterable), one chapter, and search with every knob."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from engine.config import field_spec
from workbench.answer.safe_markdown import code_span, escape_text, safe_markdown
from workbench.eval.snippets import plain_text, snippet
from workbench.ui import components as ui
from workbench.ui import resources, state
from workbench.ui.i18n import t
from workbench.ui.snippets import escape_markdown, snippet_markdown

st.title(t("Knowledge base"))

with ui.guarded(t("Knowledge base")):
    ws = resources.workspace()
    label, cfg = ui.current_config(ws)
    kb = resources.kb(ws)
    if not kb.nodes:
        ui.empty_state(
            t("`{kb}` holds no Markdown files yet: add `.md` files and reload.", kb=ws.kb)
        )
        st.stop()

    tree_col, view_col = st.columns([2, 3])
    with tree_col:
        st.subheader(t("Chapter tree"))
        needle = st.text_input(
            t("Filter chapters"), key=state.KB_FILTER, placeholder=t("title, path or id (中文 OK)")
        ).strip()
        docs = {d.nodes[0].node_id: d for d in kb.documents if d.nodes}
        if needle:
            shown = [
                n
                for n in kb.nodes.values()
                if needle.lower() in " ".join([*n.breadcrumb, n.node_id, n.file_path]).lower()
            ]
            st.caption(t("{n} of {total} chapters match", n=len(shown), total=len(kb.nodes)))
        else:
            # Collapsible by document, then by heading depth: a 14k-chapter KB stays usable.
            c = st.columns([3, 1])
            doc = c[0].selectbox(
                t("Document"),
                list(docs),
                key=state.KB_DOC,
                format_func=lambda i: (
                    f"{kb.nodes[i].title or kb.nodes[i].doc_id} · {kb.nodes[i].file_path}"
                ),
            )
            depth = c[1].selectbox(
                t("Down to"),
                [1, 2, 3, 4, 5, 6],
                index=2,
                key=state.KB_DEPTH,
                format_func=lambda d: f"H{d}",
            )
            shown = [n for n in docs[doc].nodes if n.level <= depth]
            hidden = len(docs[doc].nodes) - len(shown)
            st.caption(
                t("{docs} documents · {n} chapters shown", docs=len(docs), n=len(shown))
                + (t(" · {n} deeper chapters folded", n=hidden) if hidden else "")
            )
        rows = [
            {
                t("chapter"): "\u2003" * max(0, n.level - 1) + (n.title or n.doc_id),
                "node_id": n.node_id,
                t("file"): f"{n.file_path}:{n.line}",
                t("category"): n.category,
            }
            for n in shown
        ]
        picked = ui.clickable_table(
            pd.DataFrame(rows, columns=[t("chapter"), "node_id", t("file"), t("category")]),
            [r["node_id"] for r in rows],
            state.KB_TREE,
            seen=state.KB_TREE_PICK,
            height=420,
            column_config={
                "node_id": None,
                t("chapter"): st.column_config.TextColumn(width="large"),
                "file": st.column_config.TextColumn(width="medium"),
                "category": st.column_config.TextColumn(width="small"),
            },
        )
        if picked is not None:
            state.set_selected_node(picked)

    with view_col:
        ids = [r["node_id"] for r in rows] or list(kb.nodes)
        current = state.selected_node()
        if current not in kb.nodes:  # start on the first real chapter, not a document node
            current = next((i for i in ids if kb.nodes[i].level > 0), ids[0])
        choice = st.selectbox(
            t("Chapter"),
            ids if current in ids else [current, *ids],
            index=(ids if current in ids else [current, *ids]).index(current),
            format_func=lambda nid: ui.breadcrumb(kb.nodes[nid].breadcrumb),
            key=state.item_key(state.KB_NODE, current),
        )
        if choice != current:
            state.set_selected_node(choice)
            current = choice
        node = kb.nodes[current]
        # titles, paths and front matter are wiki text: shown as text, never as Markdown
        st.markdown(f"**{escape_text(ui.breadcrumb(node.breadcrumb))}**")
        meta = [
            t("{path} line {line}", path=code_span(node.file_path), line=node.line),
            f"id {code_span(node.node_id)}",
        ]
        meta += [
            f"{k} {code_span(str(v))}"
            for k, v in (
                (t("type"), node.doc_type),
                (t("priority"), node.priority),
                (t("category"), node.category),
            )
            if v
        ]
        st.caption(t(" · ").join(meta))
        if node.keywords:
            st.caption(t("keywords: ") + escape_text(", ".join(node.keywords)))
        body = node.content.strip()
        if body.startswith("#"):  # the heading line repeats the breadcrumb's last title
            body = body.partition("\n")[2].strip()
        with st.container(border=True, height=420 if len(body) > 1200 else "content"):
            st.markdown(
                safe_markdown(body) or t("_(no text of its own: open one of its chapters below)_")
            )
        kids = kb.children(node.node_id)
        nav = ([node.parent_id] if node.parent_id else []) + [k.node_id for k in kids]
        if nav:
            go = st.pills(
                t("Go to parent / chapters inside"),
                nav,
                key=state.item_key(state.KB_NAV, node.node_id),
                format_func=lambda i: (
                    ("↑ " if i == node.parent_id else "") + escape_text(kb.nodes[i].title)
                ),
            )
            if go:
                state.set_selected_node(go)
                st.rerun()

    st.divider()
    st.subheader(t("Search"))
    with st.form(state.KB_SEARCH_FORM):
        query = st.text_input(
            t("Query"), key=state.KB_QUERY, placeholder=t("例如：父子块检索怎么展开？")
        )
        row = st.columns(4)
        modes = field_spec("search.mode")["choices"]
        mode = row[0].selectbox(
            t("Mode"), modes, index=modes.index(cfg.search.mode), key=state.KB_MODE
        )
        top_k = row[1].number_input(t("Top K"), 1, 100, cfg.search.top_k, key=state.KB_TOP_K)
        expands = field_spec("search.expand")["choices"]
        expand = row[2].selectbox(
            t("Expand"), expands, index=expands.index(cfg.search.expand), key=state.KB_EXPAND
        )
        rerank = row[3].checkbox(
            t("Rerank"),
            value=cfg.rerank.provider != "none",
            key=state.KB_RERANK,
            help=t("rerank.provider is `{provider}` in this config", provider=cfg.rerank.provider),
        )
        nodes = list(kb.nodes.values())
        # Each search filter: its label, its widget key and the values the KB's chapters have.
        facets = {
            "category": (t("Category"), state.KB_FILTER_CATEGORY, {n.category for n in nodes}),
            "priority": (t("Priority"), state.KB_FILTER_PRIORITY, {n.priority for n in nodes}),
            "doc_type": (t("Type"), state.KB_FILTER_TYPE, {n.doc_type for n in nodes}),
            "keywords": (
                t("Keywords"),
                state.KB_FILTER_KEYWORDS,
                {k for n in nodes for k in n.keywords},
            ),
        }
        filters = {
            name: col.multiselect(label, sorted(v for v in values if v), key=key)
            for col, (name, (label, key, values)) in zip(st.columns(4), facets.items(), strict=True)
        }
        submitted = st.form_submit_button(t("Search"), type="primary")
    if submitted and query.strip():
        eng = resources.engine(ws, cfg)
        resp = eng.search(
            query,
            top_k=int(top_k),
            mode=mode,
            rerank=rerank,
            filters={k: v for k, v in filters.items() if v} or None,
            expand=expand,
        )
        state.set_search_response(resp)
    elif submitted:
        st.warning(t("Type a query first."))
    resp = state.search_response()
    if resp is not None:
        for w in resp.warnings:
            st.warning(w)
        st.caption(
            t(
                "{n} results in {ms} ms · config `{hash}`",
                n=resp.total,
                ms=f"{resp.took_ms:.1f}",
                hash=resp.config_hash,
            )
            + (
                t(" · expansion: {terms}", terms=", ".join(resp.expansion_terms))
                if resp.expansion_terms
                else ""
            )
            + (
                t(" · cross-lingual question: keyword weight × {scale}", scale=resp.bm25_scale)
                if resp.bm25_scale != 1.0
                else ""
            )
        )
        st.caption(
            t("stage timings: ")
            + " · ".join(f"{stage} {ms:.1f} ms" for stage, ms in resp.timings.items())
        )
        if not resp.results:
            st.info(t("Nothing matched: loosen the filters, or try keyword mode for exact terms."))
        # Document-level entries with no text of their own say little: list them after the
        # chapters that do (their rank is kept in the label).
        ranked = list(enumerate(resp.results, 1))
        has_text = {i: bool(plain_text(r.content)) for i, r in ranked}
        real = [(i, r) for i, r in ranked if has_text[i]]
        empty = [(i, r) for i, r in ranked if not has_text[i]]
        for group, items in (
            ("", real),
            (t("Matched by title only (no text of their own)"), empty),
        ):
            if group and items:
                st.caption(group)
            for i, r in items:
                rs = r.rank_source
                ranks = " · ".join(f"{k} #{v}" for k, v in rs.items() if v is not None)
                with st.container(border=True):
                    st.markdown(
                        f"**{i}. {escape_markdown(r.title)}** · {r.score:.4f}"
                        f" · {escape_markdown(ranks or t('injected'))}"
                    )
                    st.caption(
                        f"{escape_markdown(ui.breadcrumb(r.breadcrumb))} · "
                        + t(
                            "{path} line {line}",
                            path=escape_markdown(str(r.metadata.get("file_path"))),
                            line=r.metadata.get("line"),
                        )
                    )
                    snip = snippet(r.summary or r.content, resp.query)
                    if snip.parts:
                        st.markdown(snippet_markdown(snip))
                    if r.expanded:
                        st.caption(
                            t("expanded: ")
                            + ", ".join(
                                escape_markdown(f"{e.get('title')} ({e.get('relation')})")
                                for e in r.expanded
                            )
                        )
                    b = st.columns(4)
                    if b[0].button(t("Show this chapter"), key=state.item_key(state.KB_OPEN, i)):
                        state.set_selected_node(r.node_id)
                        st.rerun()
                    for j, child in enumerate(kb.children(r.node_id)[:3], 1):
                        if b[j].button(
                            f"↳ {escape_text(child.title)}", key=state.item_key(state.KB_OPEN, i, j)
                        ):
                            state.set_selected_node(child.node_id)
                            st.rerun()
