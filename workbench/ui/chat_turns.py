"""One chat turn drawn: the answer with linked citations, sources, feedback buttons."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import streamlit as st

from workbench.answer.safe_markdown import code_span, escape_text, safe_markdown
from workbench.ui import state
from workbench.ui.components import breadcrumb, open_chapter_button
from workbench.ui.i18n import t


def link_citations(text: str, citations: Sequence[Mapping[str, Any]]) -> str:
    """Turn each ``[n]`` marker into a link to its chapter in the Knowledge base page (a
    relative link: it cannot leave the workbench)."""
    import re
    from urllib.parse import quote

    targets = {int(c["n"]): str(c["node_id"]) for c in citations}

    def link(m: re.Match[str]) -> str:
        n = int(m.group(1))
        if n not in targets:
            return m.group(0)
        return f"[\\[{n}\\]](knowledge_base?node={quote(targets[n], safe='')})"

    return re.sub(r"(?<!\\)\[(\d{1,2})\](?!\()", link, text)


def chat_turn(i: int, turn: Mapping[str, Any], kb: Any, show_notice: bool = True) -> bool:
    """One question and its answer with citations, sources and trace; True on "bad answer".

    ``show_notice``: False when the previous turn already showed the same notice (e.g. "No
    LLM configured"), so it appears once per conversation, not under every answer.
    """
    ans = turn["answer"]
    with st.chat_message("user"):
        st.markdown(escape_text(turn["question"]))  # what was asked, as text
    with st.chat_message("assistant"):
        # Model output and chapter titles are untrusted: no remote images or off-wiki links.
        if ans.refusal:
            st.warning(safe_markdown(ans.answer))
        else:
            st.markdown(link_citations(safe_markdown(ans.answer), ans.citations))
        kind = ":violet-badge[LLM]" if ans.mode == "llm" else t(":gray-badge[extractive]")
        st.markdown(
            kind
            + " "
            + t(
                ":small[config {config} · {ms} ms · {rounds} retrieval round(s)]",
                config=turn.get("config", ""),
                ms=f"{ans.took_ms:.0f}",
                rounds=ans.rounds,
            )
        )
        if ans.notice and show_notice:
            st.info(ans.notice)
        for c in ans.citations:
            node = kb.nodes.get(c["node_id"])
            # an expander label renders Markdown: a title "![x](url)" would load the URL
            with st.expander(escape_text(f"[{c['n']}] {breadcrumb(c['breadcrumb'])}")):
                st.caption(t("{path} line {line}", path=code_span(c["file_path"]), line=c["line"]))
                # chapter text is untrusted too: no remote images or off-wiki links
                st.markdown(
                    safe_markdown(node.content) if node else t("_(chapter no longer in the KB)_")
                )
                open_chapter_button(c["node_id"], key=state.item_key(state.CHAT_OPEN, i, c["n"]))
        with st.expander(t("Retrieved chapters ({n}) and trace", n=len(ans.retrieved))):
            st.dataframe(
                pd.DataFrame(
                    [
                        {
                            "n": r["n"],
                            "chapter": breadcrumb(r["breadcrumb"]),
                            "score": r["score"],
                            "file": f"{r.get('file_path')}:{r.get('line')}",
                        }
                        for r in ans.retrieved
                    ]
                ),
                hide_index=True,
                width="stretch",
            )
            st.dataframe(
                pd.DataFrame(ans.trace, columns=["step", "ms", "detail"]).style.format(
                    {"ms": "{:.1f}"}
                ),
                hide_index=True,
                width="stretch",
            )
        return st.button(
            t("Bad answer → golden-set entry"),
            icon=":material/thumb_down:",
            key=state.item_key(state.CHAT_BAD, i),
            help=t("drafts an entry with the cited chapters pre-filled; review and save it"),
        )
