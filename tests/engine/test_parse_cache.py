from __future__ import annotations

import os
from pathlib import Path

import pytest

import engine.parse_cache as parse_cache
from engine.parse_cache import ParseCache
from engine.tree import parse_kb
from tests.engine.engine_kit import write_kb


@pytest.fixture
def kb_dir(tmp_path: Path) -> Path:
    root = write_kb(tmp_path / "kb")
    old = 1_600_000_000_000_000_000  # files last written long ago: their stat is trusted
    for p in root.rglob("*.md"):
        os.utime(p, ns=(old, old))
    return root


def test_second_parse_reuses_every_unchanged_document(kb_dir: Path) -> None:
    cache = ParseCache()
    first = parse_kb(kb_dir, cache=cache)
    assert (cache.parsed, cache.reused) == (3, 0)
    cache.reset_counts()
    second = parse_kb(kb_dir, cache=cache)
    assert (cache.parsed, cache.reused) == (0, 3)
    assert second.documents == first.documents
    assert all(a is b for a, b in zip(second.documents, first.documents, strict=True))


def test_only_the_changed_file_is_parsed_and_the_result_equals_a_plain_parse(
    kb_dir: Path,
) -> None:
    cache = ParseCache()
    parse_kb(kb_dir, cache=cache)
    p = kb_dir / "rag/chunking.md"
    p.write_text(p.read_text().replace("切块决定", "切分决定"), "utf-8")
    (kb_dir / "evaluation/metrics.md").unlink()
    cache.reset_counts()
    kb = parse_kb(kb_dir, cache=cache)
    assert (cache.parsed, cache.reused) == (1, 1)
    assert kb.documents == parse_kb(kb_dir).documents
    assert set(cache.entries) == {"rag/chunking.md", "retrieval/rerank.md"}


def test_same_size_and_mtime_edit_is_caught_while_the_mtime_is_recent(
    kb_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Within RACY_NS of recording, size+mtime are not trusted: the bytes are hashed.
    monkeypatch.setattr(parse_cache, "RACY_NS", 10**30)
    cache = ParseCache()
    parse_kb(kb_dir, cache=cache)
    p = kb_dir / "rag/chunking.md"
    st = p.stat()
    p.write_text(p.read_text().replace("切块决定", "切分决定"), "utf-8")  # same byte length
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert p.stat().st_size == st.st_size
    cache.reset_counts()
    kb = parse_kb(kb_dir, cache=cache)
    assert cache.parsed == 1
    assert any("切分决定" in n.content for n in kb.nodes.values())


def test_touched_but_identical_file_is_not_parsed(kb_dir: Path) -> None:
    cache = ParseCache()
    parse_kb(kb_dir, cache=cache)
    os.utime(kb_dir / "rag/chunking.md")  # new mtime, same bytes
    cache.reset_counts()
    parse_kb(kb_dir, cache=cache)
    assert (cache.parsed, cache.reused) == (0, 3)


def test_save_and_load_round_trip(kb_dir: Path, tmp_path: Path) -> None:
    cache = ParseCache()
    kb = parse_kb(kb_dir, cache=cache)
    cache.save(tmp_path / "parse.cache")
    loaded = ParseCache.load(tmp_path / "parse.cache")
    assert parse_kb(kb_dir, cache=loaded).documents == kb.documents
    assert (loaded.parsed, loaded.reused) == (0, 3)


def test_unreadable_cache_file_loads_empty(tmp_path: Path) -> None:
    (tmp_path / "parse.cache").write_bytes(b"not a pickle")
    assert ParseCache.load(tmp_path / "parse.cache").entries == {}
    assert ParseCache.load(tmp_path / "missing.cache").entries == {}


def test_documents_record_the_hash_of_their_bytes(kb_dir: Path) -> None:
    import hashlib

    kb = parse_kb(kb_dir)
    doc = next(d for d in kb.documents if d.file_path == "rag/chunking.md")
    want = hashlib.sha256((kb_dir / "rag/chunking.md").read_bytes()).hexdigest()[:16]
    assert doc.source_hash == want
