"""MCP server over the tuned engine, on the official ``mcp`` SDK (``MCPServer``).

Tools: ``search_knowledge`` (the parameters of ``POST /search``), ``get_chapter`` (a chapter
with its children) and ``ask`` (an answer with numbered citations). Resources: every
document of the KB as ``wiki://<doc_id>`` (listed; reading one returns its Markdown file).

Over stdio, stdout carries protocol messages only: ``quiet_stdout()`` sends everything
else written while the engine loads to stderr, and the SDK diverts fd 1 to stderr while it
serves, so jieba, tqdm and model loaders cannot corrupt the stream.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

from pydantic import Field

from engine.config import EngineConfig, ExpandMode, SearchMode
from engine.errors import EngineError
from engine.tree import parse_kb
from workbench.answer.chat import DEFAULT_TOP_K
from workbench.answer.chat import answer as chat_answer
from workbench.answer.llm import LLMClient
from workbench.serve.http_guard import RequestGuard, allowed_hosts
from workbench.serve.limits import MAX_BODY_BYTES, MAX_QUERY_CHARS, query_problem
from workbench.serve.schemas import SearchFilters
from workbench.serve.served import ServedEngine, chapter_payload
from workbench.workspace import Workspace

URI_SCHEME = "wiki://"
INSTRUCTIONS = (
    "Search a team's Markdown wiki. Use search_knowledge to find chapters (hybrid vector + "
    "BM25 search; Chinese and English), get_chapter to read one in full with its children, "
    "and ask for an answer with numbered citations. Node ids look like "
    "'rag/chunking#strategies'. Whole documents are resources wiki://<doc_id>."
)


@contextlib.contextmanager
def quiet_stdout() -> Iterator[None]:
    """Send everything written to stdout (Python and C level) to stderr meanwhile."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def silence_libraries() -> None:
    """jieba logs its dictionary loading; keep only real problems on stderr."""
    import logging

    import jieba

    jieba.setLogLevel(60)
    logging.getLogger("jieba").setLevel(logging.ERROR)


def doc_uri(doc_id: str) -> str:
    return URI_SCHEME + quote(doc_id, safe="/")


def _doc_path(kb_root: Path, doc_id: str) -> Path:
    """The Markdown file of a document id, refusing anything outside the KB folder."""
    root = kb_root.resolve()
    path = (root / f"{doc_id}.md").resolve()
    if root not in path.parents or not path.is_file():
        raise FileNotFoundError(doc_id)
    return path


def build_mcp_server(
    served: ServedEngine, *, llm: Any = None, name: str = "wikirag", query_log: Any = None
) -> Any:  # -> mcp.server.mcpserver.MCPServer
    """An MCPServer whose tools and resources answer from ``served``; ``query_log`` (a
    QueryLog) records the questions of search_knowledge and ask, None nothing."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer(name, instructions=INSTRUCTIONS, version="1", log_level="WARNING")
    for fn in (
        _search_tool(served, query_log),
        _chapter_tool(served),
        _ask_tool(served, llm, query_log),
    ):
        # A tool is named after its function and described by its docstring (one line for
        # the client: the source's line breaks and indentation folded away).
        description = " ".join((fn.__doc__ or "").split())
        server.tool(name=fn.__name__, description=description)(fn)
    _add_document_resources(server, served)
    return server


def _check_text(text: str, what: str) -> None:
    """A JSON-RPC error (not a tool result): the call itself is invalid, as a 422 over HTTP."""
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.shared.exceptions import MCPError
    from mcp_types import INVALID_PARAMS

    if not text.strip():
        raise ToolError(f"{what} must not be empty")
    if problem := query_problem(text, what):
        raise MCPError(code=INVALID_PARAMS, message=problem, data={"max_chars": MAX_QUERY_CHARS})


@contextlib.contextmanager
def _tool_errors(*kinds: type[Exception]) -> Iterator[None]:
    """The tool's own error (a result the client shows), not a protocol error."""
    from mcp.server.mcpserver.exceptions import ToolError

    caught: tuple[type[Exception], ...] = (EngineError, *kinds)
    try:
        yield
    except caught as exc:
        raise ToolError(str(exc)) from exc


def _engine(served: ServedEngine) -> Any:
    with _tool_errors():
        return served.get()


def _search_tool(served: ServedEngine, query_log: Any) -> Callable[..., Any]:
    def search_knowledge(
        query: Annotated[str, Field(min_length=1, description="question or keywords")],
        top_k: Annotated[int | None, Field(ge=1, le=1000, description="results")] = None,
        search_mode: Annotated[
            SearchMode | None,
            Field(description="channels (default: the served config)"),
        ] = None,
        rerank: Annotated[bool | None, Field(description="null: as configured")] = None,
        expand: Annotated[
            ExpandMode | None,
            Field(description="attach related chapters to each result"),
        ] = None,
        filters: Annotated[
            SearchFilters | None,
            Field(description="category / priority / doc_type / keywords: a value or a list"),
        ] = None,
    ) -> dict[str, Any]:
        """Search the wiki's chapters. Returns ranked results with node_id, score, title,
        breadcrumb, content, summary and metadata (file_path, line, ...), plus the config_hash
        of the engine settings that produced them."""
        _check_text(query, "query")
        if query_log is not None:
            query_log.record(query, "mcp")
        with _tool_errors():
            resp = _engine(served).search(
                query,
                top_k=top_k,
                mode=search_mode,
                rerank=rerank,
                filters=filters.to_engine() if filters else None,
                expand=expand,
            )
        return resp.to_dict()

    return search_knowledge


def _chapter_tool(served: ServedEngine) -> Callable[..., Any]:
    def get_chapter(
        node_id: Annotated[str, Field(min_length=1, description="e.g. 'rag/chunking#strategies'")],
        include_children: Annotated[bool, Field(description="list child chapters too")] = True,
    ) -> dict[str, Any]:
        """Read one chapter by node_id (as returned by search_knowledge): its full content,
        breadcrumb, metadata and, by default, its child chapters."""
        with _tool_errors():
            out = chapter_payload(_engine(served), node_id, children=include_children)
        return {**out, "config_hash": served.cfg.hash}

    return get_chapter


def _ask_tool(served: ServedEngine, llm: Any, query_log: Any) -> Callable[..., Any]:
    def ask(
        question: Annotated[str, Field(min_length=1, description="the question")],
        top_k: Annotated[int, Field(ge=1, le=50, description="chapters retrieved")] = DEFAULT_TOP_K,
    ) -> dict[str, Any]:
        """Answer a question from the wiki with numbered citations [n] that point at the
        chapters listed in 'citations'. Refuses (refusal=true) when the wiki does not cover it.
        Uses the configured LLM, else answers extractively and says so."""
        _check_text(question, "question")
        if query_log is not None:
            query_log.record(question, "mcp")
        with _tool_errors(ValueError):
            ans = chat_answer(question, _engine(served), llm=llm, top_k=top_k)
        return {
            "question": ans.question,
            "answer": ans.answer,
            "citations": ans.citations,
            "refusal": ans.refusal,
            "mode": ans.mode,
            "notice": ans.notice,
            "config_hash": served.cfg.hash,
        }

    return ask


def _add_document_resources(server: Any, served: ServedEngine) -> None:
    """Every document of the KB listed as ``wiki://<doc_id>``, and a template for any id
    (documents added after the server started)."""
    from mcp.server.mcpserver.exceptions import ResourceError
    from mcp.server.mcpserver.resources import FunctionResource

    kb_root = Path(served.ws.kb)
    try:
        kb = served.get().kb
    except EngineError:
        kb = parse_kb(kb_root)
    for doc in kb.documents:
        top = doc.nodes[0] if doc.nodes else None

        def read(doc_id: str = doc.doc_id) -> str:
            try:
                return _doc_path(kb_root, doc_id).read_text(encoding="utf-8", errors="replace")
            except OSError as exc:
                raise ResourceError(f"document {doc_id} cannot be read ({exc})") from exc

        server.add_resource(
            FunctionResource.from_function(
                fn=read,
                uri=doc_uri(doc.doc_id),
                name=doc.doc_id,
                title=top.title if top is not None else doc.doc_id,
                description=(top.summary[:300] if top is not None and top.summary else None),
                mime_type="text/markdown",
            )
        )

    @server.resource(
        URI_SCHEME + "{+doc_id}",
        name="wiki-document",
        description="any document of the KB by id (also ones added after the server started)",
        mime_type="text/markdown",
    )
    def read_document(doc_id: str) -> str:
        try:
            return _doc_path(kb_root, doc_id).read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise ResourceError(
                f"no document {doc_id!r} in {kb_root}; list them with resources/list"
            ) from exc


def open_mcp_server(ws: Workspace, cfg: EngineConfig, query_log: Any = None) -> Any:
    """Load and warm the engine (stdout kept clean meanwhile) and build the server."""

    with quiet_stdout():
        silence_libraries()
        served = ServedEngine(ws, cfg, missing_hint="then call the tool again; no restart needed")
        return build_mcp_server(served, llm=LLMClient.from_config(cfg.llm), query_log=query_log)


class _ReplyToBadLines:
    """The stdio read stream, answering lines that are not JSON-RPC instead of dropping them.

    The SDK hands a line it cannot parse to the session as an exception, which logs and
    ignores it, so a client that sent a broken line waits forever. JSON-RPC 2.0 says: reply
    with error -32700 (not JSON) or -32600 (JSON but not a request), ``id`` null.
    """

    def __init__(self, inner: Any, write: Any) -> None:
        self._inner = inner
        self._write = write

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def _reply(self, exc: Exception) -> None:
        import mcp_types as types
        from mcp.shared.message import SessionMessage

        errors = getattr(exc, "errors", None)
        first = errors()[0].get("type") if callable(errors) and errors() else ""
        if first == "json_invalid":
            code, message = types.PARSE_ERROR, "Parse error: the line is not valid JSON"
        else:
            code, message = types.INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 message"
        error = types.JSONRPCError(
            jsonrpc="2.0", id=None, error=types.ErrorData(code=code, message=message)
        )
        await self._write.send(SessionMessage(error))

    async def receive(self) -> Any:
        while True:
            item = await self._inner.receive()
            if not isinstance(item, Exception):
                return item
            await self._reply(item)

    async def aclose(self) -> None:
        await self._inner.aclose()

    def close(self) -> None:
        self._inner.close()

    def __aiter__(self) -> _ReplyToBadLines:
        return self

    async def __anext__(self) -> Any:
        import anyio

        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _ReplyToBadLines:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


async def _serve_stdio(server: Any) -> None:
    from mcp.server.stdio import stdio_server

    # MCPServer.run_stdio_async, with the read stream wrapped; _lowlevel_server is the SDK's
    # own attribute (no public hook for transport-level errors).
    low = server._lowlevel_server
    async with stdio_server() as (read, write):
        await low.run(_ReplyToBadLines(read, write), write, low.create_initialization_options())


def run_stdio(server: Any) -> None:
    import anyio

    anyio.run(_serve_stdio, server)


def http_app(server: Any, *, host: str = "127.0.0.1", allow: Sequence[str] = ()) -> Any:
    """The streamable-HTTP ASGI app at /mcp behind the same Host / Origin / body checks as
    ``wikirag serve`` (``workbench.serve.http_guard``); the SDK's own check is kept, given the
    same allow-list, as a second layer."""
    from mcp.server.transport_security import TransportSecuritySettings

    allowed = allowed_hosts(allow, bind=host)
    if "*" in allowed:
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    else:
        named = [f"[{h}]" if ":" in h else h for h in allowed]
        security = TransportSecuritySettings(
            allowed_hosts=[*named, *(f"{h}:*" for h in named)],
            allowed_origins=[
                f"{s}://{h}{p}" for s in ("http", "https") for h in named for p in ("", ":*")
            ],
        )
    inner = server.streamable_http_app(
        max_request_body_size=MAX_BODY_BYTES, transport_security=security, host=host
    )
    return RequestGuard(inner, allowed=allowed, max_body=MAX_BODY_BYTES)


def run_http(
    server: Any, host: str = "127.0.0.1", port: int = 8765, allow: Sequence[str] = ()
) -> None:
    import uvicorn

    sys.stderr.write(f"wikirag mcp: streamable HTTP on http://{host}:{port}/mcp\n")
    uvicorn.run(http_app(server, host=host, allow=allow), host=host, port=port, log_level="warning")
