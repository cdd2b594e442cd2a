"""Every citation form the answer prompt asks for or a model commonly writes is read as a
citation; a number that is not among the sources is removed, never renumbered."""

from __future__ import annotations

import pytest

from workbench.answer.citations import check_citations, has_content
from workbench.answer.safe_markdown import safe_markdown

FIVE = [type("S", (), {"n": n})() for n in (1, 2, 3, 4, 5)]


@pytest.mark.parametrize(
    "written, shown, valid, removed",
    [
        ("a [1][2] b", "a [1][2] b", [1, 2], []),
        ("a [2][3][4] b", "a [2][3][4] b", [2, 3, 4], []),
        ("a [1, 2] b", "a [1][2] b", [1, 2], []),
        ("a [1，3] b", "a [1][3] b", [1, 3], []),
        ("a [1]-[3] b", "a [1][2][3] b", [1, 2, 3], []),
        ("a [1-3] b", "a [1][2][3] b", [1, 2, 3], []),
        ("a 【1】 b", "a [1] b", [1], []),
        ("a 【2†source】 b", "a [2] b", [2], []),
        ("a (source 2) b", "a [2] b", [2], []),
        ("a （来源 3） b", "a [3] b", [3], []),
        ("a [2†source] b", "a [2] b", [2], []),
        ("a [^4] b", "a [4] b", [4], []),
    ],
)
def test_each_citation_form_reads_as_its_numbers(written, shown, valid, removed):
    assert check_citations(written, FIVE) == (shown, valid, removed)


@pytest.mark.parametrize(
    "written, shown, removed",
    [
        ("a [9] b", "a b", [9]),
        ("a (source 9) b", "a b", [9]),
        ("a [9†source] b", "a b", [9]),
        ("a 【7】 b", "a b", [7]),
        ("a [1][9] b", "a [1] b", [9]),
        ("a [2, 9] b", "a [2] b", [9]),
        # a range past the five sources cites nothing: not [1]..[5], not renumbered
        ("a [1-9] b", "a b", [6, 7, 8, 9]),
        ("a [4]-[7] b", "a b", [6, 7]),
        ("a [3-1] b", "a b", [3, 1]),
        ("a [1-99999] b", "a b", [1, 99999]),
    ],
)
def test_numbers_outside_the_sources_are_removed_not_renumbered(written, shown, removed):
    text, _, gone = check_citations(written, FIVE)
    assert (text, gone) == (shown, removed)


def test_a_removed_citation_never_joins_two_lines():
    assert check_citations("one\n[9] two", FIVE)[0] == "one\n two"


def test_text_in_brackets_or_parentheses_is_not_a_citation():
    text = "see [step one] (source code) [a-b] (2024) [v2]"
    assert check_citations(text, FIVE) == (text, [], [])


def test_adjacent_citations_survive_the_markdown_sanitiser():
    # "[1][2]" is a reference link to CommonMark once "[2]:" is defined: it must stay citations
    for text in ("A [1][2] B [2][3][4].", "A [1][2].\n\n[2]: http://evil.example/x"):
        cleaned, valid, _ = check_citations(safe_markdown(text), FIVE)
        assert cleaned.startswith("A [1][2]") and valid[:2] == [1, 2]


def test_an_answer_of_citations_alone_has_no_content():
    assert not has_content("[1][2] (source 3) 【4】")
    assert has_content("切块 [1]")
