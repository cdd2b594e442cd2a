"""`wikirag eval --answers`: answer every golden query with the chat and score the answers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.config import EngineConfig
from workbench.answer.answer_metrics import aggregate_answer_scores, score_answer
from workbench.answer.chat import answer
from workbench.answer.llm import LLMClient, llm_settings
from workbench.eval.golden import GoldenSet


def evaluate_answers(
    engine: Any,
    gs: GoldenSet,
    cfg: EngineConfig,
    *,
    split: str = "all",
    top_k: int = 5,
    progress: Callable[[int, int, str], None] | None = None,
) -> dict[str, Any]:
    """Per-item answer scores (answerable and unanswerable items) and their means."""
    kb = getattr(engine, "kb", None)
    settings = llm_settings(cfg.llm)
    llm = LLMClient(settings) if settings else None

    def parent_of(nid: str) -> str | None:
        node = kb.get(nid) if kb is not None else None
        return node.parent_id if node is not None else None

    items = gs.select(split)
    rows: list[dict[str, Any]] = []
    for n, item in enumerate(items, 1):
        ans = answer(item.query, engine, llm=llm, top_k=top_k)
        scores = score_answer(item.to_dict(), ans, parent_of=parent_of)
        rows.append(
            {
                "id": item.id,
                "mode": ans.mode,
                "refusal": ans.refusal,
                "cited": [c["node_id"] for c in ans.citations],
                "notice": ans.notice,
                **scores,
            }
        )
        if progress:
            progress(n, len(items), item.id)
    means = aggregate_answer_scores(
        [{k: v for k, v in r.items() if isinstance(v, float)} for r in rows]
    )
    return {
        "mode": "llm" if llm else "extractive",
        "means": {k: v for k, v in means.items() if not k.startswith("n_")},
        "per_query": rows,
    }
