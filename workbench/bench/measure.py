"""What every bench stage measures with: peak RSS, load, latency percentiles, top-n overlap."""

from __future__ import annotations

import os
import resource
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from workbench.eval.percentiles import percentile

ProgressFactory = Callable[[str, int], Any]


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB (Linux reports KiB)."""
    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(kib / 1024 if sys.platform != "darwin" else kib / 1024 / 1024, 1)


def load_avg() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # pragma: no cover - not on every platform
        return []


def percentiles(values: Sequence[float]) -> dict[str, float | None]:
    """p50 and p95 of latencies in ms, by the project's one definition (percentiles.percentile)."""
    vals = list(values)
    if not vals:
        return {"p50": None, "p95": None, "n": 0}
    return {
        "p50": round(percentile(vals, 50), 3),
        "p95": round(percentile(vals, 95), 3),
        "n": len(vals),
    }


def null_bar(desc: str, total: int) -> Any:
    class _Bar:
        def update(self, n: int = 1) -> None: ...

        def close(self) -> None: ...

        def set_description_str(self, s: str) -> None: ...

        n = 0
        total_ = total

    return _Bar()


def tqdm_bar(desc: str, total: int) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="it", file=sys.stderr, leave=False, mininterval=0.5)


def top_ids(scores: np.ndarray, ids: Sequence[str], n: int, positive: bool = False) -> list[str]:
    """Best ``n`` ids by score (ties by id ascending), optionally only scores > 0."""
    idx = np.flatnonzero(scores > 0) if positive else np.arange(len(scores))
    if len(idx) == 0:
        return []
    s = scores[idx]
    if len(idx) > n:
        kth = np.partition(s, len(s) - n)[len(s) - n]
        keep = s >= kth
        idx, s = idx[keep], s[keep]
    keys = [ids[int(i)] for i in idx]
    order = sorted(range(len(idx)), key=lambda j: (-float(s[j]), keys[j]))[:n]
    return [ids[int(idx[j])] for j in order]


def stderr_line(message: str) -> None:
    """The default log of a bench: one line on stderr."""
    sys.stderr.write(message + "\n")


def overlap(a: Sequence[str], b: Sequence[str]) -> float | None:
    """|a ∩ b| / |b| (b is the reference list); None when the reference is empty."""
    if not b:
        return None
    return len(set(a) & set(b)) / len(b)


def mean_of(values: Sequence[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return round(float(np.mean(vals)), 4) if vals else None
