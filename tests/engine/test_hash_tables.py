from __future__ import annotations

import pytest

from engine.hash_tables import (
    FileHashes,
    NodeHashes,
    base_payload,
    read_base,
    with_changes,
)

NODES = {"a": ("1", "2"), "b": ("3", "4"), "c": ("5", "6")}


def test_changes_over_a_base_read_like_a_dict() -> None:
    base = NodeHashes.of(NODES).rebased("hashes_x.json")
    now = base.updated({"b": ("3", "9"), "c": None, "d": ("7", "8")})
    want = {"a": ("1", "2"), "b": ("3", "9"), "d": ("7", "8")}
    assert now == want and now.as_dict() == want and len(now) == 3
    assert sorted(now) == ["a", "b", "d"] and now.key_set() == frozenset(want)
    assert "c" not in now and now.get("c") is None and now["b"] == ("3", "9")
    with pytest.raises(KeyError):
        now["c"]
    assert now.changed == {"b": ("3", "9"), "d": ("7", "8")} and now.removed == {"c"}
    # Back to the base's value: no change recorded; the base itself is never altered.
    back = now.updated({"b": ("3", "4"), "c": ("5", "6")})
    assert back.changes == 1 and back == {**NODES, "d": ("7", "8")}
    assert base == NODES and base.changes == 0


def test_the_fingerprint_depends_on_the_entries_only() -> None:
    base = NodeHashes.of(NODES).rebased("hashes_x.json")
    now = base.updated({"b": ("3", "9"), "c": None, "d": ("7", "8")})
    fresh = NodeHashes.of({"d": ("7", "8"), "b": ("3", "9"), "a": ("1", "2")})
    assert now.fingerprint() == fresh.fingerprint()
    assert now.fingerprint() != base.fingerprint()
    assert base.updated({"c": ("5", "7")}).fingerprint() != base.fingerprint()


def test_a_base_file_round_trips_with_the_changes_a_manifest_keeps() -> None:
    nodes = NodeHashes.of(NODES).rebased("h.json")
    files = FileHashes.of({"x.md": "f1", "y.md": "f2"}).rebased("h.json")
    n2, f2 = read_base(base_payload(nodes, files), "h.json")
    assert n2 == NODES and f2 == {"x.md": "f1", "y.md": "f2"}
    assert n2.fingerprint() == nodes.fingerprint()
    changed = files.updated(files.diff({"x.md": "f9", "z.md": "f3"}))
    assert changed == {"x.md": "f9", "z.md": "f3"} and changed.removed == {"y.md"}
    n3, f3 = with_changes(n2, f2, {"a": ["0", "0"]}, ["b"], changed.changed, ["y.md"])
    assert n3 == {"a": ("0", "0"), "c": ("5", "6")} and f3 == changed


def test_many_changes_ask_for_a_new_base(monkeypatch: pytest.MonkeyPatch) -> None:
    import engine.hash_tables as hash_tables

    base = NodeHashes.of(NODES)
    assert base.needs_base()  # never saved
    saved = base.rebased("h.json")
    assert not saved.needs_base()
    monkeypatch.setattr(hash_tables, "COMPACT_MIN_ENTRIES", 0)
    assert saved.updated({"a": None}).needs_base()  # 1 change > 5% of 3
