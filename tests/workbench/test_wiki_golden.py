"""The bundled golden set (datasets/wiki.yaml) validates against the bundled wiki and meets the mix.

Requirements checked here: no validation errors or coverage warnings; >= 60 answerable
queries with a 30/50/20 easy/medium/hard mix (within 5 points); every wiki category with
>= 4 queries and each item's category equal to its first relevant chapter's category;
1-4 relevant chapters, never a document node; answer_contains phrases taken verbatim from
the relevant chapters; Chinese and English queries; >= 10 unanswerable queries with ids
q101 and up.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from engine.tree import parse_kb
from workbench.eval import golden as g

REPO = Path(__file__).resolve().parents[2]
CATEGORIES = ("rag", "retrieval", "agents", "knowledge-engineering", "evaluation", "llmops")


@pytest.fixture(scope="module")
def gs() -> g.GoldenSet:
    return g.load(REPO / "datasets" / "wiki.yaml")


@pytest.fixture(scope="module")
def kb():
    return parse_kb(REPO / "wiki")


def test_validates_without_errors_or_warnings(gs, kb):
    issues = g.validate(gs, kb)
    assert [str(i) for i in issues] == []


def test_size_and_difficulty_mix(gs):
    items = gs.answerable()
    assert len(items) >= 60
    mix = Counter(i.difficulty for i in items)
    for level, target in g.TARGET_MIX.items():
        assert abs(mix[level] / len(items) - target) <= 0.05, (level, mix)


def test_every_category_covered_and_matches_main_chapter(gs, kb):
    items = gs.answerable()
    cats = Counter(i.category for i in items)
    for cat in CATEGORIES:
        assert cats[cat] >= 4, (cat, cats)
    for it in items:
        assert it.category == kb.get(it.relevant[0]).category, it.id


def test_relevant_chapters_are_headings_not_documents(gs, kb):
    for it in gs.answerable():
        assert 1 <= len(it.relevant) <= 4, it.id
        for nid in it.relevant:
            node = kb.get(nid)
            assert node is not None and node.level >= 2, (it.id, nid)


def test_answer_contains_is_verbatim_from_relevant_chapters(gs, kb):
    with_phrases = [it for it in gs.answerable() if it.answer_contains]
    assert len(with_phrases) >= len(gs.answerable()) * 0.75
    for it in with_phrases:
        assert 1 <= len(it.answer_contains) <= 3, it.id
        text = "\n".join(kb.get(nid).content for nid in it.relevant)
        for phrase in it.answer_contains:
            assert phrase in text, (it.id, phrase)


def test_languages_and_ids(gs):
    items = gs.answerable()
    langs = Counter(i.language for i in items)
    assert langs["zh"] >= 10 and langs["en"] >= 10, langs
    # English questions about Chinese chapters and Chinese questions about the English handbook
    assert any(i.language == "en" and not i.relevant[0].startswith("handbook/") for i in items)
    assert any(i.language == "zh" and i.relevant[0].startswith("handbook/") for i in items)
    for i in items:
        assert re.fullmatch(r"q0\d\d", i.id), i.id


def test_unanswerable_queries(gs):
    un = [i for i in gs.items if i.unanswerable]
    assert len(un) >= 10
    for i in un:
        assert not i.relevant
        assert re.fullmatch(r"q1\d\d", i.id), i.id
