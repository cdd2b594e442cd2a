"""The statistical acceptance rule: calibrated on null changes, powered on real effects."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy.stats import binom

from workbench.tune.acceptance import decide_scores
from workbench.tune.rule import STATISTICAL, STRICT

FAST = dataclasses.replace(STATISTICAL, resamples=1000)
N = 700


def _ranks(rng: np.random.Generator, n: int = N) -> np.ndarray:
    """Rank of the one relevant chapter: 70% at 1, the rest spread over 2..20."""
    return np.where(rng.random(n) < 0.7, 1, rng.integers(2, 21, size=n))


def _jitter(rng: np.random.Generator, r: np.ndarray) -> np.ndarray:
    """A small rank perturbation with zero expected effect, applied to each arm independently."""
    return np.maximum(1, r + rng.choice([-1, 0, 0, 0, 1], size=r.size))


def _pq(ranks: np.ndarray) -> dict[str, dict[str, float]]:
    return {f"q{i}": {"mrr": 1.0 / r} for i, r in enumerate(ranks)}


def _groups(rng: np.random.Generator, n: int = N) -> dict[str, dict[str, str]]:
    return {
        "difficulty": {
            f"q{i}": str(g) for i, g in enumerate(rng.choice(["easy", "medium", "hard"], n))
        },
        "category": {f"q{i}": f"c{g}" for i, g in enumerate(rng.integers(0, 6, n))},
    }


def _null_pair(seed: int):
    rng = np.random.default_rng(seed)
    r = _ranks(rng)
    return _pq(_jitter(rng, r)), _pq(_jitter(rng, r)), _groups(rng)


def test_false_accept_rate_on_null_changes_is_at_most_alpha():
    runs = 200
    accepted = 0
    for seed in range(runs):
        a, b, groups = _null_pair(seed)
        hold_a, hold_b, _ = _null_pair(10_000 + seed)
        d = decide_scores(a, b, FAST, groups=groups, holdout=(hold_a, hold_b))
        accepted += d.accepted
    # the true rate must be <= alpha: reject only if the count is implausible at alpha
    slack = binom.ppf(0.999, runs, FAST.alpha)
    assert accepted <= slack, f"{accepted}/{runs} null changes accepted"


def test_real_effect_of_plus_005_mrr_on_700_queries_is_accepted():
    hits, deltas = 0, []
    for seed in range(30):
        rng = np.random.default_rng(seed)
        r = _ranks(rng)
        base = _jitter(rng, r)
        cand = _jitter(rng, r)
        fixed = (rng.random(N) < 0.22) & (r > 1)  # the change puts these at rank 1
        cand = np.where(fixed, 1, cand)
        a, b = _pq(base), _pq(cand)
        deltas.append(np.mean([b[q]["mrr"] - a[q]["mrr"] for q in a]))
        hits += decide_scores(a, b, FAST, groups=_groups(rng)).accepted
    assert 0.04 < np.mean(deltas) < 0.06
    assert hits >= 28, f"power {hits}/30"


def _fixed(n_win: int, n_loss: int, n_tie: int, size: float = 1.0):
    a, b = {}, {}
    for i in range(n_win + n_loss + n_tie):
        a[f"q{i}"] = {"mrr": 0.5}
        d = size if i < n_win else (-size if i < n_win + n_loss else 0.0)
        b[f"q{i}"] = {"mrr": 0.5 + d / 2}
    return a, b


def test_four_losses_in_757_queries_do_not_veto_a_significant_win():
    a, b = _fixed(14, 4, 739)
    d = decide_scores(a, b, FAST)
    assert d.accepted, d.reasons
    assert not decide_scores(a, b, STRICT).accepted  # the absolute count rejected it


def test_sign_test_rejects_many_small_losses_behind_a_mean_gain():
    # 30 big wins carry the mean, 80 small losses: the mean improves, most changes are losses
    a, b = {}, {}
    for i in range(300):
        a[f"q{i}"] = {"mrr": 0.5}
        b[f"q{i}"] = {"mrr": 0.5 + (0.5 if i < 30 else (-0.05 if i < 110 else 0.0))}
    d = decide_scores(a, b, FAST)
    failed = [c.name for c in d.criteria if not c.passed]
    assert failed == ["sign test: losses > wins on mrr (p)"], d.reasons


def test_harmful_change_is_rejected():
    a, b = _fixed(3, 40, 700)
    d = decide_scores(a, b, FAST)
    assert not d.accepted
    assert any(r.startswith("mrr improves") for r in d.reasons)


def test_slice_significantly_worse_vetoes_after_holm():
    a, b = _fixed(120, 0, 380, size=0.5)
    groups = {"difficulty": {q: ("hard" if i >= 440 else "easy") for i, q in enumerate(a)}}
    for q in list(a)[440:]:  # the 60 hard queries all lose
        b[q] = {"mrr": 0.3}
    d = decide_scores(a, b, FAST, groups=groups)
    slice_crit = next(c for c in d.criteria if c.name.startswith("worst slice"))
    assert not slice_crit.passed and "difficulty=hard" in slice_crit.detail
    assert d.slice_tests[0].p_adjusted >= d.slice_tests[0].p_value  # corrected, never smaller


def test_small_slices_are_not_tested():
    a, b = _fixed(60, 0, 200)
    groups = {"category": {q: ("tiny" if i < 5 else "big") for i, q in enumerate(a)}}
    d = decide_scores(a, b, dataclasses.replace(FAST, min_slice_size=20), groups=groups)
    assert [t.slice for t in d.slice_tests] == ["category=big"]


def test_holdout_significantly_worse_vetoes_and_missing_holdout_is_shown():
    a, b = _fixed(60, 0, 200)
    ha, hb = _fixed(0, 30, 50)
    d = decide_scores(a, b, FAST, holdout=(ha, hb))
    assert [c.name for c in d.criteria if not c.passed] == [
        "holdout mrr not significantly worse (p)"
    ]
    d = decide_scores(a, b, FAST)
    hold = next(c for c in d.criteria if c.name.startswith("holdout"))
    assert hold.passed and math.isnan(hold.value) and hold.shown == "n/a"


def test_latency_guard():
    a, b = _fixed(60, 0, 200)
    d = decide_scores(a, b, FAST, latency_delta_ms=100.5)
    assert [c.name for c in d.criteria if not c.passed] == ["latency p50 delta (ms)"]


def test_gate_asks_only_not_worse():
    a, _ = _fixed(0, 0, 200)
    assert decide_scores(a, a, FAST, require_improvement=False).accepted
    assert not decide_scores(a, a, FAST).accepted  # no improvement, no accept
    a, b = _fixed(2, 30, 200)
    d = decide_scores(a, b, FAST, require_improvement=False)
    assert "mrr not significantly worse (p)" in [c.name for c in d.criteria if not c.passed]


@pytest.mark.parametrize("primary", ["ndcg@10", "recall@5"])
def test_primary_measure_is_configurable(primary):
    a = {f"q{i}": {"mrr": 0.5, primary: 0.5} for i in range(200)}
    b = {f"q{i}": {"mrr": 0.5, primary: 1.0 if i < 60 else 0.5} for i in range(200)}
    d = decide_scores(a, b, dataclasses.replace(FAST, primary=primary))
    assert d.accepted and d.criteria[0].name == f"{primary} improves (CI low)"
    assert not decide_scores(a, b, FAST).accepted  # mrr did not move
