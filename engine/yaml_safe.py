"""The one YAML reader: aliases refused before anything is built, errors one short line.

A 1 KB "billion laughs" file (anchors that reference anchors) expands to gigabytes in
``yaml.safe_load`` (and its error message, quoting the value, to tens of MB); no file the
project reads needs aliases, so any alias is an error, found on the event stream, which
never expands anything. Every message names the file (``what``) and is capped at
``MAX_MESSAGE`` characters, whatever the file holds. ``expect`` checks a value's type the
way the schema says (``"false"`` is not a boolean, a list is not a string).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from engine.errors import ConfigError, yaml_error_summary

MAX_SHOWN = 200  # characters of a user's value quoted back in an error message
MAX_MESSAGE = 400  # characters of any message this module raises

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def cap(message: str, limit: int = MAX_MESSAGE) -> str:
    """``message`` on one line, cut to ``limit`` characters with an ellipsis."""
    one = " ".join(message.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


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
                    cap(
                        f"{what}: {where}YAML aliases (*{event.anchor[:40]}) are not "
                        "allowed; write the value out in full"
                    )
                )
    except yaml.YAMLError:
        return


def safe_load(text: str, what: str = "YAML") -> Any:
    """``yaml.safe_load`` that refuses aliases first; a syntax error is a ConfigError
    ``{what} is not valid YAML (line L, column C: ...)``."""
    refuse_aliases(text, what)
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        raise ConfigError(cap(f"{what} is not valid YAML ({yaml_error_summary(exc)})")) from exc


def load_mapping(text: str, what: str = "YAML") -> dict[str, Any]:
    """``safe_load`` of a file that must be a mapping (an empty file is ``{}``)."""
    data = safe_load(text, what)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(cap(f"{what} must be a YAML mapping (key: value), got {short(data)}"))
    return data


def load_file(path: str | Path, what: str | None = None) -> Any:
    """``safe_load`` of the file at ``path``; messages name the file (or ``what``)."""
    p = Path(path)
    name = what or str(p)
    try:
        text = p.read_bytes().decode("utf-8-sig")
    except OSError as exc:
        raise ConfigError(cap(f"cannot read {name}: {exc.strerror or exc}")) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(cap(f"{name} is not UTF-8 text ({exc.reason}); re-save it")) from exc
    return safe_load(text, name)


_KINDS: dict[type, str] = {
    bool: "boolean (true or false)",
    str: "string",
    int: "integer",
    float: "number",
    list: "list",
    dict: "mapping",
}


def expect(value: Any, kind: type, what: str) -> Any:
    """``value`` if it is of ``kind`` (an int is a float; a bool is never an int or float),
    else a ConfigError ``{what} must be a {kind}, got {value}``."""
    ok = isinstance(value, kind) and not (kind in (int, float) and isinstance(value, bool))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        ok = True
    if not ok:
        raise ConfigError(
            cap(f"{what} must be a {_KINDS.get(kind, kind.__name__)}, got {short(value)}")
        )
    return value


def short(value: Any, limit: int = MAX_SHOWN) -> str:
    """``repr(value)`` cut to ``limit`` characters with an ellipsis, for error messages."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
