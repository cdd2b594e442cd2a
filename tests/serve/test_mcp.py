"""The MCP server through the SDK's own client over stdio: `python -m workbench.cli mcp --stdio`."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, stdio_client
from mcp.shared.exceptions import MCPError

from tests.serve.conftest import TestKB, mcp_stdio_params
from workbench.answer.chat import DEFAULT_TOP_K
from workbench.serve.limits import MAX_QUERY_CHARS
from workbench.serve.mcp import doc_uri


def _json(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)


async def _session_run(kb: TestKB, errlog_path: Path) -> dict[str, Any]:
    """Drive one session; every stdout line that is not protocol shows up in `stray`."""
    out: dict[str, Any] = {"stray": []}

    async def on_message(message: Any) -> None:
        if isinstance(message, Exception):
            out["stray"].append(repr(message))

    with errlog_path.open("w", encoding="utf-8") as errlog:
        async with (
            stdio_client(mcp_stdio_params(kb), errlog=errlog) as (read, write),
            ClientSession(read, write, message_handler=on_message) as session,
        ):
            init = await session.initialize()
            out["server_name"] = init.server_info.name
            out["instructions"] = init.instructions
            tools = await session.list_tools()
            out["tools"] = {t.name: t for t in tools.tools}

            out["search"] = await session.call_tool(
                "search_knowledge",
                {"query": "按标题切分", "top_k": 3, "filters": {"category": "rag"}},
            )
            out["keyword"] = await session.call_tool(
                "search_knowledge", {"query": "BM25", "search_mode": "keyword", "top_k": 2}
            )
            out["empty"] = await session.call_tool("search_knowledge", {"query": " "})
            out["bad_mode"] = await session.call_tool(
                "search_knowledge", {"query": "x", "search_mode": "fuzzy"}
            )
            out["chapter"] = await session.call_tool(
                "get_chapter", {"node_id": "rag/chunking-strategies"}
            )
            out["no_children"] = await session.call_tool(
                "get_chapter", {"node_id": "rag/chunking-strategies", "include_children": False}
            )
            out["unknown_node"] = await session.call_tool(
                "get_chapter", {"node_id": "rag/chunking-strategy"}
            )
            out["ask"] = await session.call_tool(
                "ask", {"question": "按标题切分时 chunk size 设多少？", "top_k": 3}
            )
            out["unknown_tool"] = await session.call_tool("delete_everything", {})
            for tool, arg in (("search_knowledge", "query"), ("ask", "question")):
                try:
                    await session.call_tool(tool, {arg: "检索" * (MAX_QUERY_CHARS // 2 + 1)})
                except MCPError as exc:
                    out[f"long_{tool}"] = exc

            out["resources"] = (await session.list_resources()).resources
            out["read"] = await session.read_resource(doc_uri("rag/chunking-strategies"))
            out["read_template"] = await session.read_resource("wiki://retrieval/hybrid-search")
            try:
                await session.read_resource("wiki://rag/no-such-doc")
            except MCPError as exc:
                out["read_missing"] = exc
            try:
                await session.read_resource("wiki://../../etc/passwd")
            except MCPError as exc:
                out["read_escape"] = exc
    return out


@pytest.fixture(scope="module")
def session_log(test_kb: TestKB, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    errlog = tmp_path_factory.mktemp("mcp") / "stderr.txt"
    out = anyio.run(_session_run, test_kb, errlog)
    out["stderr"] = errlog.read_text(encoding="utf-8")
    return out


def test_stdout_carries_only_protocol_messages(session_log):
    assert session_log["stray"] == []
    assert "wikirag mcp: KB" in session_log["stderr"]  # logs went to stderr instead


def test_initialize_and_list_tools(session_log):
    assert session_log["server_name"] == "wikirag"
    assert "search_knowledge" in session_log["instructions"]
    tools = session_log["tools"]
    assert set(tools) == {"search_knowledge", "get_chapter", "ask"}
    search_props = tools["search_knowledge"].input_schema["properties"]
    assert set(search_props) == {"query", "top_k", "search_mode", "rerank", "expand", "filters"}
    assert tools["search_knowledge"].input_schema["required"] == ["query"]
    assert set(tools["get_chapter"].input_schema["properties"]) == {"node_id", "include_children"}


def test_each_tool_is_described_in_one_line_for_the_client(session_log):
    tools = session_log["tools"]
    for name, tool in tools.items():
        assert tool.description and "\n" not in tool.description, name
        assert "  " not in tool.description, name  # the docstring's indentation folded away
    assert tools["ask"].description.startswith("Answer a question from the wiki")
    assert tools["ask"].input_schema["properties"]["top_k"]["default"] == DEFAULT_TOP_K


def test_search_knowledge(session_log, test_kb):
    body = _json(session_log["search"])
    assert body["config_hash"] == test_kb.cfg.hash
    assert len(body["results"]) == 3
    assert {r["metadata"]["category"] for r in body["results"]} == {"rag"}
    assert body["results"][0]["node_id"].startswith("rag/chunking-strategies")
    assert session_log["search"].structured_content["config_hash"] == test_kb.cfg.hash
    kw = _json(session_log["keyword"])
    assert all(r["rank_source"]["vector"] is None for r in kw["results"])


def test_bad_arguments_are_tool_errors_that_say_why(session_log):
    assert session_log["empty"].is_error
    assert "query must not be empty" in session_log["empty"].content[0].text
    assert session_log["bad_mode"].is_error
    assert "search_mode" in session_log["bad_mode"].content[0].text


def test_queries_over_the_http_cap_are_json_rpc_errors(session_log):
    for tool in ("search_knowledge", "ask"):
        exc = session_log.get(f"long_{tool}")
        assert exc is not None, f"{tool} accepted a {MAX_QUERY_CHARS + 2}-char query"
        assert exc.error.code == -32602  # invalid params
        assert f"the limit is {MAX_QUERY_CHARS:,}" in exc.error.message


def test_a_line_that_is_not_json_gets_a_parse_error_reply(test_kb):
    import subprocess

    p = mcp_stdio_params(test_kb)
    proc = subprocess.Popen(
        [p.command, *p.args],
        cwd=p.cwd,
        env={**os.environ, **(p.env or {})},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        out, _ = proc.communicate(b'this is not json\n{"jsonrpc": "2.0"}\n', timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    replies = [json.loads(line) for line in out.decode().splitlines()]
    assert [r["error"]["code"] for r in replies] == [-32700, -32600]
    assert all(r["id"] is None and r["jsonrpc"] == "2.0" for r in replies)


def test_get_chapter(session_log, test_kb):
    ch = _json(session_log["chapter"])
    assert ch["node_id"] == "rag/chunking-strategies" and ch["level"] == 0
    assert ch["children"] and ch["children"][0]["node_id"].startswith("rag/chunking-strategies#")
    assert ch["config_hash"] == test_kb.cfg.hash
    assert _json(session_log["no_children"])["children"] == []
    bad = session_log["unknown_node"]
    assert bad.is_error and "did you mean rag/chunking-strategies" in bad.content[0].text


def test_ask_answers_with_citations(session_log, test_kb):
    a = _json(session_log["ask"])
    assert a["mode"] == "extractive" and a["config_hash"] == test_kb.cfg.hash
    assert a["answer"]
    assert all(c["node_id"].startswith(("rag/", "retrieval/")) for c in a["citations"])


def test_unknown_tool_is_an_error(session_log):
    res = session_log["unknown_tool"]
    assert res.is_error and "delete_everything" in res.content[0].text


def test_documents_are_resources(session_log, test_kb):
    uris = {str(r.uri): r for r in session_log["resources"]}
    expected = {doc_uri(p.removesuffix(".md")) for p in _kb_files(test_kb)}
    assert expected <= set(uris)
    res = uris[doc_uri("rag/chunking-strategies")]
    assert res.mime_type == "text/markdown" and res.title == "文档切分策略"
    text = (test_kb.ws.kb / "rag/chunking-strategies.md").read_text(encoding="utf-8")
    assert session_log["read"].contents[0].text == text
    hybrid = (test_kb.ws.kb / "retrieval/hybrid-search.md").read_text(encoding="utf-8")
    assert session_log["read_template"].contents[0].text == hybrid
    assert "no-such-doc" in str(session_log["read_missing"])
    assert "read_escape" in session_log


def _kb_files(kb: TestKB) -> list[str]:
    root = kb.ws.kb
    return sorted(
        os.path.relpath(os.path.join(d, f), root).replace(os.sep, "/")
        for d, _, files in os.walk(root)
        for f in files
        if f.endswith(".md")
    )


@pytest.mark.slow
def test_streamable_http_transport(test_kb):
    """`wikirag mcp --http PORT` serves the same tools at http://127.0.0.1:PORT/mcp."""
    import socket
    import subprocess
    import time

    import httpx
    from mcp.client.streamable_http import streamable_http_client

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = mcp_stdio_params(test_kb)
    args = [a if a != "--stdio" else "--http" for a in p.args]
    args.insert(args.index("--http") + 1, str(port))
    proc = subprocess.Popen(
        [p.command, *args],
        cwd=p.cwd,
        env={**os.environ, **(p.env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/mcp", timeout=2)
                break
            except httpx.TransportError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError("mcp --http did not start") from None
                time.sleep(0.2)

        async def session() -> tuple[set[str], dict[str, Any]]:
            async with (
                streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (read, write),
                ClientSession(read, write) as s,
            ):
                await s.initialize()
                names = {t.name for t in (await s.list_tools()).tools}
                res = await s.call_tool("search_knowledge", {"query": "RRF", "top_k": 2})
                return names, _json(res)

        names, body = anyio.run(session)
        assert names == {"search_knowledge", "get_chapter", "ask"}
        assert len(body["results"]) == 2 and body["config_hash"] == test_kb.cfg.hash
    finally:
        proc.terminate()
        proc.wait(timeout=30)
