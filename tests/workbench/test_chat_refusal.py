"""The extractive (no-LLM) chat refuses rather than cite an unrelated sentence."""

from __future__ import annotations

from typing import Any

from engine.types import SearchResponse, SearchResult
from tests.workbench.test_chat import CFG
from workbench.answer.chat import answer
from workbench.answer.extractive import extractive_answer
from workbench.answer.terms import key_terms

CANTEEN = "公司食堂周五晚上几点关门？"


class OneChapter:
    """A retriever whose best chapter matches the question in its headings only: the
    breadcrumb names 公司 / 食堂 / 周五 (chapter-level coverage 0.5, the grey zone), the
    text is about something else."""

    def search(self, query: str, *, top_k: int | None = None, **kw: Any) -> SearchResponse:
        r = SearchResult(
            node_id="ops/weekly#周五发布",
            score=0.03,
            rank_source={"vector": 1, "bm25": 1, "rerank": None},
            title="周五发布窗口",
            breadcrumb=["公司运维", "食堂旁的机房", "周五发布窗口"],
            content="发布只在工作日上午进行。回滚脚本必须提前演练两次。",
            summary="",
            metadata={"file_path": "ops/weekly.md", "line": 4, "category": "ops"},
        )
        return SearchResponse(query, [r], 1, 1.0, {}, {}, CFG.hash)

    def chapter(self, node_id: str) -> Any:
        raise KeyError(node_id)


def test_no_sentence_sharing_a_term_means_no_extractive_answer():
    from workbench.answer.sources import source_from_result

    src = source_from_result(1, OneChapter().search(CANTEEN).results[0])
    terms = key_terms(CANTEEN)
    assert not any(t in src.content for t in terms)
    assert extractive_answer(CANTEEN, [src]) == ("", [])


def test_the_canteen_question_is_refused_not_answered_with_an_unrelated_sentence():
    ans = answer(CANTEEN, OneChapter(), llm=None, top_k=3)
    assert ans.refusal and ans.citations == []
    assert "发布只在工作日" not in ans.answer
    assert ans.answer.startswith("知识库中没有足够的信息回答这个问题")
    assert any("no sentence of the top chapters shares a term" in s["detail"] for s in ans.trace)


def test_a_refusal_names_no_closest_chapters_when_none_shares_a_term_with_the_question():
    from workbench.answer.extractive import refusal_text
    from workbench.answer.sources import Source

    far = Source(1, "a#x", "发布流程", ("发布流程",), "每周四发布。", "a.md", 1, "", 0.1)
    near = Source(2, "b#y", "食堂", ("行政", "食堂"), "食堂在二楼。", "b.md", 1, "", 0.1)
    assert "发布流程" not in refusal_text("公司食堂周五晚上几点关门？", [far])
    assert "没有找到" in refusal_text("公司食堂周五晚上几点关门？", [far])
    assert "食堂" in refusal_text("公司食堂周五晚上几点关门？", [far, near]).split("：")[-1]
