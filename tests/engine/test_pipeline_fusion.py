"""Fusion methods (rrf, convex minmax/zscore/tmm, dbsf) against ranx.fuse and reference formulas.

ranx (dev extra) is the oracle where it has the method: rrf, wsum over "min-max" and
"zmuv" runs. It has no theoretical min-max: tmm is checked through ranx's min-max on runs
with a sentinel document at the theoretical lower bound (min-max then divides by
max - lb). It has no DBSF either: that is checked against a straightforward reference
written here from Qdrant's definition (statistics.stdev, clip to [0, 1]).
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence

import pytest

from engine.config import EngineConfig
from engine.errors import ConfigError
from engine.fusion import THEORETICAL_MIN, normalize, rrf, score_fusion
from engine.pipeline import Candidates, fuse

ranx = pytest.importorskip("ranx", reason="ranx is the fusion oracle: pip install -e '.[dev]'")

Channel = list[tuple[str, float]]


def _random_queries(seed: int, n: int = 40) -> list[tuple[Channel, Channel]]:
    """Per query: a cosine channel in [-1, 1] and a BM25 channel in [0, 25], best first,
    overlapping ids, lengths 1..30 (distinct scores, so the order is unambiguous)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        docs = [f"d{i:03d}" for i in range(60)]
        vec_ids = rng.sample(docs, rng.randint(1, 30))
        bm_ids = rng.sample(docs, rng.randint(1, 30))
        vec = sorted(((d, rng.uniform(-1.0, 1.0)) for d in vec_ids), key=lambda p: -p[1])
        bm = sorted(((d, rng.uniform(0.0, 25.0)) for d in bm_ids), key=lambda p: -p[1])
        out.append((vec, bm))
    return out


def _cfg(**fusion: object) -> EngineConfig:
    base = {"fusion.method": "rrf", "fusion.vector_weight": 1.0, "fusion.bm25_weight": 1.0}
    return EngineConfig().with_overrides({**base, **{f"fusion.{k}": v for k, v in fusion.items()}})


def _ours(vec: Channel, bm: Channel, cfg: EngineConfig) -> list[tuple[str, float]]:
    cands = Candidates("q", vector=tuple(vec), bm25=tuple(bm), pool=200)
    return fuse(cands, cfg, "hybrid", pool=200)


def _run(per_query: Sequence[Channel]) -> ranx.Run:
    return ranx.Run.from_dict({f"q{i}": dict(ch) for i, ch in enumerate(per_query)})


def _assert_same(ours: list[tuple[str, float]], theirs: dict[str, float]) -> None:
    """Same documents, scores within 1e-9, and our order is theirs (ties by id)."""
    assert {n for n, _ in ours} == set(theirs)
    for nid, s in ours:
        assert s == pytest.approx(theirs[nid], abs=1e-9), nid
    expected = sorted(theirs, key=lambda n: (-round(theirs[n], 9), n))
    assert [n for n, _ in ours] == expected


def _ranx_fused(
    queries: list[tuple[Channel, Channel]], norm: str | None, method: str, params: dict
) -> dict[str, dict[str, float]]:
    runs = [_run([v for v, _ in queries]), _run([b for _, b in queries])]
    return ranx.fuse(runs, norm=norm, method=method, params=params).to_dict()


@pytest.mark.parametrize("k", [0, 1, 60])
def test_rrf_equal_weights_matches_ranx_rrf(k: int) -> None:
    queries = _random_queries(seed=k)
    theirs = _ranx_fused(queries, None, "rrf", {"k": k})
    cfg = _cfg(method="rrf", k=float(k))
    for i, (vec, bm) in enumerate(queries):
        _assert_same(_ours(vec, bm, cfg), theirs[f"q{i}"])


@pytest.mark.parametrize("weights", [(1.0, 3.0), (0.2, 0.8), (2.5, 0.5)])
def test_weighted_rrf_matches_ranx_rrf_per_channel_then_wsum(
    weights: tuple[float, float],
) -> None:
    from ranx.fusion import rrf as ranx_rrf
    from ranx.fusion import wsum as ranx_wsum

    queries = _random_queries(seed=7)
    per_channel = [
        ranx_rrf([_run([v for v, _ in queries])], k=60),
        ranx_rrf([_run([b for _, b in queries])], k=60),
    ]
    theirs = ranx_wsum(per_channel, weights=list(weights)).to_dict()
    cfg = _cfg(method="rrf", vector_weight=weights[0], bm25_weight=weights[1])
    for i, (vec, bm) in enumerate(queries):
        _assert_same(_ours(vec, bm, cfg), theirs[f"q{i}"])


@pytest.mark.parametrize(("ours_norm", "ranx_norm"), [("minmax", "min-max"), ("zscore", "zmuv")])
@pytest.mark.parametrize("weights", [(1.0, 1.0), (0.3, 0.7), (1.0, 9.0), (4.0, 0.0)])
def test_convex_matches_ranx_wsum(
    ours_norm: str, ranx_norm: str, weights: tuple[float, float]
) -> None:
    queries = _random_queries(seed=11)
    total = sum(weights)
    unit = [w / total for w in weights]  # our convex weights are scaled to sum 1
    theirs = _ranx_fused(queries, ranx_norm, "wsum", {"weights": unit})
    cfg = _cfg(
        method="convex",
        normalization=ours_norm,
        vector_weight=weights[0],
        bm25_weight=weights[1],
    )
    for i, (vec, bm) in enumerate(queries):
        _assert_same(_ours(vec, bm, cfg), theirs[f"q{i}"])


@pytest.mark.parametrize("weights", [(1.0, 1.0), (0.2, 0.8)])
def test_convex_tmm_matches_ranx_min_max_with_a_lower_bound_sentinel(
    weights: tuple[float, float],
) -> None:
    queries = _random_queries(seed=5)
    sentinel = "__lower_bound__"
    runs = [
        _run([[*v, (sentinel, THEORETICAL_MIN["vector"])] for v, _ in queries]),
        _run([[*b, (sentinel, THEORETICAL_MIN["bm25"])] for _, b in queries]),
    ]
    unit = [w / sum(weights) for w in weights]
    fused = ranx.fuse(runs, norm="min-max", method="wsum", params={"weights": unit}).to_dict()
    cfg = _cfg(
        method="convex", normalization="tmm", vector_weight=weights[0], bm25_weight=weights[1]
    )
    for i, (vec, bm) in enumerate(queries):
        theirs = {n: s for n, s in fused[f"q{i}"].items() if n != sentinel}
        _assert_same(_ours(vec, bm, cfg), theirs)


def _dbsf_reference(channel: Channel) -> dict[str, float]:
    """Qdrant's DBSF normalisation, written out independently of engine.pipeline."""
    scores = [s for _, s in channel]
    if len(scores) < 2 or statistics.stdev(scores) == 0:
        return {n: 0.5 for n, _ in channel}
    mu, sigma = statistics.fmean(scores), statistics.stdev(scores)
    lo, hi = mu - 3 * sigma, mu + 3 * sigma
    return {n: min(1.0, max(0.0, (s - lo) / (hi - lo))) for n, s in channel}


@pytest.mark.parametrize("weights", [(1.0, 1.0), (0.1, 0.9), (3.0, 1.0)])
def test_dbsf_matches_reference_formula(weights: tuple[float, float]) -> None:
    wv, wb = (w / sum(weights) for w in weights)
    for vec, bm in _random_queries(seed=3, n=60):
        nv, nb = _dbsf_reference(vec), _dbsf_reference(bm)
        theirs = {n: wv * nv.get(n, 0.0) + wb * nb.get(n, 0.0) for n in {*nv, *nb}}
        cfg = _cfg(method="dbsf", vector_weight=weights[0], bm25_weight=weights[1])
        _assert_same(_ours(vec, bm, cfg), theirs)


def test_dbsf_clips_outliers_to_one() -> None:
    # One far outlier among many equal-ish scores lies beyond mean + 3 std -> clipped to 1.
    scores = [100.0] + [1.0 + i * 1e-3 for i in range(30)]
    normed = normalize(scores, "dbsf")
    assert normed[0] == 1.0
    assert all(0.0 <= x <= 1.0 for x in normed)


def test_ties_break_by_node_id_whatever_the_channel_order() -> None:
    vec = [("b", 0.5), ("a", 0.5)]
    bm = [("a", 2.0), ("b", 2.0)]
    for how in ("minmax", "zscore", "tmm", "dbsf"):
        one = score_fusion({"vector": vec, "bm25": bm}, {"vector": 1, "bm25": 1}, how)
        two = score_fusion({"bm25": bm, "vector": vec}, {"vector": 1, "bm25": 1}, how)
        assert one == two
        assert [n for n, _ in one] == ["a", "b"]
    assert [n for n, _ in rrf({"v": ["b", "a"], "l": ["a", "b"]}, {}, 60)] == ["a", "b"]


def test_empty_channels_and_zero_weights_fuse_without_error() -> None:
    assert score_fusion({"vector": [], "bm25": []}, {}, "minmax") == []
    only_bm = score_fusion({"vector": [], "bm25": [("a", 3.0), ("b", 1.0)]}, {}, "tmm")
    assert only_bm == [("a", 0.5), ("b", pytest.approx(0.5 / 3))]
    zero = score_fusion(
        {"vector": [("a", 0.1)], "bm25": [("b", 1.0)]}, {"vector": 0, "bm25": 0}, "zscore"
    )
    assert zero == [("a", 0.0), ("b", 0.0)]


def test_switching_method_is_one_key_and_bad_values_are_one_line_errors() -> None:
    assert EngineConfig().fusion.method == "dbsf"  # by measurement: docs/benchmarks.md
    cfg = EngineConfig().with_overrides({"fusion.method": "rrf"})
    assert cfg.fusion.method == "rrf" and cfg.hash != EngineConfig().hash
    with pytest.raises(ConfigError, match=r"fusion\.method must be one of rrf, convex, dbsf"):
        EngineConfig().with_overrides({"fusion.method": "combsum"})
    with pytest.raises(ConfigError, match=r"fusion\.normalization must be one of"):
        EngineConfig().with_overrides({"fusion.normalization": "max"})


def test_fusion_method_changes_the_hybrid_order_only() -> None:
    vec = [("a", 0.9), ("b", 0.2), ("c", 0.1)]
    bm = [("c", 30.0), ("b", 29.0), ("a", 1.0)]
    cands = Candidates("q", vector=tuple(vec), bm25=tuple(bm), pool=200)
    orders = {
        m: [
            n
            for n, _ in fuse(
                cands,
                _cfg(method=m, **({"normalization": "minmax"} if m == "convex" else {})),
                "hybrid",
                10,
            )
        ]
        for m in ("rrf", "convex", "dbsf")
    }
    # rrf: a and c both 1/61 + 1/63 (tie, by id) > b 2/62.
    assert orders["rrf"] == ["a", "c", "b"]
    # convex minmax 1:1: b 0.5 * (0.125 + 28/29) = 0.545 > a 0.5 = c 0.5 (tie, by id).
    assert orders["convex"] == ["b", "a", "c"]
    for m in ("rrf", "convex", "dbsf"):
        assert fuse(cands, _cfg(method=m), "keyword", 10) == bm
        assert fuse(cands, _cfg(method=m), "vector", 10) == vec
