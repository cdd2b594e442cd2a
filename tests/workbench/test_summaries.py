"""Chapter summaries: incremental, cached by content hash, atomic; plus `wikirag summarize`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.errors import EngineError, ProviderError
from engine.tree import parse_kb
from tests.workbench.openai_server import ChatServer, Fail, Say, task_of
from workbench.answer.llm import LLMClient, LLMSettings
from workbench.answer.summaries import load_summaries, summarize_kb
from workbench.cli import main

DOC = """---
title: Chunking
category: rag
---
# Chunking

Chunking splits documents into retrievable units for the index.

## By heading

Splitting by heading keeps each chapter whole, with its breadcrumb.

## Fixed size

Fixed-size chunks of 512 tokens are simple but cut sentences apart.

## Empty

"""


@pytest.fixture
def kb_dir(tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    root.mkdir()
    (root / "chunking.md").write_text(DOC, encoding="utf-8")
    return root


def summarizer(payload):
    if task_of(payload) != "summarize":
        return Fail(400)
    text = payload["messages"][-1]["content"]
    return Say(f"  Summary: {text.splitlines()[0]}.  ")


def client(srv: ChatServer) -> LLMClient:
    return LLMClient(LLMSettings(base_url=srv.base_url, model="sum-model", api_key="sk-sum-key"))


def test_summaries_are_incremental_and_cached_by_content_hash(kb_dir, tmp_path):
    cache = tmp_path / "index" / "summaries.json"
    kb = parse_kb(kb_dir)
    seen: list[tuple[int, int]] = []
    with ChatServer(summarizer) as srv:
        assert summarize_kb(kb, client(srv), cache, progress=lambda d, t: seen.append((d, t))) == (
            3,
            0,
        )
        assert len(srv.payloads) == 3  # the empty chapter is skipped
        assert summarize_kb(kb, client(srv), cache) == (0, 3)
        assert len(srv.payloads) == 3  # nothing asked twice
    assert seen == [(1, 3), (2, 3), (3, 3)]
    by_hash = load_summaries(cache)
    node = next(n for n in kb.nodes.values() if n.title == "By heading")
    assert by_hash[node.content_hash] == "Summary: Chunking › By heading."
    raw = json.loads(cache.read_text(encoding="utf-8"))
    assert raw["version"] == 1
    assert raw["summaries"][node.content_hash]["node_id"] == node.node_id
    assert raw["summaries"][node.content_hash]["model"] == "sum-model"

    (kb_dir / "chunking.md").write_text(
        DOC.replace("cut sentences apart", "cut sentences in half"), encoding="utf-8"
    )
    with ChatServer(summarizer) as srv:
        assert summarize_kb(parse_kb(kb_dir), client(srv), cache) == (1, 2)
        assert "Fixed size" in srv.payloads[0]["messages"][-1]["content"]
    assert len(load_summaries(cache)) == 4  # the old summary stays for the old text


def test_failure_keeps_what_was_done(kb_dir, tmp_path):
    cache = tmp_path / "summaries.json"
    replies = [Say("first"), Fail(500)]
    with ChatServer(replies) as srv, pytest.raises(ProviderError, match="HTTP 500"):
        summarize_kb(parse_kb(kb_dir), client(srv), cache)
    assert list(load_summaries(cache).values()) == ["first"]


def test_without_llm_a_clear_message(kb_dir, tmp_path):
    with pytest.raises(EngineError, match="need an LLM; set OPENAI_BASE_URL and WIKIRAG_LLM_MODEL"):
        summarize_kb(parse_kb(kb_dir), None, tmp_path / "s.json")
    assert load_summaries(tmp_path / "s.json") == {}


def test_corrupt_cache_says_what_to_do(tmp_path):
    bad = tmp_path / "summaries.json"
    bad.write_text("{nope", encoding="utf-8")
    with pytest.raises(EngineError, match="delete it"):
        load_summaries(bad)


def test_cli_summarize_writes_cache_under_index(kb_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("WIKIRAG_LLM_MODEL", raising=False)
    index = tmp_path / "idx"
    assert main(["summarize", "--kb", str(kb_dir), "--index", str(index)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("wikirag: error: chapter summaries need an LLM")
    assert "Traceback" not in err

    with ChatServer(summarizer) as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url)
        monkeypatch.setenv("WIKIRAG_LLM_MODEL", "sum-model")
        assert main(["summarize", "--kb", str(kb_dir), "--index", str(index)]) == 0
    assert len(load_summaries(index / "summaries.json")) == 3
    assert "3 new summaries, 0 cached" in capsys.readouterr().err
