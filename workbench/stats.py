"""Paired statistics for comparing two configurations on the same queries.

- ``paired_bootstrap_ci``: percentile bootstrap CI of the mean paired difference
  (Efron & Tibshirani 1993, ch. 13), resampling queries with replacement.
- ``randomization_test``: paired sign-flip randomization test of the mean difference
  (Fisher 1935; Smucker, Allan & Carterette, CIKM 2007 recommend it for IR). Exact
  enumeration of all 2^n sign patterns for n <= 16 non-zero differences, otherwise Monte
  Carlo with the (count + 1) / (samples + 1) estimator so p is never 0.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from workbench.metrics import percentile

EXACT_MAX_N = 16


@dataclass(frozen=True)
class PairedComparison:
    measure: str
    mean_a: float
    mean_b: float
    delta: float
    ci_low: float
    ci_high: float
    p_value: float
    wins: int  # queries where b > a
    losses: int
    ties: int

    @property
    def significant(self) -> bool:
        return self.p_value < 0.05

    def to_dict(self) -> dict[str, float | int | str | bool]:
        return {
            "measure": self.measure,
            "mean_a": self.mean_a,
            "mean_b": self.mean_b,
            "delta": self.delta,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "p_value": self.p_value,
            "wins": self.wins,
            "losses": self.losses,
            "ties": self.ties,
            "significant": self.significant,
        }


def paired_bootstrap_ci(
    diffs: Sequence[float], *, n_resamples: int = 10_000, alpha: float = 0.05, seed: int = 0
) -> tuple[float, float]:
    """(low, high) percentile-bootstrap CI of mean(diffs); (0, 0) for no data."""
    d = np.asarray(diffs, dtype=float)
    if d.size == 0:
        return 0.0, 0.0
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, d.size, size=(n_resamples, d.size))
    means = d[idx].mean(axis=1)
    return percentile(means, 100 * alpha / 2), percentile(means, 100 * (1 - alpha / 2))


def randomization_test(diffs: Sequence[float], *, n_samples: int = 20_000, seed: int = 0) -> float:
    """Two-sided p-value for H0: mean paired difference is 0."""
    d = np.asarray([x for x in diffs if x != 0.0], dtype=float)
    n = d.size
    if n == 0:
        return 1.0
    observed = abs(d.mean()) - 1e-12
    if n <= EXACT_MAX_N:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=n)))
        stats = np.abs((signs * d).mean(axis=1))
        return float((stats >= observed).sum() / len(stats))
    rng = np.random.default_rng(seed)
    signs = rng.choice((1.0, -1.0), size=(n_samples, n))
    stats = np.abs((signs * d).mean(axis=1))
    return float(((stats >= observed).sum() + 1) / (n_samples + 1))


def compare_paired(
    a: Mapping[str, Mapping[str, float]],
    b: Mapping[str, Mapping[str, float]],
    measure: str,
    *,
    seed: int = 0,
    tol: float = 1e-9,
) -> PairedComparison:
    """Compare per-query values of ``measure`` for the queries both runs share (b - a)."""
    qids = sorted(set(a) & set(b))
    va = np.array([a[q].get(measure, 0.0) for q in qids], dtype=float)
    vb = np.array([b[q].get(measure, 0.0) for q in qids], dtype=float)
    diffs = vb - va
    lo, hi = paired_bootstrap_ci(diffs, seed=seed)
    return PairedComparison(
        measure=measure,
        mean_a=float(va.mean()) if qids else 0.0,
        mean_b=float(vb.mean()) if qids else 0.0,
        delta=float(diffs.mean()) if qids else 0.0,
        ci_low=lo,
        ci_high=hi,
        p_value=randomization_test(diffs, seed=seed),
        wins=int((diffs > tol).sum()),
        losses=int((diffs < -tol).sum()),
        ties=int((np.abs(diffs) <= tol).sum()),
    )
