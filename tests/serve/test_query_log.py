"""The opt-in query log: HTTP, MCP and chat record questions only when asked; sampling."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import ClientSession, stdio_client

from tests.serve.conftest import TestKB, live_server, make_kb, mcp_stdio_params
from workbench.cli import main
from workbench.eval import golden, pending
from workbench.eval import query_log as QL
from workbench.serve.app import create_app


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> TestKB:
    return make_kb(tmp_path_factory.mktemp("qlog"))


@pytest.fixture(autouse=True)
def _no_llm_no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "")
    monkeypatch.setenv("WIKIRAG_LLM_MODEL", "")
    monkeypatch.delenv(QL.LOG_ENV, raising=False)


def _log(kb: TestKB) -> Path:
    return QL.log_path(kb.ws.index)


def _fresh(kb: TestKB) -> None:
    _log(kb).unlink(missing_ok=True)


def _http(kb: TestKB, log: QL.QueryLog | None) -> None:
    app = create_app(kb.ws, kb.cfg, llm=None, query_log=log)
    with live_server(app) as url, httpx.Client(base_url=url, timeout=60) as c:
        assert c.post("/search", json={"query": "混合检索 权重"}).status_code == 200
        assert c.post("/ask", json={"question": "What is hybrid search?"}).status_code == 200


def test_http_records_questions_only_when_logging_is_on(kb: TestKB) -> None:
    _fresh(kb)
    _http(kb, None)
    assert not _log(kb).exists()  # the default records nothing
    _http(kb, QL.QueryLog(_log(kb)))
    got = QL.QueryLog(_log(kb)).entries()
    assert [(e["q"], e["channel"]) for e in got] == [
        ("混合检索 权重", "http"),
        ("What is hybrid search?", "http"),
    ]
    # Only the question, the channel and the time: no answer, no headers, no keys.
    assert set(json.loads(_log(kb).read_text(encoding="utf-8").splitlines()[1])) == {
        "q", "channel", "at",
    }  # fmt: skip


def _mcp(kb: TestKB, log: bool) -> None:
    async def run() -> Any:
        async with (
            stdio_client(mcp_stdio_params(kb, *(["--log-queries"] if log else []))) as (
                read,
                write,
            ),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            await session.call_tool("search_knowledge", {"query": "BM25 中文分词"})
            await session.call_tool("ask", {"question": "父子块是什么"})

    anyio.run(run)


def test_mcp_records_questions_only_with_log_queries(kb: TestKB) -> None:
    _fresh(kb)
    _mcp(kb, log=False)
    assert not _log(kb).exists()
    _mcp(kb, log=True)
    got = QL.QueryLog(_log(kb)).entries()
    assert [(e["q"], e["channel"]) for e in got] == [
        ("BM25 中文分词", "mcp"),
        ("父子块是什么", "mcp"),
    ]


def _ask(kb: TestKB, *extra: str) -> None:
    argv = ["ask", "how are chunks split?", "--kb", str(kb.ws.kb), "--index", str(kb.ws.index)]
    assert main([*argv, "--config", str(kb.config_file), *extra]) == 0


def test_chat_records_with_the_flag_or_the_workspace_variable(kb, capsys, monkeypatch) -> None:
    _fresh(kb)
    _ask(kb)
    assert not _log(kb).exists()
    _ask(kb, "--log-queries")
    monkeypatch.setenv(QL.LOG_ENV, "1")
    _ask(kb)
    got = QL.QueryLog(_log(kb)).entries()
    assert [(e["q"], e["channel"]) for e in got] == [("how are chunks split?", "chat")] * 2


def test_retention_drops_old_entries_when_a_log_is_opened(tmp_path: Path) -> None:
    log = QL.QueryLog(tmp_path / "x.queries.jsonl", retention_days=7)
    old = {"q": "old one", "channel": "http", "at": "2020-01-01T00:00:00Z"}
    log.path.write_text(json.dumps(old) + "\n", encoding="utf-8")
    log.record("new one", "chat")
    assert log.prune(dt.datetime.now(dt.UTC)) == 1
    assert [e["q"] for e in log.entries()] == ["new one"]
    with pytest.raises(QL.EngineError, match="at least 1 day"):
        QL.query_log_for(tmp_path / "idx", True, 0)


ENTRIES = [
    {"q": q} for q in ["a b c d"] * 5 + ["What is BM25?"] * 3 + ["what is bm25"] + ["x y z w"]
]


def test_sampling_strategies_and_near_duplicates() -> None:
    top = QL.sample(ENTRIES, 2, "frequency")
    # "what is bm25" is the same question as "What is BM25?" (case, punctuation): merged.
    assert top == [("a b c d", 5), ("What is BM25?", 4)]
    assert QL.sample(ENTRIES, 5, "frequency", exclude=["A B C D!"]) == [
        ("What is BM25?", 4), ("x y z w", 1),
    ]  # fmt: skip
    assert sorted(QL.sample(ENTRIES, 3, "random", seed=1)) == sorted(
        QL.sample(ENTRIES, 3, "frequency")
    )
    assert QL.sample(ENTRIES, 1, "proportional", seed=5) == QL.sample(
        ENTRIES, 1, "proportional", seed=5
    )
    with pytest.raises(QL.EngineError, match="--strategy must be one of"):
        QL.sample(ENTRIES, 1, "loudest")
    assert QL.near_duplicate("混合检索的权重怎么设", "混合检索的权重怎么设？")
    assert not QL.near_duplicate("混合检索的权重怎么设", "父子块是什么")


def test_golden_sample_puts_logged_questions_in_the_rating_queue(kb, capsys, monkeypatch) -> None:
    monkeypatch.chdir(kb.root)
    _fresh(kb)
    log = QL.QueryLog(_log(kb))
    for q in ["混合检索 权重"] * 3 + ["BM25 中文分词", "混合检索 权重!"]:
        log.record(q, "http")
    ds = kb.root / "datasets" / "g.yaml"
    ds.parent.mkdir(exist_ok=True)
    ds.write_text(
        "name: g\nqueries:\n  - {id: q001, query: BM25 中文分词, relevant: [x]}\n", "utf-8"
    )
    where = ["--kb", str(kb.ws.kb), "--index", str(kb.ws.index), "--dataset", str(ds)]
    assert (
        main(
            [
                "golden",
                "sample",
                "--from-log",
                "--n",
                "20",
                "--strategy",
                "frequency",
                *where,
                "--json",
            ]
        )
        == 0
    )
    added = json.loads(capsys.readouterr().out)
    # The set's own question is left out; the two spellings of the other are one.
    assert [(a["id"], a["query"]) for a in added] == [("log001", "混合检索 权重")]
    assert "asked 4 times" in added[0]["notes"]
    ws_args = ["--kb", str(kb.ws.kb), "--dataset", str(ds)]
    judge = [*ws_args, "--index", str(kb.ws.index), "--config", str(kb.config_file)]
    assert main(["judge", "--pending", "--list", "--json", "--k", "3", *judge]) == 0
    queue = json.loads(capsys.readouterr().out)
    assert [e["query_id"] for e in queue] == ["log001"] * 3
    node = queue[0]["node_id"]
    assert main(["judge", "set", "log001", node, "3", "--rater", "ana", *ws_args]) == 0
    assert main(["judge", "--pending", "--list", "--json", "--k", "3", *judge]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 2  # rated: out of the queue
    assert main(["golden", "sample", "--promote", *where]) == 0
    item = golden.load(ds).get("log001")
    assert item is not None and item.relevant == (node,) and item.qrels == {node: 3}
    assert pending.load(ds) == []
