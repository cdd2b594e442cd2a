"""HTTP API over the tuned engine: ``create_app(ws, cfg)`` returns the FastAPI app.

The app answers from one engine opened under ``cfg`` (by default the KB's accepted
baseline, see ``workbench.workspace``) and stamps that config's hash on every response: in
the JSON body as ``config_hash`` and in an ``X-Config-Hash`` header, so a number seen by a
client can always be traced to the settings that produced it.

Index rebuilds are hot: ``POST /admin/rebuild-index`` starts a background job that re-indexes
while the current snapshot keeps answering; the engine switches to the new snapshot in one
step when the job completes (``Engine.rebuild``), and superseded tables are dropped only
after that switch. Errors are JSON ``{"error", "detail"}`` where ``detail`` says what to fix.

Node ids contain ``/`` and ``#``: the chapter routes take the id as a path, and clients must
URL-encode ``#`` as ``%23`` (an unencoded ``#`` starts a URL fragment and never reaches the
server, so ``/chapter/rag/chunking#intro`` would silently ask for the document node).

Three modules: ``schemas`` (the OpenAPI models), ``served`` (the engine and rebuild jobs),
``routes`` (routes and error handlers over one ``ServerState``); this one wires them together
with the middleware.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI

from engine.config import EngineConfig
from workbench.answer.llm import LLMClient
from workbench.serve.http_guard import RequestGuard, allowed_hosts
from workbench.serve.limits import MAX_BODY_BYTES
from workbench.serve.routes import (
    ADMIN_TOKEN_ENV,
    CONFIG_HASH_HEADER,
    ServerState,
    add_admin_routes,
    add_error_handlers,
    add_search_routes,
)
from workbench.serve.served import RebuildJobs, ServedEngine, _log
from workbench.workspace import Workspace

__all__ = [
    "create_app",
    "is_loopback",
    "run_server",
]


class _ConfigHashHeader:
    """Pure ASGI middleware: every HTTP response carries X-Config-Hash; requests are counted."""

    def __init__(self, app: Any, config_hash: str, on_request: Any = None) -> None:
        self.app = app
        self.header = (CONFIG_HASH_HEADER.lower().encode(), config_hash.encode())
        self.on_request = on_request

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.on_request is not None:
            self.on_request()

        async def send_with_header(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = [h for h in message.get("headers", []) if h[0] != self.header[0]]
                message["headers"] = [*headers, self.header]
            await send(message)

        await self.app(scope, receive, send_with_header)


_DEFAULT_LLM: Any = object()


def create_app(
    ws: Workspace,
    cfg: EngineConfig,
    *,
    engine: Any | None = None,
    llm: Any = _DEFAULT_LLM,
    admin_token: str | None = None,
    max_concurrent: int | None = None,
    allowed: Sequence[str] | None = None,
    max_body: int = MAX_BODY_BYTES,
    query_log: Any = None,
) -> FastAPI:
    """The HTTP API serving ``cfg`` over ``ws`` (see the module docstring).

    ``engine`` reuses an already opened engine; ``llm`` is an ``LLMClient`` or None (default:
    the one ``cfg.llm`` / the environment configure); ``admin_token`` defaults to the
    WIKIRAG_ADMIN_TOKEN environment variable (unset or empty: admin endpoints answer 403).
    ``allowed`` lists the Host names served (default: the loopback names, see
    ``workbench.serve.http_guard``); ``max_body`` caps request bodies (413 above).
    ``max_concurrent`` caps searches/answers computed at once (default: the CPU count; 0: no
    cap); more requests wait for a slot instead of all slowing down together.
    ``query_log`` (a ``workbench.eval.query_log.QueryLog``) records each question asked of
    /search and /ask; None (the default) records nothing.
    """
    config_hash = cfg.hash
    served = ServedEngine(ws, cfg, engine=engine)
    jobs = RebuildJobs(served)
    # "" (argument or environment) means no token: admin endpoints are disabled, since a
    # page in the user's browser could otherwise post to them (CSRF).
    token = (admin_token if admin_token is not None else os.environ.get(ADMIN_TOKEN_ENV)) or None
    if llm is _DEFAULT_LLM:
        llm = LLMClient.from_config(cfg.llm)
    if max_concurrent is None:
        max_concurrent = os.cpu_count() or 2
    if max_concurrent < 0:
        raise ValueError("max_concurrent must be >= 0 (0 = no cap)")
    slots: Any = (
        threading.BoundedSemaphore(max_concurrent) if max_concurrent else contextlib.nullcontext()
    )

    app = FastAPI(
        title="WikiRAG Workbench API",
        version="1",
        description=(
            "Hybrid chapter search over a Markdown wiki, served under one engine config "
            f"(hash `{config_hash}`, also in every response's `config_hash` and "
            "`X-Config-Hash`).\n\nNode ids contain `/` and `#`: URL-encode `#` as `%23` in "
            "`/chapter/...` paths, e.g. `/chapter/rag/chunking%23strategies`."
        ),
    )
    app.state.served = served
    app.state.jobs = jobs
    app.state.config_hash = config_hash
    state = ServerState(ws=ws, cfg=cfg, served=served, jobs=jobs, llm=llm, slots=slots, token=token)
    state.query_log = query_log
    app.add_middleware(_ConfigHashHeader, config_hash=config_hash, on_request=state.count_request)
    # Added last = outermost: a foreign Host / Origin or an oversized body never reaches a route.
    app.add_middleware(
        RequestGuard,
        allowed=allowed_hosts() if allowed is None else tuple(allowed),
        max_body=max_body,
        extra={"config_hash": config_hash},
    )
    add_error_handlers(app, state)
    add_search_routes(app, state)
    add_admin_routes(app, state)
    return app


def is_loopback(host: str) -> bool:
    return host in ("127.0.0.1", "localhost", "::1") or host.startswith("127.")


def run_server(app: FastAPI, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Serve ``app`` with uvicorn (logs on stderr); blocks until interrupted."""
    import uvicorn

    if not os.environ.get(ADMIN_TOKEN_ENV):
        _log(f"admin endpoints disabled; set {ADMIN_TOKEN_ENV} to enable them")
    _log(f"serving on http://{host}:{port} (docs at /docs, config {app.state.config_hash})")
    uvicorn.run(app, host=host, port=port, log_level="info")
