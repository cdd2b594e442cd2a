from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.config import EngineConfig
from engine.fusion import rrf
from engine.pipeline import Candidates, fuse, inject_children, pool_size, rank, rerank_order

# The first release's fusion (weighted RRF 1:1): these tests are about RRF, not the default.
RRF11 = EngineConfig().with_overrides(
    {"fusion.method": "rrf", "fusion.vector_weight": 1.0, "fusion.bm25_weight": 1.0}
)


def _cands(vector: list[str], bm25: list[str]) -> Candidates:
    return Candidates(
        query="q",
        vector=tuple((n, 1.0 - i / 100) for i, n in enumerate(vector)),
        bm25=tuple((n, 10.0 - i) for i, n in enumerate(bm25)),
        pool=50,
    )


def test_rrf_hand_computed_sums() -> None:
    out = dict(
        rrf({"vector": ["a", "b", "c"], "bm25": ["c", "x", "a"]}, {"vector": 2, "bm25": 1}, 60)
    )
    assert out["a"] == 2 / (60 + 1) + 1 / (60 + 3)
    assert out["c"] == 2 / (60 + 3) + 1 / (60 + 1)
    assert out["b"] == 2 / (60 + 2)
    assert out["x"] == 1 / (60 + 2)


def test_rrf_order_ties_weights_and_duplicates() -> None:
    out = rrf({"vector": ["b", "a"], "bm25": ["a", "b"]}, {"vector": 1, "bm25": 1}, 60)
    assert [n for n, _ in out] == ["a", "b"]  # equal sums: id ascending
    assert rrf({"vector": ["a"], "bm25": ["b"]}, {"vector": 0, "bm25": 1}, 60) == [("b", 1 / 61)]
    # A repeated id counts once, at its first rank; the next id takes rank 2.
    assert dict(rrf({"v": ["a", "a", "b"]}, {"v": 1}, 0)) == {"a": 1.0, "b": 0.5}
    with pytest.raises(ValueError):
        rrf({"v": ["a"]}, {"v": 1}, -1)


ids = st.lists(st.sampled_from("abcdefghij"), max_size=8, unique=True)


@given(ids, ids, st.floats(0, 5), st.floats(0, 5), st.floats(0, 100))
def test_rrf_independent_of_channel_order(v: list, b: list, wv: float, wb: float, k: float) -> None:
    w = {"vector": wv, "bm25": wb}
    one = rrf({"vector": v, "bm25": b}, w, k)
    two = rrf({"bm25": b, "vector": v}, w, k)
    assert [n for n, _ in one] == [n for n, _ in two]
    assert [s for _, s in one] == pytest.approx([s for _, s in two], rel=1e-12)


def test_fuse_modes_and_pool_cut() -> None:
    cfg = RRF11
    c = _cands(["a", "b", "c"], ["c", "d"])
    assert [n for n, _ in fuse(c, cfg, "vector", 2)] == ["a", "b"]
    assert [n for n, _ in fuse(c, cfg, "keyword", 5)] == ["c", "d"]
    hybrid = dict(fuse(c, cfg, "hybrid", 2))
    assert set(hybrid) == {"a", "b", "c", "d"}
    assert hybrid["c"] == 1 / (60 + 1)  # vector rank 3 is cut by the pool of 2
    with pytest.raises(ValueError):
        fuse(c, cfg, "fuzzy", 2)


def test_pool_size() -> None:
    cfg = EngineConfig()
    assert pool_size(cfg, 10, use_rerank=False) == 30
    assert pool_size(cfg, 10, use_rerank=True) == 40


def test_rerank_merge_hand_computed() -> None:
    cfg = RRF11.with_overrides({"rerank.weight": 0.5, "rerank.max_candidates": 2})
    fused = [("a", 0.04), ("b", 0.02), ("c", 0.01)]
    out = rerank_order(fused, {"a": 0.1, "b": 0.9}, cfg)
    # final = 0.5 * rerank + 0.5 * fused / top fused (0.04)
    assert out[0] == ("b", pytest.approx(0.5 * 0.9 + 0.5 * 0.5), 0.9)
    assert out[1] == ("a", pytest.approx(0.5 * 0.1 + 0.5 * 1.0), 0.1)
    # "c" is past max_candidates: below the head, no rerank score.
    assert out[2][0] == "c" and out[2][2] is None and out[2][1] < out[1][1]


def test_rank_with_rerank_sets_ranks() -> None:
    cfg = RRF11
    c = _cands(["a", "b"], ["b", "c"])
    ranked = rank(c, cfg, top_k=3, mode="hybrid", rerank_scores={"a": 0.2, "b": 0.1, "c": 0.9})
    assert [r.node_id for r in ranked] == ["c", "a", "b"]
    assert [r.rerank_rank for r in ranked] == [1, 2, 3]
    assert ranked[0].bm25_rank == 2 and ranked[0].vector_rank is None
    assert ranked[0].fusion_rank == 3


def test_injection_discount_and_cut() -> None:
    cfg = EngineConfig().with_overrides({"injection.enabled": True})
    children = {"p": ["c1", "c2", "c3"], "q": ["c9"]}
    c = _cands(["p", "q", "x"], ["p", "x"])
    ranked = rank(
        c,
        cfg,
        top_k=4,
        mode="hybrid",
        rerank_scores={"p": 0.9, "q": 0.5, "x": 0.3},
        children_of=lambda n: children.get(n, []),
    )
    assert [r.node_id for r in ranked] == ["p", "c1", "c2", "q"]
    p = ranked[0]
    assert ranked[1].score == pytest.approx(p.score * 0.5)
    assert ranked[1].injected_from == "p" and ranked[1].fusion_rank is None
    # "q" scored 0.5 < min_score 0.8: no child of q injected.
    assert "c9" not in [r.node_id for r in ranked]


def test_injection_skips_children_already_present_and_never_above_parent() -> None:
    from engine.pipeline import Ranked

    cfg = EngineConfig().with_overrides({"injection.enabled": True, "injection.discount": 1.0})
    items = [Ranked("p", 2.0, 1, 1, 1, 1, 0.95), Ranked("c1", 1.0, 2, 2, 2, 2, 0.1)]
    out = inject_children(items, cfg, lambda n: ["c1", "c2"] if n == "p" else [], 5)
    assert [r.node_id for r in out] == ["p", "c2", "c1"]
    assert out[1].score <= out[0].score


def test_without_rerank_no_injection() -> None:
    cfg = EngineConfig().with_overrides({"injection.enabled": True})
    ranked = rank(
        _cands(["p"], ["p"]),
        cfg,
        top_k=3,
        mode="hybrid",
        rerank_scores=None,
        children_of=lambda n: ["c1"],
    )
    assert [r.node_id for r in ranked] == ["p"]
