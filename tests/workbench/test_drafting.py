from pathlib import Path

import pytest

from engine.tree import parse_kb
from tests.engine.engine_kit import write_kb
from tests.workbench.openai_server import ChatServer, Fail, Say
from workbench.answer.drafting import draft_queries, key_sentence, rule_query
from workbench.answer.llm import LLMClient, LLMSettings


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    return parse_kb(write_kb(tmp_path_factory.mktemp("d") / "kb"))


def test_rule_drafts_from_headings(kb):
    node = kb.get("retrieval/rerank#重排/延迟")
    assert rule_query(node) == "重排里的延迟是怎么做的？有什么要注意的？"
    assert key_sentence(node) == "重排会增加延迟，候选数不宜超过 35。"
    [d] = draft_queries([node], existing_ids=["q001", "q007"])
    assert d["id"] == "q008" and d["relevant"] == [node.node_id]
    assert d["category"] == "retrieval" and "35" in d["answer_contains"]
    assert "rule" in d["notes"]


def test_llm_paraphrase_and_fallback(kb):
    node = kb.get("rag/chunking#切块策略/按标题切块")
    with ChatServer(lambda payload: Say("文档是按什么切成块的？")) as srv:
        llm = LLMClient(LLMSettings(base_url=srv.base_url, model="m", api_key="sk-x"))
        [d] = draft_queries([node], llm=llm)
    assert d["query"] == "文档是按什么切成块的？" and "LLM" in d["notes"]
    with ChatServer(lambda payload: Fail(500)) as srv:
        llm = LLMClient(LLMSettings(base_url=srv.base_url, model="m", api_key="sk-x"))
        [d] = draft_queries([node], llm=llm)
    assert d["query"] == rule_query(node) and "LLM failed" in d["notes"]


def test_cli_draft_apply(tmp_path: Path, monkeypatch, capsys):
    from workbench.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    write_kb(tmp_path / "kb")
    (tmp_path / "datasets").mkdir()
    (tmp_path / "datasets" / "kb.yaml").write_text("name: kb\nqueries: []\n", encoding="utf-8")
    assert main(["golden", "draft", "--kb", "kb", "retrieval/rerank#重排/延迟", "--apply"]) == 0
    text = (tmp_path / "datasets" / "kb.yaml").read_text(encoding="utf-8")
    assert "retrieval/rerank#重排/延迟" in text and "q001" in text
    assert main(["golden", "draft", "--kb", "kb", "nope"]) == 2


def test_a_chat_draft_takes_the_golden_sets_next_id():
    from workbench.answer.chat_answer import ChatAnswer
    from workbench.answer.drafting import draft_golden_item
    from workbench.eval.golden import next_id

    taken = ["q001", "q007", "x12", "q002"]
    ans = ChatAnswer("q?", "a [1]", [{"node_id": "a#b"}], False, "extractive", None, [], [], 1)
    item = draft_golden_item("q?", ans, existing_ids=taken)
    assert item["id"] == next_id(taken) == "q008"
