"""One query's ranked lists side by side, one column per config: each config's top k with
the gold chapters marked, how far each chapter moved against the reference, a snippet with
the query's terms marked, and, for every gold chapter, its rank or the stage that lost it
(the same :class:`~workbench.eval.causes.MissCause` the failures table shows)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from workbench.eval.causes import MissCause, gold_fate
from workbench.eval.run_record import QueryRecord, RunRecord
from workbench.eval.snippets import Snippet, snippet

SIDE_BY_SIDE_K = 10
SNIPPET_WIDTH = 160


@dataclass(frozen=True)
class ListEntry:
    rank: int
    node_id: str
    title: str
    breadcrumb: str  # "Doc > Chapter > Section"
    gold: bool
    move: int | None  # places gained vs the reference (+2 = two ranks higher); None: new
    snippet: Snippet | None  # None without the KB's text

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "node_id": self.node_id,
            "title": self.title,
            "breadcrumb": self.breadcrumb,
            "gold": self.gold,
            "move": self.move,
            "snippet": [list(p) for p in self.snippet.parts] if self.snippet else [],
        }


@dataclass(frozen=True)
class GoldFate:
    """A gold chapter in one config: its rank, or the stage that lost it."""

    node_id: str
    title: str
    rank: int | None  # in the config's ranked list, None when absent
    cause: MissCause | None  # None when it is in the top K (attribution's K)

    def to_dict(self) -> dict[str, Any]:
        return {
            "node_id": self.node_id,
            "title": self.title,
            "rank": self.rank,
            "cause": self.cause.to_dict() if self.cause else None,
        }


@dataclass(frozen=True)
class RankedColumn:
    label: str
    run_id: str
    metrics: Mapping[str, float]
    entries: tuple[ListEntry, ...]
    gold: tuple[GoldFate, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "run_id": self.run_id,
            "metrics": dict(self.metrics),
            "entries": [e.to_dict() for e in self.entries],
            "gold": [g.to_dict() for g in self.gold],
        }


@dataclass(frozen=True)
class SideBySide:
    qid: str
    query: str
    columns: tuple[RankedColumn, ...]  # reference first

    def to_dict(self) -> dict[str, Any]:
        return {
            "qid": self.qid,
            "query": self.query,
            "columns": [c.to_dict() for c in self.columns],
        }


def _node_text(kb: Any, nid: str) -> tuple[str, str, str | None]:
    node = kb.nodes.get(nid) if kb is not None else None
    if node is None:
        return nid, "", None
    return node.title, " > ".join(node.breadcrumb), node.content


def _query(rec: RunRecord, mode: str, qid: str) -> QueryRecord:
    q = next((x for x in rec.for_mode(mode) if x.item.id == qid), None)
    if q is None:
        raise KeyError(f"query {qid!r} is not in run {rec.run_id} ({mode})")
    return q


def side_by_side(
    records: Sequence[RunRecord],
    labels: Sequence[str],
    qid: str,
    *,
    modes: Sequence[str] | None = None,
    kb: Any = None,
    k: int = SIDE_BY_SIDE_K,
) -> SideBySide:
    """Query ``qid`` in each run (the first is the reference); ``kb`` (a parsed KB with
    ``nodes``) adds titles, breadcrumbs and snippets."""
    modes = list(modes or [r.modes[0] for r in records])
    queries = [_query(r, m, qid) for r, m in zip(records, modes, strict=True)]
    ref_rank = {x.node_id: i for i, x in enumerate(queries[0].ranked, 1)}
    texts: dict[str, tuple[str, str, str | None]] = {}
    snippets: dict[str, Snippet | None] = {}

    def text(nid: str) -> tuple[str, str, str | None]:
        if nid not in texts:
            texts[nid] = _node_text(kb, nid)
        return texts[nid]

    def snip(nid: str, query: str) -> Snippet | None:
        if nid not in snippets:
            body = text(nid)[2]
            snippets[nid] = snippet(body, query, SNIPPET_WIDTH) if body else None
        return snippets[nid]

    columns = []
    for i, (rec, lab, q) in enumerate(zip(records, labels, queries, strict=True)):
        rel = set(q.item.relevant)
        entries = []
        for rank, x in enumerate(q.ranked[:k], 1):
            before = ref_rank.get(x.node_id)
            title, crumb, _ = text(x.node_id)
            entries.append(
                ListEntry(
                    rank,
                    x.node_id,
                    title,
                    crumb,
                    x.node_id in rel,
                    0 if i == 0 else (None if before is None else before - rank),
                    snip(x.node_id, q.item.query),
                )
            )
        ranks = {x.node_id: n for n, x in enumerate(q.ranked, 1)}
        gold = tuple(
            GoldFate(nid, text(nid)[0], ranks.get(nid), gold_fate(q, nid))
            for nid in q.item.relevant
        )
        columns.append(RankedColumn(lab, rec.run_id, dict(q.metrics), tuple(entries), gold))
    return SideBySide(qid, queries[0].item.query, tuple(columns))
