"""A problem found in a golden set: its level, the item it concerns and its words.

Kept apart from ``golden`` so the set's reader stays one job; ``said`` carries the message
as a template the UI renders translated.
"""

from __future__ import annotations

from dataclasses import dataclass

from workbench.eval.messages import Message, Translate


@dataclass(frozen=True)
class Issue:
    level: str  # "error" | "warning"
    item_id: str | None
    message: str
    suggestions: tuple[str, ...] = ()
    said: Message | None = None  # ``message`` as a template, where the UI shows it translated

    @classmethod
    def of(cls, level: str, item_id: str | None, said: Message) -> Issue:
        return cls(level, item_id, str(said), said=said)

    def __str__(self) -> str:
        return self.render()

    def render(self, translate: Translate | None = None) -> str:
        """The issue as one line; ``translate`` (the UI's ``t``) turns its words Chinese."""
        msg = self.said.render(translate) if self.said else self.message
        where = f"{self.item_id}: " if self.item_id else ""
        tail = Message(" (did you mean: {ids})", {"ids": ", ".join(self.suggestions)})
        level = LEVEL_WORDS.get(self.level, Message(self.level))
        tail_text = tail.render(translate) if self.suggestions else ""
        return f"[{level.render(translate)}] {where}{msg}{tail_text}"


LEVEL_WORDS = {"error": Message("error"), "warning": Message("warning")}
