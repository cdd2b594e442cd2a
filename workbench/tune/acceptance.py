"""Accept or roll back: apply an AcceptanceRule to a baseline and a candidate run.

``decide(base, cand, mode, rule, holdout=...)`` works on run records; ``decide_scores`` on
per-query metric dicts, so benchmarks and tests can feed it synthetic or resampled data.
Every criterion carries its measured value and threshold, which the CLI, the UI and the
log show as they are.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from workbench.eval.measures import shown
from workbench.eval.run_record import RunRecord
from workbench.eval.stats import (
    PairedComparison,
    benjamini_hochberg,
    compare_paired,
    holm,
    randomization_test,
    sign_test,
)
from workbench.tune.criterion_words import CORRECTIONS, DETAILS, NAMES, THRESHOLDS
from workbench.tune.rule import STATISTICAL, AcceptanceRule

EPS = 1e-9
PerQuery = Mapping[str, Mapping[str, float]]


@dataclass(frozen=True)
class Criterion:
    name: str
    value: float  # nan when the criterion had nothing to measure (then it passes)
    threshold: str
    passed: bool
    detail: str = ""

    @property
    def shown(self) -> str:
        return "n/a" if math.isnan(self.value) else f"{self.value:+.4f}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "value": None if math.isnan(self.value) else self.value,
            "threshold": self.threshold,
            "passed": self.passed,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class SliceTest:
    slice: str  # "difficulty=hard"
    size: int
    delta: float  # primary measure, candidate - baseline
    p_value: float  # one-sided, H1: the slice got worse
    p_adjusted: float


@dataclass
class Decision:
    accepted: bool
    criteria: list[Criterion]
    comparisons: dict[str, PairedComparison]
    regressed: list[tuple[str, float]]  # (query id, drop in the primary measure)
    slices: dict[str, float]  # "difficulty=hard" -> delta of the primary measure
    latency_delta_ms: float
    rule: AcceptanceRule = STATISTICAL
    slice_tests: list[SliceTest] = field(default_factory=list)
    holdout: PairedComparison | None = None

    @property
    def reasons(self) -> list[str]:
        return [
            f"{c.name}: {c.shown} (needs {c.threshold})" + (f" [{c.detail}]" if c.detail else "")
            for c in self.criteria
            if not c.passed
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "accepted": self.accepted,
            "rule": self.rule.to_dict(),
            "criteria": [c.to_dict() for c in self.criteria],
            "comparisons": {k: v.to_dict() for k, v in self.comparisons.items()},
            "regressed": self.regressed,
            "slices": self.slices,
            "slice_tests": [vars(s) for s in self.slice_tests],
            "holdout": self.holdout.to_dict() if self.holdout else None,
            "latency_delta_ms": self.latency_delta_ms,
        }


def decide(
    base: RunRecord,
    cand: RunRecord,
    mode: str | None = None,
    rule: AcceptanceRule = STATISTICAL,
    *,
    holdout: tuple[RunRecord, RunRecord] | None = None,
    require_improvement: bool = True,
) -> Decision:
    """Apply ``rule`` to two runs over the same queries (cand - base), in one mode.

    ``holdout``: the (baseline, candidate) runs on the holdout split, checked only for a
    significant loss. ``require_improvement=False`` is the CI gate: the candidate must
    only not be worse (see ``gate`` in experiments.py).
    """
    mode = mode or base.modes[0]
    groups = {
        by: {r.item.id: str(getattr(r.item, by)) for r in base.for_mode(mode)}
        for by in rule.slice_by
    }
    lat = cand.latency(mode)["p50"] - base.latency(mode)["p50"]
    hold = (holdout[0].per_query(mode), holdout[1].per_query(mode)) if holdout else None
    return decide_scores(
        base.per_query(mode),
        cand.per_query(mode),
        rule,
        groups=groups,
        latency_delta_ms=lat,
        holdout=hold,
        require_improvement=require_improvement,
    )


def decide_scores(
    a: PerQuery,
    b: PerQuery,
    rule: AcceptanceRule = STATISTICAL,
    *,
    groups: Mapping[str, Mapping[str, str]] | None = None,
    latency_delta_ms: float = 0.0,
    holdout: tuple[PerQuery, PerQuery] | None = None,
    require_improvement: bool = True,
) -> Decision:
    """The decision from per-query metrics; ``groups``: field -> query id -> slice value."""
    measures = dict.fromkeys((rule.primary, *shown("headline")))
    comps = {
        m: compare_paired(a, b, m, alpha=rule.alpha, n_resamples=rule.resamples) for m in measures
    }
    p = rule.primary
    regressed = sorted(
        ((q, a[q].get(p, 0.0) - b[q].get(p, 0.0)) for q in a if q in b), key=lambda t: -t[1]
    )
    regressed = [(q, d) for q, d in regressed if d > EPS]
    slices = _slices(a, b, groups or {}, rule)
    if rule.method == "strict":
        crit = _strict(rule, comps, regressed, slices, latency_delta_ms, require_improvement)
        tests: list[SliceTest] = []
        hold = None
    else:
        tests = _slice_tests(a, b, groups or {}, rule)
        hold = (
            compare_paired(*holdout, p, alpha=rule.alpha, n_resamples=rule.resamples)
            if (holdout and rule.holdout_check)
            else None
        )
        crit = _statistical(
            rule, comps, tests, hold, holdout, latency_delta_ms, require_improvement
        )
        slices = {t.slice: t.delta for t in tests}
    return Decision(
        all(c.passed for c in crit),
        crit,
        comps,
        regressed,
        slices,
        latency_delta_ms,
        rule,
        tests,
        hold,
    )


def _latency(rule: AcceptanceRule, lat: float) -> Criterion:
    return Criterion(
        NAMES["latency"],
        lat,
        f"<= +{rule.max_latency_delta_ms:g}",
        lat <= rule.max_latency_delta_ms + EPS,
    )


def _statistical(
    rule: AcceptanceRule,
    comps: dict[str, PairedComparison],
    tests: list[SliceTest],
    hold: PairedComparison | None,
    holdout: tuple[PerQuery, PerQuery] | None,
    lat: float,
    require_improvement: bool,
) -> list[Criterion]:
    p, alpha = rule.primary, rule.alpha
    c = comps[p]
    level = f"{100 * (1 - alpha):g}%"
    detail = (
        f"Δ {c.delta:+.4f}, {level} CI [{c.ci_low:+.4f}, {c.ci_high:+.4f}], "
        f"p={_p(c.p_value)}, n={c.wins + c.losses + c.ties}"
    )
    crit = []
    if require_improvement:
        # Either test suffices: the CI is the effect-size view, the randomization test
        # the exact one; both are two-sided at alpha, so each alone falsely accepts a null
        # change at most alpha/2 of the time (bench_rule.py measures the union).
        ok = c.ci_low > 0 or (c.delta > 0 and c.p_value < alpha)
        crit.append(
            Criterion(
                NAMES["improves"].format(measure=p),
                c.ci_low,
                THRESHOLDS["improves"].format(alpha=f"{alpha:g}"),
                ok,
                detail,
            )
        )
    else:
        worse = _one_sided_worse(c)
        crit.append(
            Criterion(
                NAMES["not_worse"].format(measure=p),
                worse,
                f">= {alpha:g}",
                worse >= alpha,
                detail,
            )
        )
    if rule.sign_test:
        sp = sign_test(c.wins, c.losses)
        crit.append(
            Criterion(
                NAMES["sign_test"].format(measure=p),
                sp,
                f">= {alpha:g}",
                sp >= alpha,
                DETAILS["counts"].format(wins=c.wins, losses=c.losses, ties=c.ties),
            )
        )
    if rule.slice_by:
        crit.append(_worst_slice(rule, tests))
    crit.append(_latency(rule, lat))
    if rule.holdout_check:
        if hold is None:
            crit.append(
                Criterion(
                    NAMES["holdout"].format(measure=p),
                    math.nan,
                    f">= {alpha:g}",
                    True,
                    DETAILS["no_holdout"] if holdout is not None else DETAILS["no_holdout_run"],
                )
            )
        else:
            worse = _one_sided_worse(hold)
            crit.append(
                Criterion(
                    NAMES["holdout"].format(measure=p),
                    worse,
                    f">= {alpha:g}",
                    worse >= alpha,
                    f"{hold.mean_a:.4f} -> {hold.mean_b:.4f} (Δ {hold.delta:+.4f}, "
                    f"n={hold.wins + hold.losses + hold.ties})",
                )
            )
    return crit


def _worst_slice(rule: AcceptanceRule, tests: list[SliceTest]) -> Criterion:
    """The slice where the change looks worst, its p-value corrected for the slices tried."""
    alpha = rule.alpha
    worst = min(tests, key=lambda t: (t.p_adjusted, t.delta), default=None)
    if worst is None:
        detail = DETAILS["no_slice"].format(
            fields=", ".join(rule.slice_by), size=rule.min_slice_size
        )
    else:
        detail = DETAILS["worst_slice"].format(
            slice=worst.slice,
            delta=f"{worst.delta:+.4f}",
            size=worst.size,
            p=_p(worst.p_value),
            slices=len(tests),
            correction=CORRECTIONS[rule.correction],
        )
    return Criterion(
        NAMES["worst_slice"],
        worst.p_adjusted if worst else math.nan,
        f">= {alpha:g}",
        worst is None or worst.p_adjusted >= alpha,
        detail,
    )


def _p(p: float) -> str:
    return "<0.0001" if p < 1e-4 else f"{p:.4f}"


def _one_sided_worse(c: PairedComparison) -> float:
    """One-sided p for H1 "b is worse" from the two-sided randomization p of a symmetric test."""
    if c.wins + c.losses == 0:
        return 1.0
    return c.p_value / 2 if c.delta < 0 else 1 - c.p_value / 2


def _slice_tests(
    a: PerQuery, b: PerQuery, groups: Mapping[str, Mapping[str, str]], rule: AcceptanceRule
) -> list[SliceTest]:
    raw: list[tuple[str, int, float, float]] = []
    for by in rule.slice_by:
        members: dict[str, list[str]] = {}
        for q, g in (groups.get(by) or {}).items():
            if q in a and q in b:
                members.setdefault(g, []).append(q)
        if len(members) < 2:  # one slice is the whole set: the primary test covers it
            continue
        for g, qs in sorted(members.items()):
            if len(qs) < rule.min_slice_size:
                continue
            diffs = [b[q].get(rule.primary, 0.0) - a[q].get(rule.primary, 0.0) for q in qs]
            p = randomization_test(diffs, alternative="less", n_samples=2 * rule.resamples)
            raw.append((f"{by}={g}", len(qs), sum(diffs) / len(diffs), p))
    if not raw:
        return []
    ps = [r[3] for r in raw]
    adjust: dict[str, Callable[[list[float]], list[float]]] = {
        "holm": holm,
        "bh": benjamini_hochberg,
        "none": list,
    }
    adj = adjust[rule.correction](ps)
    return [SliceTest(s, n, d, p, pa) for (s, n, d, p), pa in zip(raw, adj, strict=True)]


def _slices(
    a: PerQuery, b: PerQuery, groups: Mapping[str, Mapping[str, str]], rule: AcceptanceRule
) -> dict[str, float]:
    """Mean delta of the primary measure per slice with >= min_slice_size queries."""
    out: dict[str, float] = {}
    for by in rule.slice_by:
        members: dict[str, list[str]] = {}
        for q, g in (groups.get(by) or {}).items():
            if q in a and q in b:
                members.setdefault(g, []).append(q)
        for g, qs in members.items():
            if len(qs) >= rule.min_slice_size:
                d = [b[q].get(rule.primary, 0.0) - a[q].get(rule.primary, 0.0) for q in qs]
                out[f"{by}={g}"] = sum(d) / len(d)
    return out


def _strict(
    rule: AcceptanceRule,
    comps: dict[str, PairedComparison],
    regressed: list[tuple[str, float]],
    slices: dict[str, float],
    lat: float,
    require_improvement: bool,
) -> list[Criterion]:
    """The reference engine's absolute thresholds (the `strict` preset)."""
    p = rule.primary
    head = comps[p].delta
    mrr, hit = comps["mrr"].delta, comps["hit@5"].delta
    worst_slice = min(slices.values(), default=0.0)
    if require_improvement:
        first = Criterion(
            NAMES["delta"].format(measure=p),
            head,
            f">= +{rule.min_primary_delta}",
            head >= rule.min_primary_delta - EPS,
        )
    else:
        first = Criterion(
            NAMES["delta"].format(measure=p),
            head,
            f">= -{rule.min_primary_delta}",
            head >= -rule.min_primary_delta - EPS,
        )
    return [
        first,
        Criterion(
            NAMES["delta"].format(measure="mrr"),
            mrr,
            f">= {rule.min_mrr_delta}",
            mrr >= rule.min_mrr_delta - EPS,
        ),
        Criterion(
            NAMES["delta"].format(measure="hit@5"),
            hit,
            f">= {rule.min_hit5_delta}",
            hit >= rule.min_hit5_delta - EPS,
        ),
        _latency(rule, lat),
        Criterion(
            NAMES["regressed"],
            float(len(regressed)),
            f"<= {rule.max_regressed_queries}",
            len(regressed) <= rule.max_regressed_queries,
        ),
        Criterion(
            NAMES["largest"],
            max((d for _, d in regressed), default=0.0),
            f"<= {rule.max_query_regression}",
            all(d <= rule.max_query_regression + EPS for _, d in regressed),
        ),
        Criterion(
            NAMES["slice_delta"].format(measure=p),
            worst_slice,
            f">= -{rule.max_slice_regression}",
            worst_slice >= -rule.max_slice_regression - EPS,
        ),
        Criterion(
            NAMES["not_worse"].format(measure="mrr"),
            comps["mrr"].p_value,
            THRESHOLDS["not_worse_or_gain"].format(alpha=rule.alpha),
            mrr >= 0 or comps["mrr"].p_value >= rule.alpha,
        ),
    ]
