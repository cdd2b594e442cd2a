"""The trace of one answer (steps with timings) and the LLM as the answer loop sees it."""

from __future__ import annotations

import time
from typing import Any

from workbench.answer.llm import NO_LLM_HINT, LLMClient, LLMError, LLMReply, redact


class Trace:
    def __init__(self) -> None:
        self.steps: list[dict[str, Any]] = []

    def add(self, step: str, ms: float, detail: str) -> None:
        self.steps.append({"step": step, "ms": round(ms, 2), "detail": redact(detail)})


def elapsed_ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000.0


class TracedLLM:
    """The LLM as the answer loop sees it: usable until its first failure."""

    def __init__(self, client: LLMClient | None) -> None:
        self.client = client
        self.failure: LLMError | None = None

    @property
    def usable(self) -> bool:
        return self.client is not None and self.failure is None

    def call(
        self,
        messages: list[dict[str, Any]],
        trace: Trace,
        step: str,
        **kw: Any,
    ) -> LLMReply | None:
        client = self.client
        if client is None or self.failure is not None:
            return None
        started = time.perf_counter()
        try:
            return client.chat(messages, **kw)
        except LLMError as exc:
            self.failure = exc
            trace.add(step, elapsed_ms(started), f"LLM failed: {exc}")
            return None

    def notice(self) -> str | None:
        if self.client is None:
            return f"No LLM configured ({NO_LLM_HINT}): extractive answer from the top chapters"
        if self.failure is not None:
            return f"LLM endpoint failed ({self.failure.reason}): extractive answer instead"
        return None
