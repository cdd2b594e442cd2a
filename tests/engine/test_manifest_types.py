"""A manifest.json with fields of the wrong type is a one-line error, not a traceback later."""

from __future__ import annotations

import json

import pytest

from engine.errors import EngineError
from engine.manifest import read_manifest
from engine.store import Location

GOOD = {
    "table": "chunks",
    "version": 3,
    "signature": {"provider": "hash", "model": "", "dims": 8},
    "tokenizer": "jieba-search",
    "content_chars": 1500,
    "nodes": {},
    "kb_fingerprint": "f",
    "created_at": "2026-01-01",
    "updated_at": "2026-01-01",
    "build_id": "b1",
}


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("version", "three", "field 'version' must be int, got 'three'"),
        ("version", True, "field 'version' must be int, got True"),
        ("table", ["x"] * 500, "field 'table' must be str, got ['x', 'x'"),
        ("signature", "hash", "field 'signature' must be dict"),
        ("content_chars", 1.5, "field 'content_chars' must be int"),
    ],
)
def test_a_manifest_field_of_the_wrong_type_is_one_line(tmp_path, key, value, message):
    (tmp_path / "manifest.json").write_text(json.dumps({**GOOD, key: value}), encoding="utf-8")
    with pytest.raises(EngineError) as exc:
        read_manifest(Location(str(tmp_path)))
    msg = str(exc.value)
    assert message in msg and "manifest.json is unreadable" in msg
    assert "\n" not in msg and len(msg) < 600


def test_a_well_typed_manifest_still_reads(tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps(GOOD), encoding="utf-8")
    m = read_manifest(Location(str(tmp_path)))
    assert m is not None and m.version == 3 and m.build_id == "b1"
