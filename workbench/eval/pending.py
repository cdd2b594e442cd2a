"""Questions waiting to join the golden set: ``datasets/<name>.pending.yaml``.

A question sampled from the query log has no judged chapter yet, so it cannot be a golden
item (an item lists 1-4 relevant chapters, and `eval` refuses a set that breaks that).
It waits here, in the golden set's own format, under an id (``log001``, ...) it keeps
when promoted: the judgments made for it in the rating queue stay attached. Promotion
takes every pending question with at least one chapter graded relevant.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import yaml

from engine.atomic import atomic_write_text
from workbench.eval import golden
from workbench.eval import judgments as J
from workbench.eval.golden import GoldenItem, GoldenSet
from workbench.eval.unjudged import QueueEntry

PREFIX = "log"


def path_for(golden_path: str | Path) -> Path:
    p = Path(golden_path)
    return p.with_name(f"{p.stem}.pending.yaml")


def load(golden_path: str | Path) -> list[GoldenItem]:
    p = path_for(golden_path)
    return list(golden.load(p).items) if p.is_file() else []


def _write(golden_path: str | Path, items: Sequence[GoldenItem]) -> Path:
    p = path_for(golden_path)
    rows = [{"id": i.id, "query": i.query, "notes": i.notes} for i in items]
    text = "# Questions from the query log waiting for judgments (wikirag golden sample)\n"
    text += yaml.safe_dump(
        {"name": "pending", "queries": rows}, allow_unicode=True, sort_keys=False
    )
    atomic_write_text(p, text)
    return p


def add(gs: GoldenSet, questions: Sequence[tuple[str, int]]) -> list[GoldenItem]:
    """Queue sampled (question, times asked) pairs; returns the items added."""
    if gs.path is None:
        raise golden.GoldenSetError("the golden set has no file; save it first")
    pending = load(gs.path)
    taken = [i.id for i in gs.items] + [i.id for i in pending]
    added = []
    for text, count in questions:
        item = GoldenItem(
            id=golden.next_id(taken, PREFIX),
            query=text,
            notes=f"from the query log: asked {count} time{'s' if count != 1 else ''}",
        )
        taken.append(item.id)
        added.append(item)
    _write(gs.path, [*pending, *added])
    return added


def promote(gs: GoldenSet) -> tuple[GoldenSet, list[str]]:
    """Move pending questions with a chapter graded relevant into ``gs`` (saved)."""
    if gs.path is None:
        raise golden.GoldenSetError("the golden set has no file; save it first")
    path = gs.path
    grades = J.consensus(J.read(J.path_for(path)))
    level = gs.items[0].relevant_grade if gs.items else J.DEFAULT_RELEVANT_GRADE
    kept, moved = [], []
    for item in load(path):
        good = sorted(
            ((n, g) for n, g in grades.get(item.id, {}).items() if g >= level),
            key=lambda x: (-x[1], x[0]),
        )[: golden.MAX_RELEVANT]
        if not good:
            kept.append(item)
            continue
        new = GoldenItem(
            id=item.id,
            query=item.query,
            relevant=tuple(n for n, _ in good),
            category="log",
            notes=item.notes,
            split=golden.default_split(item.id),
        )
        gs = golden.with_item(gs, new)
        moved.append(item.id)
    if moved:
        gs = golden.with_judgments(golden.save(gs), J.read(J.path_for(path)))
        _write(path, kept)
    return gs, moved


def queue(
    gs: GoldenSet,
    search: Callable[[str], Sequence[str]],
    *,
    judgments: Sequence[J.Judgment] = (),
    rater: str | None = None,
) -> list[QueueEntry]:
    """The rating queue of the pending questions: ``search``'s chapters no one graded."""
    if gs.path is None:
        return []
    grades = J.consensus(judgments)
    mine = {p: by[rater] for p, by in J.latest(judgments).items() if rater and rater in by}
    out = []
    for item in load(gs.path):
        for rank, nid in enumerate(search(item.query), 1):
            answer = mine.get((item.id, nid))
            if nid in grades.get(item.id, {}) or (answer is not None and answer.grade == J.UNSURE):
                continue
            out.append(QueueEntry(item.id, item.query, nid, rank, ("baseline",)))
    return out
