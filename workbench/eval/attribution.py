"""Stage attribution: for each relevant chapter missing from the top K, the stage that lost
it (a channel's candidate pool, fusion, rerank, or just the cut at K)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from engine.pipeline import Candidates, Ranked
from workbench.eval.golden import GoldenItem

ATTRIBUTION_K = 5  # a query "missed" when a relevant chapter is not in the top 5

CAUSES = {
    "lost_in_both": "lost in BM25 and vector candidates",
    "lost_in_bm25": "lost in BM25 candidates",
    "lost_in_vector": "lost in vector candidates",
    "dropped_by_fusion": "dropped by fusion",
    "demoted_by_rerank": "demoted by rerank",
    "cut_at_k": "cut at K",
}
_CAUSE_ORDER = list(CAUSES)


@dataclass(frozen=True)
class Attribution:
    """Where one relevant chapter missing from the top K was lost."""

    node_id: str
    cause: str  # a key of CAUSES
    final_rank: int | None
    fusion_rank: int | None
    vector_rank: int | None  # rank within the channel's candidate pool
    bm25_rank: int | None
    vector_rank_any: int | None  # rank in the channel's whole cached list
    bm25_rank_any: int | None


def attribute(
    item: GoldenItem,
    ranked: Sequence[Ranked],
    cands: Candidates,
    pool: int,
    mode: str,
    use_rerank: bool,
    k: int = ATTRIBUTION_K,
    fusion_ranks: Mapping[str, int] | None = None,
) -> tuple[Attribution, ...]:
    """Where each relevant chapter missing from the top ``k`` was lost.

    - lost_in_both / lost_in_bm25 / lost_in_vector: not in that channel's candidate pool
      (for a hybrid run, "both" when neither channel had it; a single lost channel is
      named only when the other channel had it but too low to reach the top k);
    - dropped_by_fusion: some channel ranked it within the top k, fusion did not;
    - demoted_by_rerank: fusion had it within the top k, rerank pushed it out;
    - cut_at_k: it was a candidate everywhere it should be, just never ranked high enough.
    """
    top = {r.node_id for r in ranked[:k]}
    final_rank = {r.node_id: i + 1 for i, r in enumerate(ranked)}
    vec = {nid: i + 1 for i, (nid, _) in enumerate(cands.vector[:pool])}
    bm = {nid: i + 1 for i, (nid, _) in enumerate(cands.bm25[:pool])}
    vec_full = {nid: i + 1 for i, (nid, _) in enumerate(cands.vector)}
    bm_full = {nid: i + 1 for i, (nid, _) in enumerate(cands.bm25)}
    # ``ranked`` stops at the evaluated depth; rerank can push a chapter fusion placed in
    # the top k below it, so the full fused order is passed in when known.
    if fusion_ranks is not None:
        fusion_rank = dict(fusion_ranks)
    else:
        fusion_rank = {r.node_id: r.fusion_rank for r in ranked if r.fusion_rank is not None}
    out: list[Attribution] = []
    for nid in item.relevant:
        if nid in top:
            continue
        v, b = vec.get(nid), bm.get(nid)
        fr = fusion_rank.get(nid)
        if mode == "vector":
            cause = "lost_in_vector" if v is None else None
        elif mode == "keyword":
            cause = "lost_in_bm25" if b is None else None
        else:
            cause = "lost_in_both" if v is None and b is None else None
        if cause is None:
            best_channel = min(x for x in (v, b) if x is not None)
            if mode == "hybrid" and best_channel <= k and (fr is None or fr > k):
                cause = "dropped_by_fusion"
            elif use_rerank and fr is not None and fr <= k:
                cause = "demoted_by_rerank"
            elif mode == "hybrid" and b is None:
                cause = "lost_in_bm25"
            elif mode == "hybrid" and v is None:
                cause = "lost_in_vector"
            else:
                cause = "cut_at_k"
        out.append(
            Attribution(
                nid,
                cause,
                final_rank.get(nid),
                fr,
                v,
                b,
                vec_full.get(nid),
                bm_full.get(nid),
            )
        )
    out.sort(key=lambda a: _CAUSE_ORDER.index(a.cause))
    return tuple(out)
