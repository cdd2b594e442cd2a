"""Saving an unchanged golden set leaves the file byte for byte as it was."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from workbench.eval import golden as g

TEXT = """name: demo
queries:
  - id: q001
    query: RAG 的切块策略有哪些？
    relevant: [rag/chunking#切块策略/按标题切分]
    category: rag
  - id: q051
    query: 公司年会在哪里举办？
    unanswerable: true
"""


def test_noop_save_adds_no_default_difficulty(tmp_path: Path) -> None:
    p = tmp_path / "demo.yaml"
    p.write_text(TEXT, encoding="utf-8")
    g.save(g.load(p))
    assert p.read_text(encoding="utf-8") == TEXT


def test_an_edited_difficulty_is_still_written(tmp_path: Path) -> None:
    p = tmp_path / "demo.yaml"
    p.write_text(TEXT, encoding="utf-8")
    gs = g.load(p)
    item = replace(gs.get("q001"), difficulty="hard")
    g.save(g.with_item(gs, item))
    assert g.load(p).get("q001").difficulty == "hard"
    assert "difficulty" not in p.read_text(encoding="utf-8").split("q051")[1]
