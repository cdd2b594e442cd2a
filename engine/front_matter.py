"""A Markdown file's bytes -> normalised text, and its YAML/TOML front matter split off.

Problems (invalid UTF-8, binary files, front matter that does not parse) are collected as
``Problem`` values, never raised: the rest of the file is kept.
"""

from __future__ import annotations

import datetime
import re
import tomllib
from typing import Any

import yaml

from engine.chapters import Problem
from engine.errors import ConfigError
from engine.yaml_safe import refuse_aliases

_LINE_BREAKS = re.compile(r"\r\n?")
_TOML_ERROR_LINE = re.compile(r"at line (\d+)")
_ALIAS_AT = re.compile(r"line (\d+): YAML aliases \((\*[^)]*)\)")


def _jsonable(value: Any) -> Any:
    """Front matter values as JSON types (YAML/TOML dates become ISO strings)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    return value


def fence_line(line: str, char: str) -> int:
    """Length of a run of ``char`` that makes up the whole (stripped) line, else 0."""
    s = line.strip()
    return len(s) if s and s == char * len(s) else 0


def split_front_matter(
    text: str, rel_path: str = ""
) -> tuple[dict[str, Any], str, int, list[Problem]]:
    """Split YAML (``---``) or TOML (``+++``) front matter off normalised text.

    Returns (front matter, body, number of lines the front matter took, problems).
    Front matter is recognised only on the very first line and only when it is closed;
    otherwise the whole text is body.
    """
    lines = text.split("\n")
    opener = lines[0].rstrip(" \t")
    if opener.startswith("---") and fence_line(opener, "-"):
        kind = "YAML"
    elif opener == "+++":
        kind = "TOML"
    else:
        return {}, text, 0, []
    close = None
    for i in range(1, len(lines)):
        s = lines[i].rstrip(" \t")
        if kind == "YAML" and (s == "..." or (s[:1] == "-" and fence_line(s, "-") >= len(opener))):
            close = i
            break
        if kind == "TOML" and s == "+++":
            close = i
            break
    if close is None:
        return {}, text, 0, []
    raw = "\n".join(lines[1:close])
    body = "\n".join(lines[close + 1 :])
    problems: list[Problem] = []
    data: Any = {}
    try:
        if kind == "YAML":
            # A few lines of anchors referencing anchors expand to gigabytes in safe_load;
            # front matter never needs an alias (engine/yaml_safe.py, issue 12 item 11).
            refuse_aliases(raw, "front matter")
        data = yaml.safe_load(raw) if kind == "YAML" else tomllib.loads(raw)
    except ConfigError as exc:
        m = _ALIAS_AT.search(str(exc))  # its line counts from the first front matter line
        problems.append(
            Problem(
                rel_path,
                int(m.group(1)) + 1 if m else 1,
                f"front matter uses a YAML alias ({m.group(2) if m else '*'}), which is not "
                "allowed; it is ignored",
                "write each front matter value out in full (no &anchor / *alias)",
            )
        )
        data = {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 2 if mark is not None else 1
        reason = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        problems.append(
            Problem(
                rel_path,
                line,
                f"front matter is not valid YAML ({reason}); it is ignored",
                "fix the YAML between the '---' lines (quote values that contain ':' or '#')",
            )
        )
        data = {}
    except tomllib.TOMLDecodeError as exc:
        m = _TOML_ERROR_LINE.search(str(exc))
        problems.append(
            Problem(
                rel_path,
                int(m.group(1)) + 1 if m else 1,
                f"front matter is not valid TOML ({exc}); it is ignored",
                "fix the TOML between the '+++' lines",
            )
        )
        data = {}
    if data is None:
        data = {}
    if not isinstance(data, dict):
        problems.append(
            Problem(
                rel_path,
                1,
                f"front matter is a {type(data).__name__}, not a mapping of keys to values; it is ignored",
                "write the front matter as 'key: value' lines (e.g. 'title: My page')",
            )
        )
        data = {}
    return _jsonable(data), body, close + 1, problems


def decode_markdown(data: bytes, rel_path: str = "") -> tuple[str | None, list[Problem]]:
    """Bytes -> text with BOM stripped and line endings normalised to "\\n".

    Returns (None, [error]) for a binary file (NUL bytes); invalid UTF-8 is replaced
    with U+FFFD and reported, never fatal.
    """
    if b"\x00" in data:
        return None, [
            Problem(
                rel_path,
                0,
                "file contains NUL bytes (binary, or UTF-16 text); it was skipped",
                "save it as UTF-8 text, or remove it from the knowledge base",
                severity="error",
            )
        ]
    problems: list[Problem] = []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        problems.append(
            Problem(
                rel_path,
                data[: exc.start].count(b"\n") + 1,
                "file is not valid UTF-8; undecodable bytes were replaced with U+FFFD",
                "re-save the file as UTF-8",
            )
        )
        text = data.decode("utf-8", errors="replace")
    return normalise_text(text), problems


def normalise_text(text: str) -> str:
    if text.startswith("\ufeff"):
        text = text[1:]
    return _LINE_BREAKS.sub("\n", text)


__all__ = ["decode_markdown", "fence_line", "normalise_text", "split_front_matter"]
