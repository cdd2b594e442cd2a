"""Paired statistics for comparing two configurations on the same queries.

- ``paired_bootstrap_ci``: percentile bootstrap CI of the mean paired difference
  (Efron & Tibshirani 1993, ch. 13), resampling queries with replacement.
- ``randomization_test``: paired sign-flip randomization test of the mean difference
  (Fisher 1935; Smucker, Allan & Carterette, CIKM 2007 recommend it for IR). Exact
  enumeration of all 2^n sign patterns for n <= 16 non-zero differences, otherwise Monte
  Carlo with the (count + 1) / (samples + 1) estimator so p is never 0.
- ``sign_test``: exact one-sided binomial test that losses outnumber wins (ties dropped).
- ``holm`` / ``benjamini_hochberg``: adjusted p-values for a family of tests.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from workbench.eval.percentiles import percentile

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
    if np.all(d == d[0]):  # every resample has the same mean
        return float(d[0]), float(d[0])
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, d.size, size=(n_resamples, d.size))
    means = d[idx].mean(axis=1)
    return percentile(means, 100 * alpha / 2), percentile(means, 100 * (1 - alpha / 2))


def randomization_test(
    diffs: Sequence[float],
    *,
    n_samples: int = 20_000,
    seed: int = 0,
    alternative: str = "two-sided",
) -> float:
    """p-value for H0: mean paired difference is 0.

    ``alternative``: "two-sided", "greater" (H1: mean > 0) or "less" (H1: mean < 0).
    """
    if alternative not in ("two-sided", "greater", "less"):
        raise ValueError(f"alternative must be two-sided, greater or less, not {alternative!r}")
    d = np.asarray([x for x in diffs if x != 0.0], dtype=float)
    n = d.size
    if n == 0:
        return 1.0

    def stat(m: np.ndarray) -> np.ndarray:
        return {"two-sided": np.abs(m), "greater": m, "less": -m}[alternative]

    observed = float(stat(np.array(d.mean()))) - 1e-12
    if n <= EXACT_MAX_N:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=n)))
        stats = stat((signs * d).mean(axis=1))
        return float((stats >= observed).sum() / len(stats))
    rng = np.random.default_rng(seed)
    signs = rng.choice((1.0, -1.0), size=(n_samples, n))
    stats = stat((signs * d).mean(axis=1))
    return float(((stats >= observed).sum() + 1) / (n_samples + 1))


def sign_test(wins: int, losses: int) -> float:
    """One-sided exact binomial p-value for H1: losses are more likely than wins (ties dropped)."""
    from scipy.stats import binomtest

    n = wins + losses
    if n == 0:
        return 1.0
    return float(binomtest(losses, n, 0.5, alternative="greater").pvalue)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm (1979) step-down adjusted p-values: family-wise error control, any dependence."""
    p = np.asarray(pvalues, dtype=float)
    m = p.size
    order = np.argsort(p)
    adj = np.empty(m)
    running = 0.0
    for i, j in enumerate(order):
        running = max(running, min(1.0, (m - i) * p[j]))
        adj[j] = running
    return [float(x) for x in adj]


def benjamini_hochberg(pvalues: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg (1995) step-up adjusted p-values (false discovery rate)."""
    p = np.asarray(pvalues, dtype=float)
    m = p.size
    order = np.argsort(p)[::-1]
    adj = np.empty(m)
    running = 1.0
    for i, j in enumerate(order):
        running = min(running, p[j] * m / (m - i))
        adj[j] = running
    return [float(x) for x in adj]


def compare_paired(
    a: Mapping[str, Mapping[str, float]],
    b: Mapping[str, Mapping[str, float]],
    measure: str,
    *,
    seed: int = 0,
    tol: float = 1e-9,
    alpha: float = 0.05,
    n_resamples: int = 10_000,
) -> PairedComparison:
    """Compare per-query values of ``measure`` for the queries both runs share (b - a)."""
    qids = sorted(set(a) & set(b))
    va = np.array([a[q].get(measure, 0.0) for q in qids], dtype=float)
    vb = np.array([b[q].get(measure, 0.0) for q in qids], dtype=float)
    diffs = vb - va
    lo, hi = paired_bootstrap_ci(diffs, seed=seed, alpha=alpha, n_resamples=n_resamples)
    return PairedComparison(
        measure=measure,
        mean_a=float(va.mean()) if qids else 0.0,
        mean_b=float(vb.mean()) if qids else 0.0,
        delta=float(diffs.mean()) if qids else 0.0,
        ci_low=lo,
        ci_high=hi,
        p_value=randomization_test(diffs, seed=seed, n_samples=2 * n_resamples),
        wins=int((diffs > tol).sum()),
        losses=int((diffs < -tol).sum()),
        ties=int((np.abs(diffs) <= tol).sum()),
    )
