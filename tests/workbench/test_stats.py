import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from workbench.eval.stats import compare_paired, paired_bootstrap_ci, randomization_test


def test_randomization_exact_known_p():
    # 4 positive differences of equal size: only the all-plus and all-minus patterns
    # reach |mean| >= observed, so p = 2 / 2**4 exactly.
    assert randomization_test([0.5, 0.5, 0.5, 0.5]) == pytest.approx(2 / 16)


def test_randomization_exact_mixed_case():
    # diffs (1, 2, 3): |mean| >= 2 only for (+,+,+) and (-,-,-); (+,+,-)=0, (-,+,+)=4/3 ...
    d = [1.0, 2.0, 3.0]
    signs = [(a, b, c) for a in (1, -1) for b in (1, -1) for c in (1, -1)]
    expected = sum(abs(np.mean(np.multiply(s, d))) >= 2.0 - 1e-12 for s in signs) / 8
    assert randomization_test(d) == pytest.approx(expected) == pytest.approx(2 / 8)


def test_randomization_zero_diffs_is_one():
    assert randomization_test([0.0, 0.0]) == 1.0
    assert randomization_test([]) == 1.0


def test_randomization_monte_carlo_never_zero():
    p = randomization_test([1.0] * 40, n_samples=2000, seed=1)
    assert 0 < p <= 1 / 2000 + 1e-12 + 1 / 2001


def test_bootstrap_fixed_seed_reproducible_and_brackets_mean():
    d = [0.1, 0.0, 0.2, -0.1, 0.3, 0.0, 0.1]
    lo, hi = paired_bootstrap_ci(d, seed=7)
    assert (lo, hi) == paired_bootstrap_ci(d, seed=7)
    assert lo <= np.mean(d) <= hi
    # constant differences: the CI collapses onto the constant
    assert paired_bootstrap_ci([0.25] * 10) == pytest.approx((0.25, 0.25))


def test_bootstrap_matches_numpy_reference():
    d = np.array([0.1, 0.0, 0.2, -0.1, 0.3])
    rng = np.random.default_rng(3)
    idx = rng.integers(0, 5, size=(10_000, 5))
    ref = np.quantile(d[idx].mean(axis=1), [0.025, 0.975])
    assert paired_bootstrap_ci(d, seed=3) == pytest.approx(tuple(ref))


def test_compare_paired_wins_losses_ties():
    a = {"q1": {"m": 0.0}, "q2": {"m": 1.0}, "q3": {"m": 0.5}, "q4": {"m": 0.5}}
    b = {"q1": {"m": 1.0}, "q2": {"m": 0.0}, "q3": {"m": 1.0}, "q4": {"m": 0.5}}
    c = compare_paired(a, b, "m")
    assert (c.wins, c.losses, c.ties) == (2, 1, 1)
    assert c.delta == pytest.approx((1 - 1 + 0.5 + 0) / 4)
    assert c.mean_a == pytest.approx(0.5) and c.mean_b == pytest.approx(0.625)


@given(st.lists(st.floats(-1, 1, allow_nan=False), min_size=1, max_size=12))
def test_p_value_in_unit_interval(diffs):
    assert 0.0 <= randomization_test(diffs) <= 1.0


def test_randomization_one_sided_halves_the_symmetric_two_sided_p():
    d = [0.5, 0.5, 0.5, 0.5]
    assert randomization_test(d, alternative="greater") == pytest.approx(1 / 16)
    assert randomization_test(d, alternative="less") == pytest.approx(1.0)


def test_sign_test_one_sided_exact():
    from workbench.eval.stats import sign_test

    assert sign_test(0, 3) == pytest.approx(1 / 8)  # P(3 losses of 3 | fair coin)
    assert sign_test(14, 4) > 0.99 and sign_test(0, 0) == 1.0


def test_holm_and_bh_adjustments_match_hand_computation():
    from workbench.eval.stats import benjamini_hochberg, holm

    p = [0.01, 0.04, 0.03]
    assert holm(p) == pytest.approx([0.03, 0.06, 0.06])
    assert benjamini_hochberg(p) == pytest.approx([0.03, 0.04, 0.04])
