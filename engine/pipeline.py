"""The pure stages of the search pipeline: fusion, rerank merge, parent-child injection, cut.

Everything after candidate retrieval is a pure function of (candidates, rerank scores,
config). ``compose`` is the one composition of those stages (channels -> fuse -> rerank ->
inject -> cut): ``Engine.search`` calls it on live candidates and the evaluator calls it on
cached ones, so re-scored metrics equal a full run by construction.

Fusion methods and normalisations are values in ``engine.fusion``'s registries; ``fuse``
looks the configured one up there.

Ties are broken by node id ascending everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

from engine.config import EngineConfig
from engine.fusion import FUSIONS
from engine.scripts import is_cross_lingual

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
    # Share of the searched chapters written in a script the query uses (engine/scripts.py);
    # under one half the query is cross-lingual and fusion.cross_lingual_bm25 weighs BM25.
    script_share: float = 1.0


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


def bm25_scale(cands: Candidates, cfg: EngineConfig) -> float:
    """What the keyword channel's weight is multiplied by for this query: the config's
    ``fusion.cross_lingual_bm25`` for a query in a script few chapters are written in
    (BM25 cannot match its words in the others), else 1."""
    return cfg.fusion.cross_lingual_bm25 if is_cross_lingual(cands.script_share) else 1.0


def fuse(cands: Candidates, cfg: EngineConfig, mode: str, pool: int) -> list[tuple[str, float]]:
    """Fuse the channels for a search mode, each channel cut to ``pool`` first."""
    if mode == "vector":
        return [(nid, s) for nid, s in cands.vector[:pool]]
    if mode == "keyword":
        return [(nid, s) for nid, s in cands.bm25[:pool]]
    if mode != "hybrid":
        raise ValueError(f"search mode must be hybrid, vector or keyword; got {mode!r}")
    f = cfg.fusion
    method = FUSIONS.get(f.method)
    if method is None:
        raise ValueError(f"fusion.method must be one of {', '.join(FUSIONS)}; got {f.method!r}")
    weights = {"vector": f.vector_weight, "bm25": f.bm25_weight * bm25_scale(cands, cfg)}
    channels = {"vector": cands.vector[:pool], "bm25": cands.bm25[:pool]}
    return method.fuse(channels, weights, f)


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
