"""YAML that cannot explode: aliases are refused before anything is built.

A 1 KB "billion laughs" file (anchors that reference anchors) expands to gigabytes in
``yaml.safe_load``; golden sets and configs never need aliases, so any alias is an error
(checked on the event stream, which never expands anything).
"""

from __future__ import annotations

from typing import Any

import yaml

from engine.errors import ConfigError

MAX_SHOWN = 200  # characters of a user's value quoted back in an error message

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def refuse_aliases(text: str, what: str = "YAML") -> None:
    """Raise ConfigError if ``text`` uses an alias (``*name`` or ``<<: *name``).

    Syntax errors are left to the real loader, which reports them with its own message.
    """
    try:
        for event in yaml.parse(text, Loader=_Loader):
            if isinstance(event, yaml.AliasEvent):
                mark = event.start_mark
                where = f"line {mark.line + 1}: " if mark is not None else ""
                raise ConfigError(
                    f"{what}: {where}YAML aliases (*{event.anchor[:40]}) are not "
                    "allowed; write the value out in full"
                )
    except yaml.YAMLError:
        return


def safe_load(text: str, what: str = "YAML") -> Any:
    """``yaml.safe_load`` that refuses aliases first."""
    refuse_aliases(text, what)
    return yaml.safe_load(text)


def short(value: Any, limit: int = MAX_SHOWN) -> str:
    """``repr(value)`` cut to ``limit`` characters with an ellipsis, for error messages."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
