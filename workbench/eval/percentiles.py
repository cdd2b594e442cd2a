"""Percentiles by one definition, for every latency and score the workbench reports."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence


def percentile(values: Iterable[float], p: float) -> float:
    """The ``p``-th percentile (0-100) of ``values``; NaN when there are none.

    The project's one definition, used by eval, answer metrics and bench alike: linear
    interpolation between order statistics, numpy's default ``method="linear"``
    (Hyndman & Fan 1996, type 7; Excel's PERCENTILE.INC). p50 of [10, 20, 30, 40] is
    25.0 and p95 of 1..20 is 19.05; p50 is the ordinary median.
    """
    if not 0 <= p <= 100:
        raise ValueError(f"percentile must be within [0, 100], got {p}")
    xs = sorted(float(v) for v in values)
    if not xs:
        return math.nan
    pos = (len(xs) - 1) * p / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def latency_percentiles(
    latencies_ms: Iterable[float], percentiles: Sequence[float] = (50, 95)
) -> dict[str, float]:
    """``{"p50": ..., "p95": ...}`` by :func:`percentile`; no latencies -> 0.0 for each."""
    values = list(latencies_ms)
    out = {}
    for p in percentiles:
        label = f"p{int(p)}" if float(p).is_integer() else f"p{p}"
        value = percentile(values, p)  # checks p even when there are no values
        out[label] = value if values else 0.0
    return out
