"""The KB boundary: links leaving the KB folder and oversized files are reported and
skipped, decided before they are read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine.errors import EngineError
from engine.tree import parse_kb


def _kb(tmp_path: Path) -> Path:
    kb = tmp_path / "kb"
    (kb / "sub").mkdir(parents=True)
    (kb / "a.md").write_text("# A\n\ninside text\n", encoding="utf-8")
    return kb


def test_a_link_to_a_file_outside_the_kb_is_reported_and_skipped(tmp_path):
    kb = _kb(tmp_path)
    secret = tmp_path / "secret.md"
    secret.write_text("# Secret\n\nroot:x:0:0\n", encoding="utf-8")
    os.symlink(secret, kb / "passwd.md")
    os.symlink(tmp_path, kb / "sub" / "up")  # a folder link leaving the KB: not walked
    os.symlink(kb / "a.md", kb / "sub" / "again.md")  # a link inside the KB is fine
    parsed = parse_kb(kb)
    assert [d.file_path for d in parsed.documents] == ["a.md", "sub/again.md"]
    (problem,) = [p for p in parsed.problems if p.file_path == "passwd.md"]
    assert "outside the knowledge base; it was skipped" in problem.what
    assert all("root:x" not in n.content for d in parsed.documents for n in d.nodes)


def test_a_file_over_the_size_cap_is_reported_and_skipped(tmp_path, monkeypatch):
    kb = _kb(tmp_path)
    big = kb / "big.md"
    big.write_text("# Big\n\n" + "x" * 3000 + "\n", encoding="utf-8")
    parsed = parse_kb(kb, limit_mb=0.001)
    assert [d.file_path for d in parsed.documents] == ["a.md"]
    (problem,) = [p for p in parsed.problems if p.file_path == "big.md"]
    assert "over the 0.001 MB limit; it was skipped" in problem.what
    assert "WIKIRAG_MAX_FILE_MB" in problem.todo
    monkeypatch.setenv("WIKIRAG_MAX_FILE_MB", "0.001")
    assert [d.file_path for d in parse_kb(kb).documents] == ["a.md"]
    monkeypatch.setenv("WIKIRAG_MAX_FILE_MB", "1")
    assert [d.file_path for d in parse_kb(kb).documents] == ["a.md", "big.md"]


@pytest.mark.parametrize("bad", ["lots", "-1", "nan", "0"])
def test_a_bad_size_cap_is_a_one_line_error(tmp_path, monkeypatch, bad):
    monkeypatch.setenv("WIKIRAG_MAX_FILE_MB", bad)
    with pytest.raises(EngineError, match="WIKIRAG_MAX_FILE_MB must be a"):
        parse_kb(_kb(tmp_path))
