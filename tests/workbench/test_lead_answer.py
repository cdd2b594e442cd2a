"""The fallback quote when the evidence judge says enough but no sentence shares a term with
the question (a question in another language than its chapters)."""

from __future__ import annotations

from workbench.answer.extractive import extractive_answer, lead_answer
from workbench.answer.sources import Source


def _src(n: int, title: str, content: str) -> Source:
    return Source(n, f"doc#{n}", title, (title,), content, "doc.md", 1, "rag", 1.0 / n)


LINKS = _src(
    1, "参考", "- [父子块检索](parent-child-chunks.md)\n- [长文档处理](long-documents.md)\n"
)
PROSE = _src(
    2, "父子块检索", "小块召回、大块生成是按标题切分之上的一层。命中后把父章节一起送进上下文。"
)
OTHER = _src(3, "parent child chunks", "每个章节节点在表里是一行。父节点的编号记在子节点上。")
QUESTION = "How is parent-child chunking stored?"


def test_no_sentence_shares_a_term_with_an_english_question_over_chinese_chapters() -> None:
    assert extractive_answer(QUESTION, [LINKS, PROSE, OTHER]) == ("", [])


def test_the_quote_comes_from_the_chapter_holding_most_terms_among_those_with_sentences() -> None:
    # The link list holds the terms (in its link targets) but has no sentence to quote; of the
    # two with prose, the one titled with the question's terms wins over the higher-ranked one.
    text, cited = lead_answer([LINKS, PROSE, OTHER], question=QUESTION)
    assert cited == [3] and text.startswith("每个章节节点在表里是一行。") and text.endswith("[3]")


def test_without_terms_in_any_chapter_the_highest_ranked_one_with_sentences_is_quoted() -> None:
    text, cited = lead_answer([LINKS, PROSE], question="Where is the annual party?")
    assert cited == [2] and "[2]" in text


def test_without_a_question_the_top_source_is_quoted_as_before() -> None:
    assert lead_answer([PROSE, OTHER]) == (
        "小块召回、大块生成是按标题切分之上的一层。 [2]\n命中后把父章节一起送进上下文。 [2]",
        [2],
    )
