"""What no one has judged: the share of a run's top 10 without a grade, and the rating queue.

A chapter in a run's top k that the golden set neither lists nor has a judgment for counts
as not relevant in every measure, so a config that surfaces good unlabelled chapters
looks worse than it is. Quepid's rule of thumb: above 5% unjudged at 10, a comparison is
not evidence yet. The queue is those chapters, pooled over the configs being compared
(top k of each, deduplicated), query by query: rating them makes the comparison fair.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from workbench.eval import judgments as J
from workbench.eval import metrics as M
from workbench.eval.evaluate import EvalRun, QueryResult
from workbench.eval.golden import GoldenItem, GoldenSet
from workbench.eval.messages import Message

UNJUDGED_K = 10
WARN_SHARE = 0.05  # Quepid's rule of thumb for a comparison worth reading


@dataclass(frozen=True)
class QueueEntry:
    item_id: str
    query: str
    node_id: str
    best_rank: int  # best 1-based rank among the pooled configs
    systems: tuple[str, ...]  # labels of the configs that ranked it in their top k

    def to_dict(self) -> dict[str, Any]:
        return {
            "query_id": self.item_id,
            "query": self.query,
            "node_id": self.node_id,
            "best_rank": self.best_rank,
            "systems": list(self.systems),
        }


def _item(gs: GoldenSet | None, result: QueryResult) -> GoldenItem:
    """The golden set's current version of a run's query (its judgments may be newer)."""
    current = gs.get(result.item.id) if gs is not None else None
    return current if current is not None else result.item


def _top(result: QueryResult, k: int) -> list[str]:
    return M.dedupe(h.node_id for h in result.ranked)[:k]


def unjudged_share(
    run: EvalRun, mode: str, gs: GoldenSet | None = None, k: int = UNJUDGED_K
) -> float:
    """Share of the top-``k`` slots of ``mode``'s queries that carry no judgment (0 when empty)."""
    slots = unjudged = 0
    for r in run.for_mode(mode):
        if r.error:
            continue
        judged = _item(gs, r).qrels
        top = _top(r, k)
        slots += len(top)
        unjudged += sum(1 for nid in top if nid not in judged)
    return unjudged / slots if slots else 0.0


def share_message(share: float, k: int = UNJUDGED_K, *, sentence: bool = False) -> Message:
    """The share in words and, above the threshold, why it matters; ``sentence`` starts it
    with a capital (a report's note)."""
    warn: Message | str = (
        Message(
            "  WARNING: above {limit}; rate them (`wikirag judge`) before trusting a comparison",
            {"limit": f"{WARN_SHARE:.0%}"},
        )
        if share > WARN_SHARE
        else ""
    )
    params = {"k": k, "share": f"{share:.1%}", "warning": warn}
    if sentence:
        return Message("Unjudged in top {k}: {share}{warning}", params)
    return Message("unjudged in top {k}: {share}{warning}", params)


def share_note(share: float, k: int = UNJUDGED_K) -> str:
    """The share in words and, above the threshold, why it matters (CLI)."""
    return share_message(share, k).render()


def share_line(label: str, share: float, k: int = UNJUDGED_K) -> str:
    """One line of `wikirag eval` output for one mode."""
    return f"{label}: {share_note(share, k)}"


def rating_queue(
    runs: Iterable[tuple[str, EvalRun]],
    gs: GoldenSet,
    *,
    k: int = UNJUDGED_K,
    judgments: Sequence[J.Judgment] = (),
    rater: str | None = None,
) -> list[QueueEntry]:
    """Unjudged chapters in the top ``k`` of any run, in golden-set order, best rank first.

    With ``rater``, chapters that rater answered "can't tell" are left out and those they
    put off ("judge later") go to the end.
    """
    pooled: dict[tuple[str, str], dict[str, int]] = {}
    for label, run in runs:
        for r in run.results:
            if r.error:
                continue
            judged = _item(gs, r).qrels
            for rank, nid in enumerate(_top(r, k), 1):
                if nid in judged:
                    continue
                systems = pooled.setdefault((r.item.id, nid), {})
                systems[label] = min(rank, systems.get(label, rank))
    mine = {pair: by[rater] for pair, by in J.latest(judgments).items() if rater and rater in by}
    order = {it.id: n for n, it in enumerate(gs.items)}
    out = []
    for (qid, nid), systems in pooled.items():
        answer = mine.get((qid, nid))
        if answer is not None and answer.grade == J.UNSURE:
            continue
        item = gs.get(qid)
        out.append(
            QueueEntry(
                qid,
                item.query if item else "",
                nid,
                min(systems.values()),
                tuple(sorted(systems)),
            )
        )
    later = {pair for pair, j in mine.items() if j.grade == J.LATER}
    out.sort(
        key=lambda e: (
            (e.item_id, e.node_id) in later,
            order.get(e.item_id, len(order)),
            e.best_rank,
            e.node_id,
        )
    )
    return out


def rescored(
    run: EvalRun, gs: GoldenSet, hierarchy: Callable[[str], str | None] | None = None
) -> EvalRun:
    """``run`` with every measure recomputed from the golden set's current judgments.

    The rankings are the run's own; only the grades changed, so no search is repeated.
    """
    measures = tuple(M.parse_measure(m) for m in (run.results[0].metrics if run.results else ()))
    results = []
    for r in run.results:
        item = _item(gs, r)
        if r.error:
            results.append(replace(r, item=item))
            continue
        ids = [h.node_id for h in r.ranked]
        values = M.evaluate_query(
            ids, item.qrels, measures, hierarchy, relevance_level=item.relevant_grade
        )
        results.append(replace(r, item=item, metrics=values))
    return replace(run, results=results, dataset_hash=gs.content_hash)
