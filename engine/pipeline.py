"""The pure stages of the search pipeline: fusion, rerank merge, parent-child injection, cut.

Everything after candidate retrieval is a pure function of (candidates, rerank scores,
config). The engine calls ``rank`` for a live search and the evaluator calls the very same
``rank`` on cached candidates, so re-scored metrics equal a full run by construction.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

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


def fuse(cands: Candidates, cfg: EngineConfig, mode: str, pool: int) -> list[tuple[str, float]]:
    """Fuse the channels for a search mode, each channel cut to ``pool`` first."""
    vec = [nid for nid, _ in cands.vector[:pool]]
    lex = [nid for nid, _ in cands.bm25[:pool]]
    if mode == "vector":
        return [(nid, s) for nid, s in cands.vector[:pool]]
    if mode == "keyword":
        return [(nid, s) for nid, s in cands.bm25[:pool]]
    if mode != "hybrid":
        raise ValueError(f"search mode must be hybrid, vector or keyword; got {mode!r}")
    return rrf(
        {"vector": vec, "bm25": lex},
        {"vector": cfg.fusion.vector_weight, "bm25": cfg.fusion.bm25_weight},
        cfg.fusion.k,
    )


def rerank_order(
    fused: Sequence[tuple[str, float]],
    rerank_scores: Mapping[str, float],
    cfg: EngineConfig,
) -> list[tuple[str, float, float | None]]:
    """Reorder the first ``rerank.max_candidates`` fused items by rerank score.

    final = w * rerank + (1 - w) * fusion score scaled to [0, 1] by the top fused score.
    Items past the cut keep their fused order below the reranked head. Returns
    (node_id, final score, rerank score or None).
    """
    n = cfg.rerank.max_candidates
    head, tail = list(fused[:n]), list(fused[n:])
    w = cfg.rerank.weight
    top = max((s for _, s in head), default=0.0) or 1.0
    scored = []
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
) -> list[Ranked]:
    """Candidates (+ rerank scores) -> final top_k ranking. Pure; see module docstring.

    ``pool`` defaults to ``pool_size(cfg, top_k, ...)``; the evaluator passes the pool of
    the configured top_k while asking for a deeper list, so its first top_k items equal
    a live search's.
    """
    use_rerank = rerank_scores is not None
    if pool is None:
        pool = pool_size(cfg, top_k, use_rerank)
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


def inject_children(
    items: Sequence[Ranked],
    cfg: EngineConfig,
    children_of: Callable[[str], Sequence[str]],
    top_k: int,
) -> list[Ranked]:
    """Parent-child injection (conservative, DESIGN.md step 5).

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
