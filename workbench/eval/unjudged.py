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
from workbench.eval.golden import GoldenSet
from workbench.eval.messages import Message
from workbench.eval.run_record import UNJUDGED_K, RunRecord

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
    runs: Iterable[tuple[str, RunRecord]],
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
        for r in run.queries:
            if r.error:
                continue
            judged = r.current_item(gs).qrels
            for rank, nid in enumerate(r.distinct_top(k), 1):
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
    run: RunRecord, gs: GoldenSet, hierarchy: Callable[[str], str | None] | None = None
) -> RunRecord:
    """``run`` with every measure recomputed from the golden set's current judgments.

    The rankings are the run's own; only the grades changed, so no search is repeated.
    """
    measures = tuple(M.parse_measure(m) for m in (run.queries[0].metrics if run.queries else ()))
    results = []
    for r in run.queries:
        item = r.current_item(gs)
        if r.error:
            results.append(replace(r, item=item))
            continue
        ids = [h.node_id for h in r.ranked]
        values = M.evaluate_query(
            ids, item.qrels, measures, hierarchy, relevance_level=item.relevant_grade
        )
        results.append(replace(r, item=item, metrics=values))
    return run.with_queries(results, dataset=replace(run.dataset, hash=gs.content_hash))
