"""The Chat page's kept conversations: list, reopen, export, replay under another config."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from engine.config import EngineConfig
from workbench.answer.chat import answer
from workbench.answer.chat_answer import ChatAnswer
from workbench.answer.conversations import (
    ChatStore,
    Conversation,
    answer_from_dict,
    compare_replay,
    replay,
)
from workbench.answer.llm import LLMClient
from workbench.ui import resources, state
from workbench.ui.i18n import labelled, t
from workbench.workspace import Workspace


def keep_turn(
    ws: Workspace, question: str, answer: ChatAnswer, label: str, config_hash: str
) -> None:
    """Store one answered turn in the current conversation (a new one on the first turn)."""
    store = ChatStore(ws.experiments)
    cid = state.chat_conversation()
    if cid is None:
        cid = store.start(question)
        state.set_chat_conversation(cid)
    store.add_turn(cid, answer, label, config_hash)


def open_conversation(conv: Conversation) -> None:
    state.clear_chat()
    state.set_chat_conversation(conv.id)
    for turn in conv.turns:
        state.add_chat_turn(
            {
                "question": turn.question,
                "answer": answer_from_dict(turn.answer, f"turn {turn.n} of conversation {conv.id}"),
                "config": turn.config_label,
            }
        )


def history_panel(ws: Workspace, llm: LLMClient | None, mode: str, top_k: int) -> None:
    store = ChatStore(ws.experiments)
    convs = store.list()
    counts = store.turn_counts()
    with st.expander(t("Conversations ({n})", n=len(convs)), expanded=False):
        if not convs:
            st.caption(t("Nothing kept yet: every answered question is kept here, per KB."))
            return
        ids = [c.id for c in convs]
        # translated here: format_func also runs outside the script, where t() cannot see
        # the session's language
        labels = {
            c.id: t(
                "{updated} · {n} turns · {title}",
                updated=c.updated[:16],
                n=counts.get(c.id, 0),
                title=c.title,
            )
            for c in convs
        }
        pick = st.selectbox(
            t("Conversation"),
            ids,
            key=state.CHAT_HISTORY_PICK,
            format_func=labelled(labels),
        )
        conv = store.load(pick)
        b = st.columns(4)
        if b[0].button(t("Reopen"), key=state.CHAT_HISTORY_OPEN):
            open_conversation(conv)
            st.rerun()
        b[1].download_button(
            t("Markdown"),
            conv.to_markdown(),
            file_name=f"chat-{conv.id}.md",
            key=state.CHAT_HISTORY_MD,
        )
        import json

        b[2].download_button(
            t("JSON"),
            json.dumps(conv.to_dict(), ensure_ascii=False, indent=2),
            file_name=f"chat-{conv.id}.json",
            key=state.CHAT_HISTORY_JSON,
        )
        if b[3].button(t("Delete"), key=state.CHAT_HISTORY_DELETE):
            store.delete(conv.id)
            if state.chat_conversation() == conv.id:
                state.set_chat_conversation(None)
            st.rerun()
        st.markdown(t("**Replay under another config**, answers side by side"))
        options = resources.config_options(ws)
        r = st.columns([3, 1])
        name = r[0].selectbox(t("Config"), list(options), key=state.CHAT_REPLAY_CONFIG)
        if r[1].button(t("Replay"), key=state.CHAT_REPLAY_RUN, disabled=not conv.turns):
            cfg = EngineConfig.from_yaml(options[name])
            engine = resources.engine(ws, cfg)
            with st.spinner(t("Asking {n} questions again…", n=len(conv.turns))):
                new = replay(
                    conv,
                    lambda q, history: answer(
                        q, engine, history=history, llm=llm, mode=mode, top_k=top_k
                    ),
                )
            st.session_state[state.CHAT_REPLAY] = (conv.id, name, compare_replay(conv, new))
        done = st.session_state.get(state.CHAT_REPLAY)
        if done and done[0] == conv.id:
            _, name, rows = done
            st.caption(
                t(
                    "stored answers vs **{name}** · {same} of {n} answers unchanged",
                    name=name,
                    same=sum(1 for x in rows if x.same_answer),
                    n=len(rows),
                )
            )
            st.dataframe(
                pd.DataFrame(
                    [
                        {
                            "n": x.n,
                            "question": x.question,
                            "stored": ("(refused) " if x.refused_a else "") + x.answer_a,
                            name: ("(refused) " if x.refused_b else "") + x.answer_b,
                            "cited (stored)": ", ".join(x.cited_a),
                            f"cited ({name})": ", ".join(x.cited_b),
                            "retrieved overlap": x.retrieved_overlap,
                        }
                        for x in rows
                    ]
                ).style.format({"retrieved overlap": "{:.2f}"}),
                hide_index=True,
                width="stretch",
            )
