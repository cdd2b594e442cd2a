"""The golden set as an editable table: rows to a GoldenSet and back, nothing lost."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from workbench.eval import golden
from workbench.eval.golden import GoldenSet

SEP = " | "  # between node ids in one table cell (slugs never contain "|")
GOLDEN_COLUMNS = (
    "id",
    "query",
    "relevant",
    "difficulty",
    "category",
    "split",
    "unanswerable",
    "answer_contains",
    "notes",
)


def golden_frame(gs: GoldenSet) -> pd.DataFrame:
    """One editable row per golden item; list fields joined with `` | ``."""
    rows = [
        {
            "id": it.id,
            "query": it.query,
            "relevant": SEP.join(it.relevant),
            # Difficulty means nothing for a question the KB cannot answer: left blank.
            "difficulty": None if it.unanswerable else it.difficulty,
            "category": it.category,
            "split": it.split,
            "unanswerable": it.unanswerable,
            "answer_contains": SEP.join(it.answer_contains),
            "notes": it.notes,
        }
        for it in gs.items
    ]
    return pd.DataFrame(rows, columns=list(GOLDEN_COLUMNS))


def frame_golden(df: pd.DataFrame, base: GoldenSet) -> GoldenSet:
    """The edited table back as a GoldenSet (new rows get the next free id)."""
    items = []
    base_level = base.items[0].relevant_grade if base.items else golden.J.DEFAULT_RELEVANT_GRADE
    taken = [str(i) for i in df["id"].tolist() if isinstance(i, str) and i.strip()]
    for row in df.to_dict("records"):
        query = _text(row.get("query"))
        item_id = _text(row.get("id"))
        if not query and not item_id:
            continue  # a blank row the editor added
        if not item_id:
            item_id = golden.next_id(taken)
            taken.append(item_id)
        old = base.get(item_id)
        items.append(
            golden.GoldenItem(
                id=item_id,
                query=query,
                relevant=_split(row.get("relevant")),
                difficulty=_text(row.get("difficulty")) or "medium",
                category=_text(row.get("category")),
                answer_contains=_split(row.get("answer_contains")),
                notes=_text(row.get("notes")),
                split=_text(row.get("split")) or golden.default_split(item_id),
                unanswerable=_flag(row.get("unanswerable")),
                grades=old.grades if old is not None else {},
                judged=old.judged if old is not None else {},
                relevant_grade=old.relevant_grade if old is not None else base_level,
            )
        )
    return GoldenSet(base.name, tuple(items), base.path, base.sha256)


def _split(cell: Any) -> tuple[str, ...]:
    if not isinstance(cell, str):
        return ()
    parts = [p.strip() for p in cell.replace("\n", "|").split("|")]
    return tuple(dict.fromkeys(p for p in parts if p))


def _text(cell: Any) -> str:
    """A cell as stripped text; the editor's empty cells (None, NaN) become ""."""
    return cell.strip() if isinstance(cell, str) else ""


def _flag(cell: Any) -> bool:
    return isinstance(cell, bool | np.bool_) and bool(cell)
