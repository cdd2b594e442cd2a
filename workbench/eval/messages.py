"""Text the core produces for people, as data: an English template and its parameters.

The template is also the message key: the UI passes it through its translator (``t()``,
whose catalogs are keyed by the English text), the CLI renders it as it is. Parameters
may be messages themselves, rendered with the same translator.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

Translate = Callable[[str], str]


@dataclass(frozen=True)
class Message:
    key: str  # the English template, e.g. "lost in {channel} candidates"
    params: Mapping[str, Any] = field(default_factory=dict)

    def render(self, translate: Translate | None = None) -> str:
        """The text, with ``translate`` applied to this template and every nested one."""
        template = translate(self.key) if translate else self.key
        values = {
            k: v.render(translate) if isinstance(v, Message) else v for k, v in self.params.items()
        }
        return template.format(**values) if values else template

    def __str__(self) -> str:
        return self.render()

    def to_dict(self) -> dict[str, Any]:
        """``{"key", "params", "text"}``: what --json and the UI read."""
        return {
            "key": self.key,
            "params": {
                k: v.to_dict() if isinstance(v, Message) else v for k, v in self.params.items()
            },
            "text": self.render(),
        }


def translated(text: str, msg: Message | None, translate: Translate | None) -> str:
    """``msg`` in the reader's language while ``text`` is still its English (a caller may
    have replaced the text since; then the text is what it says)."""
    return msg.render(translate) if msg is not None and msg.render() == text else text


def join(parts: list[Message], sep: str = "; ") -> Message:
    """Several messages as one (``{0}; {1}``), each still translated on its own."""
    key = sep.join("{" + f"p{i}" + "}" for i in range(len(parts)))
    return Message(key, {f"p{i}": p for i, p in enumerate(parts)})
