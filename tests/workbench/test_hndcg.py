"""hndcg@K: NDCG whose gains follow the heading tree (child 0.5, parent 0.3, sibling 0.2)."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from workbench.eval.hierarchy import tree_gains
from workbench.eval.metrics import evaluate_query, parse_measure

# doc
# ├── a          (relevant)
# │   ├── a1
# │   └── a2
# └── b
#     └── b1     (relevant)
PARENT = {"doc": None, "a": "doc", "a1": "a", "a2": "a", "b": "doc", "b1": "b", "c": "doc"}
QRELS = {"a": 1, "b1": 1}
IDEAL = 1 + 1 / math.log2(3)


def h(ranked, k=3, qrels=QRELS):
    return evaluate_query(ranked, qrels, [f"hndcg@{k}"], PARENT)[f"hndcg@{k}"]


def test_round_trip_name():
    assert str(parse_measure("hndcg@10")) == "hndcg@10"


def test_exact_hits_equal_binary_ndcg():
    assert h(["a", "b1", "c"]) == pytest.approx(1.0)
    assert h(["c", "a", "b1"]) == pytest.approx((1 / math.log2(3) + 1 / math.log2(4)) / IDEAL)


def test_child_parent_sibling_credit_by_hand():
    # a1 is a child of relevant a (0.5), b is the parent of relevant b1 (0.3)
    assert h(["a1", "b", "c"]) == pytest.approx((0.5 + 0.3 / math.log2(3)) / IDEAL)
    # c shares the parent "doc" with relevant a: a sibling, 0.2 (ideal DCG@1 is 1)
    assert h(["c"], k=1) == pytest.approx(0.2 / 1.0)


def test_each_relevant_chapter_credited_once_and_exact_hits_reserved():
    # a1 and a2 both children of a: only the first earns 0.5; a itself later keeps its 1
    assert tree_gains(["a1", "a2"], {"a": 1}, PARENT) == [0.5, 0.0]
    assert tree_gains(["a1", "a"], {"a": 1}, PARENT) == [0.0, 1.0]


def test_without_hierarchy_equals_ndcg():
    r = ["a1", "a", "c", "b1"]
    no_tree = evaluate_query(r, QRELS, ["hndcg@3", "ndcg@3"])
    assert no_tree["hndcg@3"] == pytest.approx(no_tree["ndcg@3"])


nodes = st.sampled_from(list(PARENT))


@given(
    st.lists(nodes, max_size=8), st.sets(nodes, min_size=1, max_size=3), st.sampled_from([1, 3, 5])
)
def test_bounds_and_at_least_binary_ndcg(ranked, rel, k):
    qrels = {r: 1 for r in rel}
    m = evaluate_query(ranked, qrels, [f"hndcg@{k}", f"ndcg@{k}"], PARENT)
    assert 0.0 <= m[f"hndcg@{k}"] <= 1.0 + 1e-12
    assert m[f"hndcg@{k}"] >= m[f"ndcg@{k}"] - 1e-12
