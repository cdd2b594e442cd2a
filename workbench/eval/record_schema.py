"""The run record's schema version, its migrations, and a reader of its JSON fields whose
errors name the file and the field (``queries[3].ranked[0].node_id``).

Bump :data:`SCHEMA_VERSION` when the shape `wikirag eval` writes changes, and add the step
that turns the previous version into the new one to :data:`MIGRATIONS`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from engine.errors import EngineError
from workbench.eval.run_labels import derived_label

SCHEMA_VERSION = 3


class RunRecordError(EngineError):
    """A run record file is unreadable, or a field is missing or of the wrong type."""


def _v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    # Version 1 (records saved before 2026-12-01) has exactly the fields of version 2; the
    # version number is all that is new. A later shape change adds a step here.
    return {**data, "schema_version": 2}


def _v2_to_v3(data: dict[str, Any]) -> dict[str, Any]:
    # Version 3 names the run by its config label; older runs get one derived from their
    # config (``defaults``, ``defaults+key=value`` or ``config <hash6>``).
    label = derived_label(str(data.get("config_yaml") or ""), str(data.get("config_hash") or ""))
    return {**data, "label": label, "schema_version": 3}


# Step n turns a version-n record into a version-(n + 1) record.
MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {
    1: _v1_to_v2,
    2: _v2_to_v3,
}


def migrate(data: dict[str, Any], source: str = "run record") -> dict[str, Any]:
    """``data`` at :data:`SCHEMA_VERSION` (``data`` itself is never changed)."""
    version = data.get("schema_version", 1)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise RunRecordError(f"{source}: schema_version {version!r} is not a positive integer")
    if version > SCHEMA_VERSION:
        raise RunRecordError(
            f"{source}: schema_version {version} is newer than this wikirag reads "
            f"({SCHEMA_VERSION}); upgrade wikirag to read it"
        )
    while version < SCHEMA_VERSION:
        data = MIGRATIONS[version](data)
        version += 1
    return data


class FieldReader:
    """Typed access to one JSON object of a record; errors name the file and the field."""

    def __init__(self, data: Any, where: str, source: str) -> None:
        if not isinstance(data, dict):
            raise RunRecordError(
                f"{source}: {where or 'the record'} is {type(data).__name__}, expected an "
                "object; delete the file or re-run `wikirag eval`"
            )
        self.data, self.where, self.source = data, where, source

    def _path(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def _get(self, key: str) -> Any:
        if key not in self.data:
            raise RunRecordError(
                f"{self.source}: field `{self._path(key)}` is missing (written by another "
                "wikirag version, or edited?); re-run `wikirag eval` to write a fresh record"
            )
        return self.data[key]

    def wrong(self, key: str, value: Any, expected: str) -> RunRecordError:
        return RunRecordError(
            f"{self.source}: field `{self._path(key)}` is {type(value).__name__} "
            f"{_short(value)}, expected {expected}; re-run `wikirag eval`"
        )

    def text(self, key: str) -> str:
        v = self._get(key)
        if not isinstance(v, str):
            raise self.wrong(key, v, "text")
        return v

    def opt_text(self, key: str) -> str | None:
        v = self._get(key)
        if v is not None and not isinstance(v, str):
            raise self.wrong(key, v, "text or null")
        return v

    def integer(self, key: str) -> int:
        v = self._get(key)
        if isinstance(v, bool) or not isinstance(v, int):
            raise self.wrong(key, v, "an integer")
        return v

    def opt_integer(self, key: str) -> int | None:
        v = self._get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
            raise self.wrong(key, v, "an integer or null")
        return v

    def number(self, key: str) -> float:
        v = self._get(key)
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise self.wrong(key, v, "a number")
        return v

    def opt_number(self, key: str) -> float | None:
        v = self._get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | float)):
            raise self.wrong(key, v, "a number or null")
        return v

    def flag(self, key: str) -> bool:
        v = self._get(key)
        if not isinstance(v, bool):
            raise self.wrong(key, v, "true or false")
        return v

    def texts(self, key: str) -> tuple[str, ...]:
        v = self._get(key)
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise self.wrong(key, v, "a list of texts")
        return tuple(v)

    def numbers(self, key: str) -> dict[str, float]:
        v = self._get(key)
        if not isinstance(v, dict) or not all(
            isinstance(x, int | float) and not isinstance(x, bool) for x in v.values()
        ):
            raise self.wrong(key, v, "an object of numbers")
        return dict(v)

    def obj(self, key: str) -> FieldReader:
        return FieldReader(self._get(key), self._path(key), self.source)

    def objs(self, key: str) -> list[FieldReader]:
        v = self._get(key)
        if not isinstance(v, list):
            raise self.wrong(key, v, "a list")
        return [FieldReader(x, f"{self._path(key)}[{i}]", self.source) for i, x in enumerate(v)]


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 40 else text[:37] + "..."
