"""The pure stages of the search pipeline: fusion, rerank merge, parent-child injection, cut.

Everything after candidate retrieval is a pure function of (candidates, rerank scores,
config). ``compose`` is the one composition of those stages (channels -> fuse -> rerank ->
inject -> cut): ``Engine.search`` calls it on live candidates and the evaluator calls it on
cached ones, so re-scored metrics equal a full run by construction.

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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

from engine.config import EngineConfig

# Candidate pool kept per channel in caches; any config with top_k * multiplier above this
# needs a fresh retrieval (the evaluator checks ``Candidates.pool``).
MAX_CACHED_POOL = 200


@dataclass(frozen=True)
class Candidates:
    """What the two retrieval channels returned for one query (best first)."""

    query: str
    vector: tuple[tuple[str, float], ...]  # (node_id, cosine similarity)
    bm25: tuple[tuple[str, float], ...]  # (node_id, BM25 score), zero-score docs excluded
    expansion_terms: tuple[str, ...] = ()
    pool: int = 0  # how many per channel were asked for (lists may be shorter)
    timings: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Ranked:
    """One ranked item after fusion/rerank/injection."""

    node_id: str
    score: float
    vector_rank: int | None  # 1-based rank in the vector channel, None if absent
    bm25_rank: int | None
    fusion_rank: int | None  # 1-based rank after fusion (None for injected children)
    rerank_rank: int | None  # 1-based rank among reranked items, None if not reranked
    rerank_score: float | None = None
    injected_from: str | None = None


def pool_size(cfg: EngineConfig, top_k: int, use_rerank: bool) -> int:
    """Candidate pool per channel: top_k x multiplier (4 with rerank, 3 without by default)."""
    mult = cfg.fusion.rerank_multiplier if use_rerank else cfg.fusion.multiplier
    return max(top_k, top_k * mult)


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


FUSION_METHODS = ("rrf", "convex", "dbsf")
NORMALIZATIONS = ("minmax", "zscore", "tmm")
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


def normalize(scores: Sequence[float], how: str, lower_bound: float = 0.0) -> list[float]:
    """One channel's scores normalised by ``how`` (minmax | zscore | tmm | dbsf)."""
    if not scores:
        return []
    xs = [float(x) for x in scores]
    n = len(xs)
    if how == "minmax":
        lo, hi = min(xs), max(xs)
        return [(x - lo) / max(hi - lo, _EPS) for x in xs]
    if how == "tmm":
        hi = max(xs)
        return [(x - lower_bound) / max(hi - lower_bound, _EPS) for x in xs]
    mean = sum(xs) / n
    if how == "zscore":
        std = (sum((x - mean) ** 2 for x in xs) / n) ** 0.5
        return [(x - mean) / max(std, _EPS) for x in xs]
    if how == "dbsf":
        if n < 2:
            return [0.5]
        std = (sum((x - mean) ** 2 for x in xs) / (n - 1)) ** 0.5
        if std == 0.0:
            return [0.5] * n
        lo = mean - 3.0 * std
        return [min(1.0, max(0.0, (x - lo) / (6.0 * std))) for x in xs]
    raise ValueError(f"normalization must be one of minmax, zscore, tmm, dbsf; got {how!r}")


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


def fuse(cands: Candidates, cfg: EngineConfig, mode: str, pool: int) -> list[tuple[str, float]]:
    """Fuse the channels for a search mode, each channel cut to ``pool`` first."""
    if mode == "vector":
        return [(nid, s) for nid, s in cands.vector[:pool]]
    if mode == "keyword":
        return [(nid, s) for nid, s in cands.bm25[:pool]]
    if mode != "hybrid":
        raise ValueError(f"search mode must be hybrid, vector or keyword; got {mode!r}")
    f = cfg.fusion
    weights = {"vector": f.vector_weight, "bm25": f.bm25_weight}
    if f.method == "rrf":
        vec = [nid for nid, _ in cands.vector[:pool]]
        lex = [nid for nid, _ in cands.bm25[:pool]]
        return rrf({"vector": vec, "bm25": lex}, weights, f.k)
    channels = {"vector": cands.vector[:pool], "bm25": cands.bm25[:pool]}
    if f.method == "convex":
        return score_fusion(channels, weights, f.normalization)
    if f.method == "dbsf":
        return score_fusion(channels, weights, "dbsf")
    raise ValueError(f"fusion.method must be one of {', '.join(FUSION_METHODS)}; got {f.method!r}")


def rerank_order(
    fused: Sequence[tuple[str, float]],
    rerank_scores: Mapping[str, float],
    cfg: EngineConfig,
) -> list[tuple[str, float, float | None]]:
    """Reorder the first ``rerank.max_candidates`` fused items by rerank score.

    final = w * rerank + (1 - w) * fusion score divided by |top fused score| (scaled to
    [0, 1] for rrf/minmax/tmm/dbsf; z-score fusion can be negative, and dividing by the
    absolute value keeps the fused order). Items past the cut keep their fused order below
    the reranked head. Returns (node_id, final score, rerank score or None).
    """
    n = cfg.rerank.max_candidates
    head, tail = list(fused[:n]), list(fused[n:])
    w = cfg.rerank.weight
    top = abs(max((s for _, s in head), default=0.0)) or 1.0
    scored: list[tuple[str, float, float | None]] = []
    for nid, fscore in head:
        r = rerank_scores.get(nid)
        if r is None:  # missing score (provider failed for this item): keep fusion order
            scored.append((nid, (1 - w) * fscore / top, None))
        else:
            scored.append((nid, w * r + (1 - w) * fscore / top, r))
    scored.sort(key=lambda t: (-t[1], t[0]))
    floor = min((s for _, s, _ in scored), default=0.0)
    out = list(scored)
    # Tail items sit strictly below the head, in fused order.
    for i, (nid, _) in enumerate(tail):
        out.append((nid, floor - 1e-6 * (i + 1), None))
    return out


def rank(
    cands: Candidates,
    cfg: EngineConfig,
    *,
    top_k: int,
    mode: str,
    rerank_scores: Mapping[str, float] | None,
    children_of: Callable[[str], Sequence[str]] | None = None,
    pool: int | None = None,
    fused: Sequence[tuple[str, float]] | None = None,
) -> list[Ranked]:
    """Candidates (+ rerank scores) -> final top_k ranking. Pure; see module docstring.

    ``pool`` defaults to ``pool_size(cfg, top_k, ...)``; ``compose`` passes the pool of
    the configured top_k while asking for a deeper list, so its first top_k items equal
    a live search's, and ``fused`` (``fuse`` of that pool) so fusion runs once.
    """
    use_rerank = rerank_scores is not None
    if pool is None:
        pool = pool_size(cfg, top_k, use_rerank)
    if fused is None:
        fused = fuse(cands, cfg, mode, pool)
    vec_rank = _ranks(cands.vector[:pool])
    bm_rank = _ranks(cands.bm25[:pool])
    fusion_rank = {nid: i + 1 for i, (nid, _) in enumerate(fused)}

    items: list[Ranked] = []
    if use_rerank:
        reordered = rerank_order(fused, rerank_scores or {}, cfg)
        rr = 0
        for nid, score, rscore in reordered:
            if rscore is not None:
                rr += 1
            items.append(
                Ranked(
                    nid,
                    score,
                    vec_rank.get(nid),
                    bm_rank.get(nid),
                    fusion_rank[nid],
                    rr if rscore is not None else None,
                    rscore,
                )
            )
    else:
        items = [
            Ranked(nid, s, vec_rank.get(nid), bm_rank.get(nid), fusion_rank[nid], None)
            for nid, s in fused
        ]

    items = items[:top_k]
    if cfg.injection.enabled and children_of is not None:
        items = inject_children(items, cfg, children_of, top_k)
    return items


RerankFn = Callable[[Sequence[str]], Mapping[str, float] | None]


@dataclass(frozen=True)
class Composed:
    """What one pass of the pipeline produced, with what evaluation needs to explain it."""

    ranked: list[Ranked]  # first top_k exactly a live search's, then deeper (to ``depth``)
    fused: list[tuple[str, float]]  # full fused order over the pool (stage attribution)
    pool: int  # candidates per channel that were fused
    rerank_scores: Mapping[str, float] | None  # None: not reranked (off or provider failed)


def compose(
    cands: Candidates,
    cfg: EngineConfig,
    *,
    top_k: int,
    mode: str,
    rerank: RerankFn | None = None,
    children_of: Callable[[str], Sequence[str]] | None = None,
    depth: int | None = None,
) -> Composed:
    """The search pipeline after retrieval: fuse -> rerank -> inject -> cut, in one place.

    ``rerank`` (None = no rerank) is called once with the first ``rerank.max_candidates``
    fused ids and returns their scores, or None when the provider failed (the search then
    goes on unreranked with the no-rerank pool, as a search without rerank would).
    ``depth`` > top_k asks for a deeper list (evaluation ranks to @20): its first top_k
    items are those of a live search with this top_k (injection depends on what is already
    listed, so the deeper list is the top_k list followed by the rest of a deeper pass).
    """
    use_rerank = rerank is not None
    pool = pool_size(cfg, top_k, use_rerank)
    fused = fuse(cands, cfg, mode, pool)
    scores: Mapping[str, float] | None = None
    if rerank is not None:
        head_ids = [nid for nid, _ in fused[: cfg.rerank.max_candidates]]
        scores = rerank(head_ids)
        if scores is None:  # provider failed: rank as a search without rerank would
            pool = pool_size(cfg, top_k, False)
            fused = fuse(cands, cfg, mode, pool)
    # The page and the deeper list (depth) rank the same candidates the same way.
    rank_to = partial(
        rank,
        cands,
        cfg,
        mode=mode,
        rerank_scores=scores,
        children_of=children_of,
        pool=pool,
        fused=fused,
    )
    ranked = rank_to(top_k=top_k)
    if depth is not None and depth > top_k:
        deeper = rank_to(top_k=depth)
        seen = {r.node_id for r in ranked}
        ranked = ranked + [r for r in deeper if r.node_id not in seen][: depth - len(ranked)]
    return Composed(ranked, fused, pool, scores)


def inject_children(
    items: Sequence[Ranked],
    cfg: EngineConfig,
    children_of: Callable[[str], Sequence[str]],
    top_k: int,
) -> list[Ranked]:
    """Parent-child injection (conservative; the pipeline's last step).

    For a result whose rerank score >= injection.min_score, add up to ``max_children`` of its children right after it at
    score x discount, never above the parent; children already present are not
    duplicated. The list is cut back to top_k, so injection only ever replaces the
    weakest tail items.
    """
    present = {it.node_id for it in items}
    out: list[Ranked] = []
    for it in items:
        out.append(it)
        if it.rerank_score is None or it.rerank_score < cfg.injection.min_score:
            continue
        added = 0
        for child in children_of(it.node_id):
            if added >= cfg.injection.max_children:
                break
            if child in present:
                continue
            present.add(child)
            added += 1
            out.append(
                Ranked(
                    child,
                    min(it.score * cfg.injection.discount, it.score),
                    None,
                    None,
                    None,
                    None,
                    None,
                    injected_from=it.node_id,
                )
            )
    return out[:top_k]


def _ranks(pairs: Sequence[tuple[str, float]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for i, (nid, _) in enumerate(pairs):
        out.setdefault(nid, i + 1)
    return out
