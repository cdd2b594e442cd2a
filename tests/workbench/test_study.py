"""The study record: the one-standard-error pick and the nested-CV selection estimate."""

from __future__ import annotations

import pytest

from workbench.tune.study import TrialRow, pick_trial, selection_estimate


def _row(n: int, folds: list[float], changes: int) -> TrialRow:
    return TrialRow(n, {}, sum(folds) / len(folds), folds, changes, 0.0)


def test_one_se_rule_prefers_fewer_changes_within_one_standard_error() -> None:
    best = _row(1, [0.9, 0.8, 0.7], changes=4)
    # shortfall per fold 0.02, 0.00, 0.01: mean 0.01 <= sd 0.01 / sqrt(3) is false
    near = _row(2, [0.88, 0.8, 0.69], changes=1)
    # shortfall 0.03, -0.03, 0.0: mean 0 <= sd / sqrt(3): within one SE
    noisy = _row(3, [0.87, 0.83, 0.7], changes=2)
    base = _row(0, [0.5, 0.5, 0.5], changes=0)
    assert pick_trial([base, best, near, noisy], 3) == (1, 3)


def test_one_se_rule_keeps_the_baseline_when_nothing_beats_it_clearly() -> None:
    base = _row(0, [0.6, 0.7, 0.8], changes=0)
    lucky = _row(1, [0.7, 0.65, 0.85], changes=3)  # +0.1, -0.05, +0.05: mean 0.033, SE 0.044
    assert pick_trial([base, lucky], 3) == (1, 0)


def test_nested_cv_estimate_chooses_on_the_other_folds() -> None:
    a = _row(0, [1.0, 0.0, 0.5], changes=0)
    b = _row(1, [0.0, 0.6, 0.3], changes=1)
    # fold 0 left out: a 0.25, b 0.45 on the others -> b, which scores 0.0 on fold 0;
    # fold 1 left out: a 0.75, b 0.15 -> a, 0.0; fold 2 left out: a 0.5, b 0.3 -> a, 0.5
    assert selection_estimate([a, b], 3) == pytest.approx((0.0 + 0.0 + 0.5) / 3)
