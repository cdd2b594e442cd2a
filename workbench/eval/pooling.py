"""Candidate pooling (TREC-style): chapters several systems rank high but nobody labelled.

Each (run, mode) pair is one "system". A chapter that at least ``min_votes`` systems put in
their top ``k`` for a query, and that is not among the query's relevant ids, is a candidate
for review: either it answers the query too (add it) or the systems share a blind spot.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from workbench.eval.run_record import RunRecord


@dataclass(frozen=True)
class PoolCandidate:
    item_id: str
    query: str
    node_id: str
    votes: int  # systems that ranked it within the top k
    best_rank: int  # its best 1-based rank among them
    systems: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def pool_candidates(
    runs: Iterable[tuple[str, RunRecord]], *, k: int = 5, min_votes: int = 2
) -> list[PoolCandidate]:
    """Unlabelled chapters ranked in the top ``k`` by >= ``min_votes`` systems, most votes first."""
    if k < 1 or min_votes < 1:
        raise ValueError("k and min_votes must be at least 1")
    votes: dict[tuple[str, str], dict[str, int]] = {}
    queries: dict[str, tuple[str, set[str]]] = {}
    for label, run in runs:
        for r in run.queries:
            if r.error:
                continue
            queries[r.item.id] = (r.item.query, set(r.item.relevant))
            system = f"{label}/{r.mode}" if label else r.mode
            for rank, hit in enumerate(r.ranked[:k], 1):
                if hit.node_id in queries[r.item.id][1]:
                    continue
                seen = votes.setdefault((r.item.id, hit.node_id), {})
                seen[system] = min(rank, seen.get(system, rank))
    out = [
        PoolCandidate(
            item_id=qid,
            query=queries[qid][0],
            node_id=nid,
            votes=len(systems),
            best_rank=min(systems.values()),
            systems=tuple(sorted(systems)),
        )
        for (qid, nid), systems in votes.items()
        if len(systems) >= min_votes
    ]
    out.sort(key=lambda c: (-c.votes, c.best_rank, c.item_id, c.node_id))
    return out
