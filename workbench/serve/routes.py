"""The HTTP API's routes and error handlers, registered on an app around one ``ServerState``.

Every error is JSON ``{"error", "detail", "config_hash"}`` where ``detail`` says what to fix.
"""

from __future__ import annotations

import difflib
import secrets
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException

from engine.config import EngineConfig
from engine.errors import EngineError, IndexMissingError, ProviderError, UnknownNodeError
from workbench.answer.chat import answer as chat_answer
from workbench.serve.schemas import (
    AskRequest,
    AskResponse,
    ChapterListResponse,
    ChapterResponse,
    ErrorResponse,
    HealthResponse,
    JobResponse,
    RebuildRequest,
    SearchRequest,
    SearchResponseModel,
    StatsResponse,
)
from workbench.serve.served import (
    JobConflict,
    RebuildJobs,
    ServedEngine,
    _log,
    chapter_payload,
    node_brief,
)
from workbench.workspace import Workspace

ADMIN_TOKEN_ENV = "WIKIRAG_ADMIN_TOKEN"
CONFIG_HASH_HEADER = "X-Config-Hash"

_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorResponse, "description": "the request cannot be served as asked"},
    422: {"model": ErrorResponse, "description": "the body does not match the schema"},
    503: {"model": ErrorResponse, "description": "no index loaded yet"},
}
_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorResponse, "description": "unknown node id (with close matches)"}
}
_AUTH: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorResponse, "description": "admin token missing or wrong"},
    403: {"model": ErrorResponse, "description": "admin endpoints disabled (no token set)"},
}


class AdminAuthError(Exception):
    """Raised by the admin dependency; rendered as a 401 {error, detail}."""


class AdminDisabledError(Exception):
    """Raised by the admin dependency when no token is configured; rendered as a 403."""


@dataclass
class ServerState:
    """What the routes of one app share: the engine, the jobs, the LLM and the counters."""

    ws: Workspace
    cfg: EngineConfig
    served: ServedEngine
    jobs: RebuildJobs
    llm: Any
    slots: Any  # a BoundedSemaphore, or a null context when searches are not capped
    token: str | None  # None: admin endpoints disabled
    started: float = field(default_factory=time.monotonic)
    counters: dict[str, int] = field(default_factory=lambda: {"requests": 0, "errors": 0})
    _lock: threading.Lock = field(default_factory=threading.Lock)
    query_log: Any = None  # a QueryLog when `serve --log-queries`; None logs nothing

    def log_query(self, text: str) -> None:
        if self.query_log is not None:
            self.query_log.record(text, "http")

    @property
    def config_hash(self) -> str:
        return self.cfg.hash

    def count_request(self) -> None:
        with self._lock:
            self.counters["requests"] += 1

    def counts(self) -> dict[str, Any]:
        with self._lock:
            return dict(self.counters)

    def uptime_s(self) -> float:
        return round(time.monotonic() - self.started, 3)

    def with_hash(self, d: dict[str, Any]) -> dict[str, Any]:
        return {**d, "config_hash": self.config_hash}

    def error(self, status: int, err: str, detail: str, **extra: Any) -> JSONResponse:
        body = {"error": err, "detail": detail, "config_hash": self.config_hash}
        body.update({k: v for k, v in extra.items() if v is not None})
        headers = {CONFIG_HASH_HEADER: self.config_hash}
        if status == 401:
            headers["WWW-Authenticate"] = "Bearer"
        with self._lock:
            self.counters["errors"] += 1
        return JSONResponse(body, status_code=status, headers=headers)


def add_error_handlers(app: FastAPI, st: ServerState) -> None:
    """Every exception a route can raise becomes a JSON error that says what to fix."""
    error = st.error

    @app.exception_handler(RequestValidationError)
    async def on_validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        errs = []
        for e in exc.errors():
            loc = ".".join(str(p) for p in e.get("loc", ()) if p != "body")
            msg = str(e.get("msg", "")).removeprefix("Value error, ")
            errs.append({"loc": loc, "msg": msg, "type": e.get("type", "")})
        detail = "; ".join(f"{e['loc']}: {e['msg']}" if e["loc"] else e["msg"] for e in errs)
        return error(422, "invalid request", detail or "the request body is not valid", errors=errs)

    @app.exception_handler(StarletteHTTPException)
    async def on_http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        hint = {
            404: f"no route {request.url.path}; see /docs for the endpoints",
            405: f"{request.method} is not allowed on {request.url.path}; see /docs",
        }.get(exc.status_code, str(exc.detail))
        return error(exc.status_code, str(exc.detail).lower(), hint)

    @app.exception_handler(UnknownNodeError)
    async def on_unknown(request: Request, exc: UnknownNodeError) -> JSONResponse:
        node_id = request.path_params.get("node_id", "")
        try:
            ids = list(st.served.get().kb.nodes)
        except EngineError:
            ids = []
        close = difflib.get_close_matches(node_id, ids, n=5, cutoff=0.5)
        return error(404, "unknown node", str(exc), close_matches=close)

    @app.exception_handler(IndexMissingError)
    async def on_missing(request: Request, exc: IndexMissingError) -> JSONResponse:
        return error(503, "index missing", str(exc))

    @app.exception_handler(ProviderError)
    async def on_provider(request: Request, exc: ProviderError) -> JSONResponse:
        return error(502, "provider failed", str(exc))

    @app.exception_handler(EngineError)
    async def on_engine(request: Request, exc: EngineError) -> JSONResponse:
        if not st.served.loaded:
            return error(503, "engine not loaded", str(exc))
        return error(400, "bad request", str(exc))

    @app.exception_handler(ValueError)
    async def on_value(request: Request, exc: ValueError) -> JSONResponse:
        return error(400, "bad request", str(exc))

    @app.exception_handler(Exception)
    async def on_crash(request: Request, exc: Exception) -> JSONResponse:
        _log(f"{request.method} {request.url.path} failed:\n{traceback.format_exc()}")
        return error(
            500, "internal error", f"{type(exc).__name__}: {exc}; the server log has the traceback"
        )

    @app.exception_handler(AdminAuthError)
    async def on_auth(request: Request, exc: Exception) -> JSONResponse:
        return error(
            401,
            "unauthorized",
            f"admin endpoints need `Authorization: Bearer <token>` with the value of "
            f"{ADMIN_TOKEN_ENV} the server was started with",
        )

    @app.exception_handler(AdminDisabledError)
    async def on_admin_disabled(request: Request, exc: Exception) -> JSONResponse:
        return error(
            403,
            "admin disabled",
            f"admin endpoints are disabled; start the server with {ADMIN_TOKEN_ENV} set and "
            "send `Authorization: Bearer <token>`",
        )


def add_search_routes(app: FastAPI, st: ServerState) -> None:
    """/search, /chapter/..., /health, /stats and /ask (registered in this order: the
    OpenAPI document lists them so)."""
    _add_search_route(app, st)
    _add_chapter_routes(app, st)
    _add_status_routes(app, st)
    _add_ask_route(app, st)


def _add_search_route(app: FastAPI, st: ServerState) -> None:
    @app.post(
        "/search",
        response_model=SearchResponseModel,
        responses={**_ERRORS},
        summary="hybrid search over the KB's chapters",
    )
    def search(req: SearchRequest) -> dict[str, Any]:
        st.log_query(req.query)
        with st.slots:
            resp = st.served.get().search(
                req.query,
                top_k=req.top_k,
                mode=req.search_mode,
                rerank=req.rerank,
                filters=req.filters.to_engine() if req.filters else None,
                expand=req.expand,
            )
        return resp.to_dict()


def _add_chapter_routes(app: FastAPI, st: ServerState) -> None:
    served, with_hash = st.served, st.with_hash

    def chapter_list(node_id: str, relation: str) -> dict[str, Any]:
        eng = served.get()
        nodes = eng.children(node_id) if relation == "children" else eng.siblings(node_id)
        return with_hash(
            {"node_id": node_id, "relation": relation, "chapters": [node_brief(n) for n in nodes]}
        )

    def chapter_or_list(node_id: str, relation: str) -> dict[str, Any]:
        # "/chapter/<id>/children" is also the path of a chapter whose own id ends in
        # "/children" (a heading titled "children"); the listing wins when both exist.
        eng = served.get()
        if eng.kb.get(node_id) is None and eng.kb.get(f"{node_id}/{relation}") is not None:
            return {"__chapter__": f"{node_id}/{relation}"}
        return chapter_list(node_id, relation)

    def chapter_detail(node_id: str) -> dict[str, Any]:
        return with_hash(chapter_payload(served.get(), node_id))

    def related(node_id: str, relation: str) -> dict[str, Any]:
        """The listing, or the chapter itself when ``node_id/relation`` names one."""
        out = chapter_or_list(node_id, relation)
        return chapter_detail(out["__chapter__"]) if "__chapter__" in out else out

    # Registered before /chapter/{node_id:path}: a path parameter matches "/children" too.
    @app.get(
        "/chapter/{node_id:path}/children",
        response_model=ChapterListResponse | ChapterResponse,
        responses={**_ERRORS, **_NOT_FOUND},
        summary="the chapter's child chapters (encode '#' in the id as %23)",
    )
    def chapter_children(node_id: str) -> dict[str, Any]:
        return related(node_id, "children")

    @app.get(
        "/chapter/{node_id:path}/siblings",
        response_model=ChapterListResponse | ChapterResponse,
        responses={**_ERRORS, **_NOT_FOUND},
        summary="the chapters sharing its parent (encode '#' in the id as %23)",
    )
    def chapter_siblings(node_id: str) -> dict[str, Any]:
        return related(node_id, "siblings")

    @app.get(
        "/chapter/{node_id:path}",
        response_model=ChapterResponse,
        responses={**_ERRORS, **_NOT_FOUND},
        summary="one chapter's content and its children (encode '#' in the id as %23)",
    )
    def chapter(node_id: str) -> dict[str, Any]:
        return chapter_detail(node_id)


def _add_status_routes(app: FastAPI, st: ServerState) -> None:
    served, with_hash = st.served, st.with_hash

    @app.get("/health", response_model=HealthResponse, responses={503: {"model": HealthResponse}})
    def health() -> Any:
        h = served.health()
        body = with_hash(
            {**h, "kb": str(st.ws.kb), "index": str(st.ws.index), "uptime_s": st.uptime_s()}
        )
        if not h["serving"]:
            return JSONResponse(body, status_code=503)
        return body

    @app.get("/stats", response_model=StatsResponse, responses={**_ERRORS})
    def stats() -> dict[str, Any]:
        out = dict(served.get().stats())
        server: dict[str, Any] = st.counts()
        server["uptime_s"] = st.uptime_s()
        server["jobs"] = [{"job_id": j.job_id, "status": j.status} for j in st.jobs.list()]
        out["server"] = server
        return with_hash(out)


def _add_ask_route(app: FastAPI, st: ServerState) -> None:

    @app.post(
        "/ask",
        response_model=AskResponse,
        responses={**_ERRORS, 502: {"model": ErrorResponse}},
        summary="answer a question with numbered citations (LLM if configured, else extractive)",
    )
    def ask(req: AskRequest) -> dict[str, Any]:
        history = [t.model_dump() for t in req.history] if req.history else None
        st.log_query(req.question)
        with st.slots:
            ans = chat_answer(
                req.question,
                st.served.get(),
                history=history,
                llm=st.llm,
                mode=req.mode,
                top_k=req.top_k,
            )
        return st.with_hash(ans.to_dict())


def add_admin_routes(app: FastAPI, st: ServerState) -> None:
    """/admin/...: index rebuilds, behind a bearer token (disabled when none is set)."""
    bearer = HTTPBearer(auto_error=False, description=f"set when {ADMIN_TOKEN_ENV} is set")
    error, with_hash, jobs = st.error, st.with_hash, st.jobs

    def require_admin(
        creds: HTTPAuthorizationCredentials | None = Depends(bearer),  # noqa: B008
    ) -> None:
        if st.token is None:
            raise AdminDisabledError
        given = creds.credentials if creds is not None else ""
        if not secrets.compare_digest(given.encode(), st.token.encode()):
            raise AdminAuthError

    @app.post(
        "/admin/rebuild-index",
        status_code=202,
        response_model=JobResponse,
        responses={**_AUTH, 409: {"model": ErrorResponse}, 422: _ERRORS[422]},
        dependencies=[Depends(require_admin)],
        summary="re-index in the background; searches keep answering from the current index",
    )
    def rebuild(req: RebuildRequest | None = None) -> Any:
        try:
            job = jobs.start(force=bool(req and req.force))
        except JobConflict as exc:
            return error(
                409,
                "rebuild already running",
                f"job {exc.job.job_id} is {exc.job.status}; poll GET /admin/jobs/{exc.job.job_id}",
                job_id=exc.job.job_id,
            )
        return with_hash(job.to_dict())

    @app.get(
        "/admin/jobs",
        response_model=list[JobResponse],
        responses={**_AUTH},
        dependencies=[Depends(require_admin)],
    )
    def list_jobs() -> list[dict[str, Any]]:
        return [with_hash(j.to_dict()) for j in jobs.list()]

    @app.get(
        "/admin/jobs/{job_id}",
        response_model=JobResponse,
        responses={**_AUTH, 404: {"model": ErrorResponse}},
        dependencies=[Depends(require_admin)],
    )
    def get_job(job_id: str) -> Any:
        job = jobs.get(job_id)
        if job is None:
            return error(404, "unknown job", f"no job {job_id!r}; list them with GET /admin/jobs")
        return with_hash(job.to_dict())
