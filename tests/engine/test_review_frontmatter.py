"""Front matter with scalar values where lists are expected must not crash indexing."""

from __future__ import annotations

from engine.tree import parse_document


def test_scalar_keywords_are_one_keyword() -> None:
    doc = parse_document("---\nkeywords: 12\n---\n# T\n\nbody\n", "k.md")
    assert doc.nodes[1].keywords == ["12"]


def test_boolean_and_null_keywords() -> None:
    assert parse_document("---\nkeywords: true\n---\n# T\n", "b.md").nodes[1].keywords == ["True"]
    assert parse_document("---\nkeywords:\n---\n# T\n", "n.md").nodes[1].keywords == []
