"""Chat: answers with citations under the chosen config; any bad answer becomes a golden item."""

from __future__ import annotations

import streamlit as st

from workbench.answer.chat import ANSWER_MODES, DEFAULT_ANSWER_MODE, DEFAULT_TOP_K, answer
from workbench.answer.drafting import draft_golden_item
from workbench.answer.safe_markdown import escape_text, safe_markdown
from workbench.eval import golden
from workbench.eval.query_log import query_log_for
from workbench.ui import chat_turns, resources, state
from workbench.ui import components as ui
from workbench.ui.conversations import history_panel, keep_turn
from workbench.ui.i18n import labelled, t

st.title(t("Chat"))
if msg := state.flash():
    st.success(msg)

with ui.guarded(t("Chat")):
    ws = resources.workspace()
    label, cfg = ui.current_config(ws)
    kb = resources.kb(ws)
    llm = resources.llm_client(cfg)
    c = st.columns([2, 1, 1, 1])
    c[0].caption(
        t(
            "Answers under config **{label}** `{hash}` (change it in the sidebar).",
            label=label,
            hash=cfg.hash,
        )
    )
    mode = c[1].selectbox(
        t("Agent mode"),
        list(ANSWER_MODES),
        index=ANSWER_MODES.index(DEFAULT_ANSWER_MODE),
        key=state.CHAT_MODE,
        help=t("loop: retrieve → judge → rewrite; tools: the model calls search itself (LLM only)"),
    )
    top_k = c[2].number_input(t("Chapters"), 1, 20, DEFAULT_TOP_K, key=state.CHAT_TOP_K)
    if c[3].button(t("New conversation"), key=state.CHAT_CLEAR):
        state.clear_chat()
        st.rerun()
    if llm is None:
        st.info(
            t(
                "No LLM configured — extractive answers: sentences from the top chapters, cited. "
                "Set `OPENAI_BASE_URL` and `WIKIRAG_LLM_MODEL` (or `llm.base_url` / `llm.model`) "
                "for generated answers."
            )
        )

    history_panel(ws, llm, mode, int(top_k))
    turns = state.chat_turns()
    if not turns:
        st.caption(t("Ask a question about the wiki below, e.g. “父子块检索有哪几种展开方式？”"))
    for i, turn in enumerate(turns):
        shown_before = i > 0 and turns[i - 1]["answer"].notice == turn["answer"].notice
        if chat_turns.chat_turn(i, turn, kb, show_notice=not shown_before):
            gs = resources.golden_set(ws)
            try:
                drafted = draft_golden_item(
                    turn["question"],
                    turn["answer"],
                    existing_ids=[it.id for it in gs.items] if gs else [],
                )
            except ValueError as exc:
                st.warning(str(exc))
            else:
                state.set_chat_draft(drafted)

    draft = state.chat_draft()
    if draft is not None:
        st.subheader(t("New golden-set entry from this answer"))
        with st.form(state.CHAT_DRAFT_FORM):
            a, b = st.columns([3, 1])
            query = a.text_input(t("Query"), draft["query"], key=state.CHAT_DRAFT_QUERY)
            item_id = b.text_input(t("Id"), draft["id"], key=state.CHAT_DRAFT_ID)
            unanswerable = st.checkbox(
                t("Unanswerable (the KB does not cover it)"),
                value=bool(draft.get("unanswerable")),
                key=state.CHAT_DRAFT_UNANSWERABLE,
            )
            relevant = st.multiselect(
                t("Relevant chapters (1–4)"),
                list(kb.nodes),
                default=[n for n in draft.get("relevant", []) if n in kb.nodes],
                format_func=lambda nid: ui.breadcrumb(kb.nodes[nid].breadcrumb),
                max_selections=4,
                key=state.CHAT_DRAFT_RELEVANT,
            )
            d1, d2 = st.columns(2)
            difficulty_labels = {d: t(d) for d in golden.DIFFICULTIES}
            difficulty = d1.selectbox(
                t("Difficulty"),
                list(golden.DIFFICULTIES),
                index=1,
                key=state.CHAT_DRAFT_DIFFICULTY,
                format_func=labelled(difficulty_labels),  # values stay English
            )
            category = d2.text_input(
                t("Category"), draft.get("category", ""), key=state.CHAT_DRAFT_CATEGORY
            )
            notes = st.text_input(t("Notes"), draft.get("notes", ""), key=state.CHAT_DRAFT_NOTES)
            save = st.form_submit_button(t("Save into the golden set"), type="primary")
        if st.button(t("Discard draft"), key=state.CHAT_DRAFT_DISCARD):
            state.set_chat_draft(None)
            st.rerun()
        if save:
            item = golden.item_from_dict(
                {
                    "id": item_id.strip() or draft["id"],
                    "query": query,
                    "relevant": [] if unanswerable else relevant,
                    "unanswerable": unanswerable,
                    "difficulty": difficulty,
                    "category": category,
                    "notes": notes,
                }
            )
            gs = resources.golden_set(ws) or golden.GoldenSet(ws.name, (), ws.dataset)
            updated = golden.with_item(gs, item)
            problems = [
                i
                for i in golden.validate(updated, kb)
                if i.level == "error" and i.item_id == item.id
            ]
            if problems:
                for p in problems:
                    st.error(str(p))
            else:
                try:
                    golden.save(updated)
                except golden.ConflictError as exc:
                    st.error(
                        t("{error}. Press Save again to retry against the current file.", error=exc)
                    )
                    resources.clear_data()
                else:
                    resources.clear_data()
                    state.set_chat_draft(None)
                    state.flash(t("{id} saved to {path}", id=item.id, path=ws.dataset))
                    st.rerun()

    question = st.chat_input(t("Ask the wiki…"), key=state.CHAT_INPUT)
    if question:
        with st.chat_message("user"):
            st.markdown(escape_text(question))
        with st.chat_message("assistant"):
            live = st.empty()
            streamed: list[str] = []

            def on_text(text: str) -> None:
                streamed.append(text)
                # Raw model deltas: defused before rendering, like the final answer.
                live.markdown(safe_markdown("".join(streamed)) + " ▌")

            log = query_log_for(ws.index)  # on only with $WIKIRAG_LOG_QUERIES=1
            if log is not None:
                log.record(question, "chat")
            with st.spinner(t("Searching the wiki…")):
                result = answer(
                    question,
                    resources.engine(ws, cfg),
                    history=[turn["answer"] for turn in turns],
                    llm=llm,
                    mode=mode,
                    top_k=int(top_k),
                    stream_cb=on_text if llm is not None else None,
                )
            live.empty()
        state.add_chat_turn({"question": question, "answer": result, "config": label})
        keep_turn(ws, question, result, label, cfg.hash)
        st.rerun()
