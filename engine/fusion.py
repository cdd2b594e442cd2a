"""Fusion methods as values: one registry of methods and one of normalisations.

``FUSIONS`` maps a ``fusion.method`` name to a ``FusionMethod`` (its function and the
``fusion.*`` keys it reads beyond the two weights); ``NORMALIZATIONS`` maps a
``fusion.normalization`` name to its function. The config's validation
(``engine/config.py``), the pipeline's dispatch (``engine.pipeline.fuse``) and the
optimizer's space (``workbench/tune/search_space.py``) all read these, so a method
registered here is accepted, run and searched with no other change.

Fusion methods (``fusion.method``), over the two channels each cut to the candidate pool:

- ``rrf``: sum_c w_c / (k + rank_c(d)); raw weights (today's behaviour, unchanged).
- ``convex``: sum_c w_c * norm_c(s_c(d)) with the weights scaled to sum 1 (Bruch et al.
  2023's convex combination; scaling changes no order, it keeps minmax/tmm scores in
  [0, 1]). ``fusion.normalization`` picks norm_c, per query and channel, as ranx does:
  ``minmax`` (s - min) / max(max - min, 1e-9) over the channel's pool (ranx "min-max");
  ``zscore`` (s - mean) / max(std, 1e-9), population std (ranx "zmuv"); ``tmm``
  theoretical min-max (s - lb) / max(max - lb, 1e-9) with lb = -1 for cosine (the true
  lower bound of unit vectors) and lb = 0 for BM25, max = the observed top score.
  A document missing from a channel's pool contributes 0 for that channel, after
  normalisation, exactly as ranx's ``wsum`` (so under zscore it counts as an average
  document, under minmax/tmm as the channel's floor).
- ``dbsf``: Qdrant's distribution-based score fusion: per channel, (s - (mu - 3 sigma)) /
  (6 sigma) clipped to [0, 1], sigma the sample std (n - 1, as qdrant-client); a channel of
  one document or of equal scores (sigma 0) normalises to 0.5; missing documents
  contribute 0; weighted sum with weights scaled to sum 1 (Qdrant's is 1:1).

Ties are broken by node id ascending everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

Channels = Mapping[str, Sequence[tuple[str, float]]]  # channel -> (node id, score), best first


class FusionParams(Protocol):
    """The ``fusion`` config section as a method sees it (``FusionConfig`` satisfies it)."""

    @property
    def k(self) -> float: ...

    @property
    def normalization(self) -> str: ...


def rrf(
    channels: Mapping[str, Sequence[str]], weights: Mapping[str, float], k: float
) -> list[tuple[str, float]]:
    """Weighted reciprocal rank fusion: score(d) = sum_i w_i / (k + rank_i(d)), ranks 1-based.

    Cormack, Clarke & Buettcher (SIGIR 2009), with per-channel weights. Ties are broken by
    node id ascending so the output is deterministic and independent of channel order.
    """
    if k < 0:
        raise ValueError("RRF k must be >= 0")
    scores: dict[str, float] = {}
    for name, ids in channels.items():
        w = float(weights.get(name, 1.0))
        if w == 0.0:
            continue
        seen: set[str] = set()
        rank = 0
        for node_id in ids:
            if node_id in seen:
                continue
            seen.add(node_id)
            rank += 1
            scores[node_id] = scores.get(node_id, 0.0) + w / (k + rank)
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))


# Theoretical lower bounds for ``tmm``: unit-vector cosine >= -1, BM25 >= 0.
THEORETICAL_MIN = {"vector": -1.0, "bm25": 0.0}
_EPS = 1e-9  # ranx's floor on min-max / z-score denominators


def _dedup(pairs: Sequence[tuple[str, float]]) -> list[tuple[str, float]]:
    seen: set[str] = set()
    out = []
    for nid, s in pairs:
        if nid not in seen:
            seen.add(nid)
            out.append((nid, float(s)))
    return out


def _unit_weights(weights: Mapping[str, float], names: Sequence[str]) -> dict[str, float]:
    """Weights scaled to sum 1 (all zero stays all zero: every score is then 0)."""
    raw = {n: float(weights.get(n, 1.0)) for n in names}
    total = sum(raw.values())
    return {n: (w / total if total > 0 else 0.0) for n, w in raw.items()}


def _minmax(xs: list[float], lower_bound: float) -> list[float]:
    lo, hi = min(xs), max(xs)
    return [(x - lo) / max(hi - lo, _EPS) for x in xs]


def _tmm(xs: list[float], lower_bound: float) -> list[float]:
    hi = max(xs)
    return [(x - lower_bound) / max(hi - lower_bound, _EPS) for x in xs]


def _zscore(xs: list[float], lower_bound: float) -> list[float]:
    mean = sum(xs) / len(xs)
    std = (sum((x - mean) ** 2 for x in xs) / len(xs)) ** 0.5
    return [(x - mean) / max(std, _EPS) for x in xs]


def _dbsf(xs: list[float], lower_bound: float) -> list[float]:
    n = len(xs)
    if n < 2:
        return [0.5]
    mean = sum(xs) / n
    std = (sum((x - mean) ** 2 for x in xs) / (n - 1)) ** 0.5
    if std == 0.0:
        return [0.5] * n
    lo = mean - 3.0 * std
    return [min(1.0, max(0.0, (x - lo) / (6.0 * std))) for x in xs]


Normalizer = Callable[[list[float], float], list[float]]
# What ``fusion.normalization`` can name (the config's choices and the optimizer's read this).
NORMALIZATIONS: dict[str, Normalizer] = {"minmax": _minmax, "zscore": _zscore, "tmm": _tmm}
# dbsf's own normalisation is part of that method, not a choice of its own.
_DBSF = "dbsf"


def normalize(scores: Sequence[float], how: str, lower_bound: float = 0.0) -> list[float]:
    """One channel's scores normalised by ``how`` (a ``NORMALIZATIONS`` name, or dbsf)."""
    fn = _dbsf if how == _DBSF else NORMALIZATIONS.get(how)
    if fn is None:
        known = ", ".join([*NORMALIZATIONS, _DBSF])
        raise ValueError(f"normalization must be one of {known}; got {how!r}")
    return fn([float(x) for x in scores], lower_bound) if scores else []


def score_fusion(
    channels: Mapping[str, Sequence[tuple[str, float]]],
    weights: Mapping[str, float],
    how: str,
    lower_bounds: Mapping[str, float] | None = None,
) -> list[tuple[str, float]]:
    """Weighted sum of per-channel normalised scores (weights scaled to sum 1).

    A document absent from a channel gets 0 from it (ranx ``wsum`` semantics). Used by
    ``convex`` (how = minmax | zscore | tmm) and ``dbsf`` (how = dbsf).
    """
    w = _unit_weights(weights, list(channels))
    scores: dict[str, float] = {}
    for name, pairs in channels.items():
        pairs = _dedup(pairs)
        lb = (lower_bounds or THEORETICAL_MIN).get(name, 0.0)
        normed = normalize([s for _, s in pairs], how, lb)
        for (nid, _), x in zip(pairs, normed, strict=True):
            scores[nid] = scores.get(nid, 0.0) + w[name] * x
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))


@dataclass(frozen=True)
class FusionMethod:
    """One ``fusion.method``: its function and the ``fusion.*`` keys it reads."""

    name: str
    fuse: Callable[[Channels, Mapping[str, float], FusionParams], list[tuple[str, float]]]
    reads: tuple[str, ...] = ()  # beyond the weights: "k", "normalization"


def _rrf(
    channels: Channels, weights: Mapping[str, float], p: FusionParams
) -> list[tuple[str, float]]:
    return rrf({n: [nid for nid, _ in pairs] for n, pairs in channels.items()}, weights, p.k)


def _convex(
    channels: Channels, weights: Mapping[str, float], p: FusionParams
) -> list[tuple[str, float]]:
    return score_fusion(channels, weights, p.normalization)


def _dbsf_fusion(
    channels: Channels, weights: Mapping[str, float], p: FusionParams
) -> list[tuple[str, float]]:
    return score_fusion(channels, weights, _DBSF)


FUSIONS: dict[str, FusionMethod] = {
    m.name: m
    for m in (
        FusionMethod("rrf", _rrf, reads=("k",)),
        FusionMethod("convex", _convex, reads=("normalization",)),
        FusionMethod("dbsf", _dbsf_fusion),
    )
}


class MethodsReading(Collection[str]):
    """The registered methods that read a ``fusion.*`` key, looked up on every use (so a
    method registered later is in it): what the optimizer's conditions name."""

    def __init__(self, key: str) -> None:
        self.key = key

    def _names(self) -> list[str]:
        return [n for n, m in FUSIONS.items() if self.key in m.reads]

    def __contains__(self, name: object) -> bool:
        return name in self._names()

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def __repr__(self) -> str:
        return repr(tuple(self._names()))
