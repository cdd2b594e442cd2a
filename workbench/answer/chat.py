"""Answers with numbered citations over the search engine: LLM when configured, else extractive.

Two modes share the same defences:

- ``loop``: retrieve -> judge the evidence -> (rewrite and retrieve again, at most twice)
  -> answer from the best single round, citing its chapters as numbered sources.
- ``tools``: the model calls ``knowledge_search`` / ``chapter_detail`` itself; citations
  refer to the chapters those tools returned.

What the code enforces whatever the model does: a citation ``[n]`` that points at no
source given is removed (and reported in the trace); evidence judged insufficient gives a
refusal that names what the KB does cover; a follow-up question is resolved against the
previous turn before retrieval; any LLM failure falls back to an extractive answer with a
notice saying why. ``answer`` never raises for an LLM problem.

The parts: ``loop`` (the retrieval loop), ``tools`` (tool calling), ``evidence`` (the
judge), ``rewrite``, ``followup``, ``citations``, ``extractive``, ``sources``, ``terms``.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Sequence
from typing import Any, Literal

from workbench.answer.chat_answer import ChatAnswer
from workbench.answer.evidence import EvidenceJudge
from workbench.answer.llm import LLMClient
from workbench.answer.loop import AnswerRun
from workbench.answer.refusal import RefusalModel, can_probe, model_for
from workbench.answer.sources import Retriever
from workbench.answer.tools import answer_with_tools

DEFAULT_MAX_TURNS = 6  # tool-calling turns before giving up on the model
DEFAULT_TOP_K = 5  # chapters given to the answer as sources
AnswerMode = Literal["loop", "tools"]
ANSWER_MODES: tuple[str, ...] = typing.get_args(AnswerMode)
DEFAULT_ANSWER_MODE: AnswerMode = "loop"


def answer(
    question: str,
    retriever: Retriever,
    *,
    history: Sequence[Any] | None = None,
    llm: LLMClient | None = None,
    mode: str = DEFAULT_ANSWER_MODE,
    top_k: int = DEFAULT_TOP_K,
    stream_cb: Callable[[str], None] | None = None,
    max_turns: int = DEFAULT_MAX_TURNS,
    refusal_model: RefusalModel | Literal["auto"] | None = "auto",
) -> ChatAnswer:
    """Answer ``question`` from the KB with numbered citations (see the module docstring).

    ``retriever`` searches under the config it was opened with. ``history`` holds
    earlier ``ChatAnswer``s or ``{"question", "answer"}`` / role messages. ``stream_cb``
    receives text as it is produced; for an LLM answer these are the model's raw deltas,
    before the citation check, so a UI should show ``ChatAnswer.answer`` once it returns.
    Engine errors (no index, ...) propagate; LLM errors never do.
    ``refusal_model``: the calibrated evidence judge; ``"auto"`` loads the KB's
    ``experiments/<kb>/refusal.yaml`` when there is one (``wikirag calibrate-refusal``),
    None keeps the coverage rule. It is used only with a retriever that can be probed
    (``candidates`` and ``kb``, as the engine has).
    """
    if mode not in ANSWER_MODES:
        raise ValueError(f"mode must be one of {', '.join(ANSWER_MODES)}; got {mode!r}")
    if top_k < 1:
        raise ValueError("top_k must be at least 1")
    if not question.strip():
        raise ValueError("question is empty; ask something")
    run = AnswerRun(question.strip(), retriever, history, llm, top_k, stream_cb)
    model = model_for(retriever) if refusal_model == "auto" else refusal_model
    if isinstance(model, RefusalModel) and can_probe(retriever):
        run.judge = EvidenceJudge(model, retriever)
    if mode == "tools" and run.llm.usable:
        return answer_with_tools(run, max_turns)
    return run.loop()
