"""ChatAnswer: what one answer returns (text, citations, how it was produced)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from workbench.answer.llm import redact


@dataclass
class ChatAnswer:
    """One answer: text, numbered citations, and how it was produced (mode, notice, trace)."""

    question: str
    answer: str
    citations: list[dict[str, Any]]  # {n, node_id, breadcrumb, file_path, line}
    refusal: bool
    mode: str  # "llm" | "extractive"
    notice: str | None  # why the mode is what it is (no LLM, endpoint failed, tools stopped)
    retrieved: list[dict[str, Any]]  # chapters used: {n, node_id, title, breadcrumb, score, ...}
    trace: list[dict[str, Any]]  # {step, ms, detail}
    rounds: int
    query: str = ""  # the retrieval query after follow-up resolution / the chosen rewrite
    took_ms: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        # Round-tripped through redact so no key can leave in an export, whatever it holds.
        return json.loads(redact(json.dumps(asdict(self), ensure_ascii=False, default=str)))
