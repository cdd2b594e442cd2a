"""Chat page: citations link to their chapters; a notice is shown once per conversation."""

from __future__ import annotations

from tests.ui.test_pages import open_page
from workbench.ui import state
from workbench.ui.chat_turns import link_citations


def test_citation_markers_link_to_their_chapter_in_the_knowledge_base():
    cites = [{"n": 1, "node_id": "rag/父子块#数据结构"}, {"n": 2, "node_id": "agents/mcp#传输"}]
    md = link_citations("按标题切分 [1]，见 [2] 和 [3]。", cites)
    assert "[\\[1\\]](knowledge_base?node=rag%2F%E7%88%B6" in md
    assert "(knowledge_base?node=agents%2Fmcp%23" in md
    assert "[3]" in md and "node=" not in md.split("[3]")[1]  # unknown numbers stay text


def test_no_llm_notice_appears_once_per_conversation(ui_copy):
    at = open_page("chat")
    at.chat_input(key=state.CHAT_INPUT).set_value("父子块检索的数据结构是什么？").run()
    at.chat_input(key=state.CHAT_INPUT).set_value("MCP 的传输方式有哪些").run()
    assert not at.exception
    notices = [i.value for i in at.info if "No LLM configured" in i.value]
    # one page-level hint + the first turn's notice; the second turn does not repeat it
    assert len(notices) <= 2, notices
    assert any("knowledge_base?node=" in m.value for m in at.markdown)
