"""The acceptance rule at its boundaries: exact data whose randomization p-value sits just
below or just above alpha, so a rule that tests p against the wrong level (2 x alpha,
alpha / 2, <= instead of <) decides differently here and nowhere in the happy paths."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from workbench.eval.stats import EXACT_MAX_N
from workbench.tune.acceptance import decide_scores
from workbench.tune.rule import STATISTICAL

# 14 paired differences of the primary measure: a mean gain with two real losses. Small
# enough for the exact sign-flip enumeration, skewed enough that the 95% bootstrap CI
# reaches below 0 while the randomization p lies between alpha and 2 x alpha.
DIFFS = [1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.25, 0.25, 0.2, 0.1, 0.1, 0.1, -0.5, -1.0]
# Only the improvement criterion: the other ones would veto for their own reasons.
ONLY_PRIMARY = dataclasses.replace(
    STATISTICAL, sign_test=False, slice_by=(), holdout_check=False, resamples=1000
)


def _exact_two_sided_p(diffs: list[float]) -> float:
    """P(|mean of sign-flipped diffs| >= |observed mean|), every sign pattern enumerated."""
    d = [x for x in diffs if x != 0.0]
    observed = abs(sum(d)) - 1e-12
    hits = sum(
        abs(sum(s * x for s, x in zip(signs, d, strict=True))) >= observed
        for signs in itertools.product((1, -1), repeat=len(d))
    )
    return hits / 2 ** len(d)


def _runs(diffs: list[float]) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]]]:
    """Baseline and candidate per-query MRR (in [0, 1]) whose differences are ``diffs``."""
    base = {f"q{i}": {"mrr": max(0.0, -d)} for i, d in enumerate(diffs)}
    cand = {f"q{i}": {"mrr": max(0.0, d)} for i, d in enumerate(diffs)}
    return base, cand


P = _exact_two_sided_p(DIFFS)


def _improves(alpha: float) -> tuple[bool, float]:
    base, cand = _runs(DIFFS)
    decision = decide_scores(base, cand, dataclasses.replace(ONLY_PRIMARY, alpha=alpha))
    comp = decision.comparisons["mrr"]
    assert comp.p_value == pytest.approx(P, abs=1e-12)  # the engine's p is the exact one
    return decision.criteria[0].passed, comp.ci_low


def test_the_constructed_data_is_exact_and_sits_between_alpha_and_twice_alpha() -> None:
    assert len(DIFFS) <= EXACT_MAX_N
    assert sum(DIFFS) > 0
    assert 0.05 < P < 0.10  # 0.0818: "significant" only if p were read against 2 x alpha


def test_p_between_alpha_and_twice_alpha_is_not_an_improvement() -> None:
    passed, ci_low = _improves(0.05)
    assert ci_low <= 0  # the CI does not accept it either, so only the p test could
    assert not passed


def test_p_just_below_alpha_improves() -> None:
    passed, _ = _improves(P + 1e-6)
    assert passed


def test_alpha_just_above_half_the_p_value_does_not_accept() -> None:
    # At alpha a little over p / 2, reading p against 2 x alpha would accept; the CI at this
    # level is wider still, so nothing else can.
    passed, ci_low = _improves(P / 2 + 1e-6)
    assert ci_low <= 0
    assert not passed
