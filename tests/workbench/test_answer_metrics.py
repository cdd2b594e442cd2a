"""Answer metrics: hand-computed values, checked against trec_eval's set measures."""

from __future__ import annotations

import math

import numpy as np
import pytest
import pytrec_eval
from hypothesis import given
from hypothesis import strategies as st

from workbench.answer.answer_metrics import (
    aggregate_answer_scores,
    citation_scores,
    parent_from_id,
    phrase_present,
    score_answer,
)
from workbench.answer.chat_answer import ChatAnswer

A, A_CHILD, B, B_DOC, C = "docs/a#x", "docs/a#x/child", "docs/b#y", "docs/b", "docs/c#z"


def chat(text: str, cited: list[str], refusal: bool = False, ms: float = 100.0) -> ChatAnswer:
    cits = [
        {"n": i + 1, "node_id": nid, "breadcrumb": [], "file_path": "", "line": 1}
        for i, nid in enumerate(cited)
    ]
    return ChatAnswer("q", text, cits, refusal, "llm", None, [], [], 1, took_ms=ms)


def test_parent_from_id_follows_the_id_scheme():
    assert parent_from_id("docs/a#x/child") == "docs/a#x"
    assert parent_from_id("docs/a#x") == "docs/a"
    assert parent_from_id("docs/a") is None


def test_phrase_matching_is_case_insensitive_and_cjk_aware():
    assert phrase_present("按标题切分", "我们 按 标题 切分，效果好")
    assert phrase_present("Breadcrumb", "keeps the BREADCRUMB")
    assert phrase_present("ＲＡＧ", "rag pipelines")  # full-width folds by NFKC
    assert not phrase_present("bread crumb", "breadcrumb")  # Latin spaces still matter
    assert not phrase_present("切块", "切分")


def test_score_answer_hand_computed():
    item = {
        "id": "q001",
        "query": "q",
        "relevant": [A, B],
        "answer_contains": ["按标题切分", "Breadcrumb", "missing phrase"],
    }
    ans = chat(
        "按 标题 切分 keeps the BREADCRUMB [1][2][3][4]", [A, A_CHILD, C, B_DOC, A], ms=250.0
    )
    s = score_answer(item, ans)
    assert s["answer_contains"] == pytest.approx(2 / 3)
    # distinct cited: A, A_CHILD, C, B_DOC; only A is relevant
    assert s["citation_precision"] == pytest.approx(1 / 4)
    assert s["citation_recall"] == pytest.approx(1 / 2)
    # credits per citation: A 1, A_CHILD 0.5 (child of A), C 0, B_DOC 0.3 (parent of B)
    assert s["citation_precision_hier"] == pytest.approx((1 + 0.5 + 0 + 0.3) / 4)
    # per relevant: A cited 1; B only via its parent 0.3
    assert s["citation_recall_hier"] == pytest.approx((1 + 0.3) / 2)
    assert (s["refusal_correct"], s["refused"], s["unanswerable"]) == (1.0, 0.0, 0.0)
    assert s["latency_ms"] == 250.0


def test_strict_citation_scores_agree_with_trec_eval_set_measures():
    relevant, cited = [A, B], [A, A_CHILD, C, B_DOC]
    ev = pytrec_eval.RelevanceEvaluator({"q": dict.fromkeys(relevant, 1)}, {"set_P", "set_recall"})
    ref = ev.evaluate({"q": {d: float(len(cited) - i) for i, d in enumerate(cited)}})["q"]
    ours = citation_scores(cited, relevant)
    assert ours["citation_precision"] == pytest.approx(ref["set_P"])
    assert ours["citation_recall"] == pytest.approx(ref["set_recall"])


def test_no_citations_scores_zero_and_empty_relevant_is_an_error():
    assert citation_scores([], [A]) == {
        "citation_precision": 0.0,
        "citation_recall": 0.0,
        "citation_precision_hier": 0.0,
        "citation_recall_hier": 0.0,
    }
    with pytest.raises(ValueError, match="relevant"):
        citation_scores([A], [])


def test_refusals():
    unanswerable = {"id": "q051", "query": "公司年会在哪里举办？", "unanswerable": True}
    refused = score_answer(unanswerable, chat("知识库中没有…", [], refusal=True))
    assert refused == {
        "unanswerable": 1.0,
        "refused": 1.0,
        "refusal_correct": 1.0,
        "latency_ms": 100.0,
    }
    answered = score_answer(unanswerable, chat("在巴黎。", []))
    assert answered["refusal_correct"] == 0.0
    wrongly_refused = score_answer(
        {"id": "q1", "query": "q", "relevant": [A], "answer_contains": ["x"]},
        chat("x", [], refusal=True),
    )
    assert wrongly_refused["refusal_correct"] == 0.0
    assert wrongly_refused["answer_contains"] == 0.0  # a refusal contains no answer
    assert wrongly_refused["citation_recall"] == 0.0


def test_aggregate_hand_computed():
    rows = [
        score_answer({"relevant": [A], "answer_contains": ["a"]}, chat("a", [A], ms=100.0)),
        score_answer({"relevant": [A, B]}, chat("b", [B, C], ms=200.0)),
        score_answer({"unanswerable": True}, chat("no", [], refusal=True, ms=400.0)),
        score_answer({"relevant": [B]}, chat("no", [], refusal=True, ms=300.0)),
    ]
    agg = aggregate_answer_scores(rows)
    assert agg["n"] == 4.0
    assert agg["answer_contains"] == 1.0 and agg["n_answer_contains"] == 1.0
    # precision: 1, 1/2, -, 0 ; recall: 1, 1/2, -, 0
    assert agg["citation_precision"] == pytest.approx((1 + 0.5 + 0) / 3)
    assert agg["citation_recall"] == pytest.approx((1 + 0.5 + 0) / 3)
    assert agg["n_citation_precision"] == 3.0
    assert agg["refusal_accuracy"] == pytest.approx(3 / 4)
    assert agg["unanswerable_refusal_rate"] == 1.0
    assert agg["false_refusal_rate"] == pytest.approx(1 / 3)
    lat = [100.0, 200.0, 400.0, 300.0]
    assert agg["latency_ms_mean"] == 250.0
    assert agg["latency_ms_p50"] == pytest.approx(float(np.percentile(lat, 50))) == 250.0
    assert agg["latency_ms_p95"] == pytest.approx(float(np.percentile(lat, 95)))


def test_aggregate_of_nothing_is_nan_not_an_error():
    agg = aggregate_answer_scores([])
    assert agg["n"] == 0.0
    assert math.isnan(agg["citation_precision"]) and math.isnan(agg["latency_ms_p95"])


ids = st.sampled_from([A, A_CHILD, B, B_DOC, C, "docs/d"])


@given(st.lists(ids, max_size=6), st.lists(ids, min_size=1, max_size=4))
def test_citation_scores_within_bounds_and_hier_not_below_strict(cited, relevant):
    s = citation_scores(cited, relevant)
    assert all(0.0 <= v <= 1.0 for v in s.values())
    assert s["citation_precision_hier"] >= s["citation_precision"] - 1e-12
    assert s["citation_recall_hier"] >= s["citation_recall"] - 1e-12
