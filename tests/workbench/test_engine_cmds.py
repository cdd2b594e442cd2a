from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.engine.engine_kit import write_kb
from workbench.cli import main
from workbench.commands.engine_cmds import parse_filters

HASH = ["--set", "embedding.provider=hash"]


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    write_kb(tmp_path / "kb")
    return tmp_path


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_missing_index_is_one_line_and_non_zero(ws: Path, capsys) -> None:
    rc, out, err = _run(capsys, "search", "重排", "--kb", "kb", *HASH)
    assert rc != 0 and out == ""
    assert err.strip().splitlines() == [
        "wikirag: error: no index at .wikirag/kb; run `wikirag index --kb kb`"
    ]


def test_index_search_chapter_stats(ws: Path, capsys) -> None:
    rc, out, _ = _run(capsys, "index", "--kb", "kb", *HASH)
    assert rc == 0
    assert "full rebuild: 12 added, 0 updated, 0 removed, 0 unchanged" in out
    rc, out, _ = _run(capsys, "index", "--kb", "kb", *HASH, "--json")
    report = json.loads(out)
    assert rc == 0 and report["unchanged"] == 12 and report["embedded"] == 0

    rc, out, _ = _run(capsys, "search", "重排 延迟", "--kb", "kb", *HASH, "--json", "--top-k", "2")
    data = json.loads(out)  # nothing but JSON on stdout
    assert rc == 0
    assert set(data) == {
        "query",
        "results",
        "total",
        "took_ms",
        "timings",
        "index_stats",
        "config_hash",
        "expansion_terms",
        "warnings",
        "bm25_scale",
    }
    assert len(data["results"]) == 2
    assert data["results"][0]["node_id"] == "retrieval/rerank#重排/延迟"
    assert set(data["results"][0]) >= {
        "node_id",
        "score",
        "rank_source",
        "title",
        "breadcrumb",
        "content",
        "summary",
        "metadata",
        "expanded",
    }

    rc, out, _ = _run(
        capsys, "search", "切块", "--kb", "kb", *HASH, "--filter", "category=rag", "--json"
    )
    assert {r["metadata"]["category"] for r in json.loads(out)["results"]} == {"rag"}

    rc, out, _ = _run(capsys, "search", "重排 延迟", "--kb", "kb", *HASH, "--expand", "parent")
    assert rc == 0
    assert " 1. " in out and "重排 > 延迟" in out and "parent: retrieval/rerank#重排" in out
    assert "candidates in" in out and "config " in out

    rc, out, _ = _run(capsys, "chapter", "rag/chunking#切块策略", "--kb", "kb", "--children")
    assert rc == 0 and out.splitlines() == [
        "rag/chunking#切块策略/按标题切块\t按标题切块",
        "rag/chunking#切块策略/固定长度切块\t固定长度切块",
    ]
    rc, out, _ = _run(capsys, "chapter", "rag/chunking#切块策略", "--kb", "kb", "--json")
    assert json.loads(out)["title"] == "切块策略"

    rc, out, _ = _run(capsys, "stats", "--kb", "kb", *HASH, "--json")
    stats = json.loads(out)
    assert stats["index"]["rows"] == 12 and stats["freshness"]["fresh"] is True
    rc, out, _ = _run(capsys, "stats", "--kb", "kb", *HASH)
    assert "freshness: up to date" in out


def test_errors_are_one_line(ws: Path, capsys) -> None:
    assert _run(capsys, "index", "--kb", "kb", *HASH)[0] == 0
    rc, out, err = _run(capsys, "search", "   ", "--kb", "kb", *HASH)
    assert (
        rc != 0
        and out == ""
        and err == ("wikirag: error: query is empty; pass a question or keywords to search for\n")
    )
    rc, out, err = _run(capsys, "chapter", "rag/chunkin", "--kb", "kb")
    assert rc != 0 and out == "" and len(err.strip().splitlines()) == 1
    assert "unknown node id 'rag/chunkin'; did you mean rag/chunking" in err
    rc, _, err = _run(capsys, "search", "x", "--kb", "kb", *HASH, "--filter", "author=me")
    assert rc != 0 and "unknown filter 'author'" in err


def test_parse_filters() -> None:
    assert parse_filters(["category=rag", "keywords=a,b", "keywords=c"]) == {
        "category": ["rag"],
        "keywords": ["a", "b", "c"],
    }
    from engine.errors import EngineError

    with pytest.raises(EngineError, match="KEY=VALUE"):
        parse_filters(["category"])


def test_search_says_when_a_question_is_cross_lingual(ws: Path, capsys) -> None:
    # The tiny KB is Chinese: an English question there is cross-lingual.
    assert _run(capsys, "index", "--kb", "kb", *HASH)[0] == 0
    rc, out, _ = _run(capsys, "search", "How does rerank work?", "--kb", "kb", *HASH)
    assert rc == 0
    assert "cross-lingual question: keyword channel weight x 0.2 (fusion.cross_lingual_bm25)" in out
    rc, out, _ = _run(capsys, "search", "How does rerank work?", "--kb", "kb", *HASH, "--json")
    assert json.loads(out)["bm25_scale"] == 0.2
    for argv in (["重排怎么做"], ["How does rerank work?", "--mode", "keyword"]):
        rc, out, _ = _run(capsys, "search", *argv, "--kb", "kb", *HASH)
        assert rc == 0 and "cross-lingual" not in out
    off = ["--set", "fusion.cross_lingual_bm25=1"]
    rc, out, _ = _run(capsys, "search", "How does rerank work?", "--kb", "kb", *HASH, *off)
    assert rc == 0 and "cross-lingual" not in out
