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
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import os
import secrets
import sys
import threading
import time
import traceback
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field, field_validator
from starlette.exceptions import HTTPException as StarletteHTTPException

from engine.config import EngineConfig
from engine.errors import EngineError, IndexMissingError, ProviderError, UnknownNodeError
from workbench.serve.http_guard import RequestGuard, allowed_hosts
from workbench.serve.limits import MAX_BODY_BYTES, MAX_QUERY_CHARS
from workbench.workspace import Workspace

ADMIN_TOKEN_ENV = "WIKIRAG_ADMIN_TOKEN"
CONFIG_HASH_HEADER = "X-Config-Hash"
REOPEN_EVERY_S = 2.0  # how often a server without an engine retries opening the index
KEEP_JOBS = 50

SearchMode = Literal["hybrid", "vector", "keyword"]
ExpandMode = Literal["none", "children", "siblings", "parent"]


def _log(msg: str) -> None:
    sys.stderr.write(f"wikirag serve: {msg}\n")
    sys.stderr.flush()


def _utf8(value: str, what: str) -> str:
    # JSON can carry lone surrogates ("\ud800"); they would fail later, when the answer is encoded.
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"{what} must be valid UTF-8 text (no lone surrogates)") from exc
    return value


def _text_ok(value: str, what: str) -> str:
    if not value.strip():
        raise ValueError(f"{what} must not be empty")
    return _utf8(value, what)


# --------------------------------------------------------------------------------------
# Request / response models (the OpenAPI schema clients see)


class SearchFilters(BaseModel):
    """Each filter accepts one value or a list (any of them matches); filters combine with AND."""

    model_config = ConfigDict(extra="forbid")

    category: str | list[str] | None = None
    priority: str | list[str] | None = None
    doc_type: str | list[str] | None = None
    keywords: str | list[str] | None = Field(
        default=None, description="matches a chapter whose front-matter keywords contain any"
    )

    def to_engine(self) -> dict[str, str | list[str]]:
        return {k: v for k, v in self.model_dump().items() if v is not None}


class SearchRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"query": "RAG 的切块策略有哪些？", "top_k": 5, "search_mode": "hybrid"},
                {"query": "chunking", "filters": {"category": "rag"}, "expand": "children"},
            ]
        },
    )

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, description="question or keywords")
    top_k: int | None = Field(
        default=None, ge=1, le=1000, description="results to return (default: config search.top_k)"
    )
    search_mode: SearchMode | None = Field(
        default=None, description="channels to use (default: config search.mode)"
    )
    rerank: bool | None = Field(
        default=None, description="null: rerank when the config names a reranker"
    )
    expand: ExpandMode | None = Field(
        default=None, description="related chapters attached to each result"
    )
    filters: SearchFilters | None = None

    # mode="before": an empty string gets this message, not min_length's generic one.
    @field_validator("query", mode="before")
    @classmethod
    def _query(cls, v: Any) -> Any:
        return _text_ok(v, "query") if isinstance(v, str) else v

    @field_validator("filters")
    @classmethod
    def _filters(cls, v: SearchFilters | None) -> SearchFilters | None:
        for key, value in (v.to_engine() if v else {}).items():
            for item in [value] if isinstance(value, str) else value:
                _utf8(item, f"filters.{key}")
        return v


class RankSource(BaseModel):
    vector: int | None = Field(default=None, description="1-based rank in the vector channel")
    bm25: int | None = Field(default=None, description="1-based rank in the BM25 channel")
    rerank: int | None = Field(default=None, description="1-based rank after reranking")


class ResultMetadata(BaseModel):
    model_config = ConfigDict(extra="allow")

    file_path: str | None = None
    line: int | None = None
    anchor: str | None = None
    level: int | None = None
    keywords: list[str] | None = None
    doc_type: str | None = None
    priority: str | None = None
    category: str | None = None


class SearchHit(BaseModel):
    node_id: str
    score: float
    rank_source: RankSource
    title: str
    breadcrumb: list[str]
    content: str
    summary: str
    metadata: ResultMetadata
    expanded: list[dict[str, Any]] = Field(
        default_factory=list, description="{node_id, relation, title, breadcrumb, level, ...}"
    )
    injected_from: str | None = Field(
        default=None, description="parent id when added by parent-child injection"
    )


class SearchResponseModel(BaseModel):
    query: str
    results: list[SearchHit]
    total: int = Field(description="fused candidates before the top_k cut")
    took_ms: float
    timings: dict[str, float] = Field(description="milliseconds per stage")
    index_stats: dict[str, Any]
    config_hash: str
    expansion_terms: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)


class ChapterBrief(BaseModel):
    node_id: str
    title: str
    level: int
    breadcrumb: list[str]
    summary: str
    content: str


class ChapterResponse(BaseModel):
    node_id: str
    doc_id: str
    title: str
    level: int
    breadcrumb: list[str]
    content: str
    summary: str
    parent_id: str | None
    metadata: ResultMetadata
    children: list[ChapterBrief]
    config_hash: str


class ChapterListResponse(BaseModel):
    node_id: str
    relation: Literal["children", "siblings"]
    chapters: list[ChapterBrief]
    config_hash: str


class HealthResponse(BaseModel):
    status: Literal["ok", "degraded"]
    reasons: list[str] = Field(description="why the status is degraded, each with what to do")
    serving: bool = Field(description="whether searches can be answered right now")
    config_hash: str
    kb: str
    index: str
    index_build: str | None = None
    embedder: str | None = None
    uptime_s: float


class ChatTurn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str = Field(max_length=MAX_QUERY_CHARS)
    answer: str = Field(max_length=100_000)


class AskRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"question": "什么是混合检索？"}]}
    )

    question: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    top_k: int = Field(default=5, ge=1, le=50, description="chapters retrieved per round")
    mode: Literal["loop", "tools"] = Field(
        default="loop", description="loop: retrieve-judge-rewrite; tools: the LLM calls search"
    )
    history: list[ChatTurn] | None = Field(
        default=None, description="earlier turns, so a follow-up question resolves"
    )

    @field_validator("question", mode="before")
    @classmethod
    def _question(cls, v: Any) -> Any:
        return _text_ok(v, "question") if isinstance(v, str) else v


class AskResponse(BaseModel):
    question: str
    answer: str
    citations: list[dict[str, Any]] = Field(description="{n, node_id, breadcrumb, file_path, line}")
    refusal: bool
    mode: str = Field(description="llm | extractive")
    notice: str | None
    retrieved: list[dict[str, Any]]
    trace: list[dict[str, Any]]
    rounds: int
    query: str
    took_ms: float
    config_hash: str


class RebuildRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    force: bool = Field(default=False, description="re-embed everything (else incremental)")


class JobResponse(BaseModel):
    job_id: str
    kind: str
    status: Literal["queued", "running", "succeeded", "failed"]
    force: bool
    created_at: str
    started_at: str | None
    finished_at: str | None
    stage: str
    done: int
    total: int
    result: dict[str, Any] | None = Field(description="the IndexReport when succeeded")
    error: str | None
    config_hash: str


class ErrorResponse(BaseModel):
    error: str = Field(description="what went wrong, in a few words")
    detail: str = Field(description="what to fix")
    config_hash: str
    close_matches: list[str] | None = None
    errors: list[dict[str, Any]] | None = None


class StatsResponse(BaseModel):
    model_config = ConfigDict(extra="allow")

    config_hash: str
    server: dict[str, Any]


# --------------------------------------------------------------------------------------
# The engine a server answers from, and rebuild jobs


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def kb_file_signature(kb_dir: str | os.PathLike[str]) -> str:
    """Cheap fingerprint of a KB folder: every Markdown file's path, size and mtime."""
    from engine.tree import markdown_files

    h = hashlib.sha256()
    for p in markdown_files(kb_dir):
        try:
            st = p.stat()
        except OSError:
            continue
        h.update(f"{p}\x00{st.st_size}\x00{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


class ServedEngine:
    """The engine behind a server. Opened at start; a server without an index still starts.

    ``get()`` returns the engine or raises the EngineError that kept it from opening (no
    index, embedder mismatch), retrying the open at most every REOPEN_EVERY_S seconds so an
    index built by another process is picked up. Thread-safe.
    """

    def __init__(
        self,
        ws: Workspace,
        cfg: EngineConfig,
        *,
        engine: Any | None = None,
        missing_hint: str = "or POST /admin/rebuild-index to build it while the server runs",
    ) -> None:
        self.ws = ws
        self.cfg = cfg
        self.missing_hint = missing_hint
        self._lock = threading.Lock()
        self._engine = engine
        self._error: EngineError | None = None
        self._tried_at = 0.0
        self._health_cache: tuple[str, str, dict[str, Any]] | None = None
        if engine is None:
            self._open()

    def _open(self) -> None:
        from workbench.eval.engines import open_engine

        self._tried_at = time.monotonic()
        try:
            engine = open_engine(self.ws, self.cfg)
        except EngineError as exc:
            self._error = exc
            _log(f"not serving searches yet: {exc}")
            return
        try:
            engine.warm_up()  # models load now, not inside the first request
            engine.search("warm up", top_k=1)  # jieba's dictionary, BM25 weights
        except EngineError as exc:  # e.g. a remote embedder down: searches will say so
            _log(f"warm-up failed: {exc}")
        self._engine, self._error = engine, None

    def get(self) -> Any:
        eng = self._engine
        if eng is not None:
            return eng
        with self._lock:
            if self._engine is None and time.monotonic() - self._tried_at >= REOPEN_EVERY_S:
                self._open()
            if self._engine is not None:
                return self._engine
            err = self._error or IndexMissingError("no index loaded")
        raise type(err)(f"{err} ({self.missing_hint})" if self.missing_hint else str(err))

    @property
    def loaded(self) -> bool:
        return self._engine is not None

    def rebuild(self, *, force: bool = False, progress: Any = None) -> Any:
        """Re-index and switch searches to the result; returns the IndexReport."""
        eng = self._engine
        if eng is not None:
            return eng.rebuild(force=force, progress=progress)
        from engine.indexer import build_index
        from engine.tree import parse_kb

        report = build_index(parse_kb(self.ws.kb), self.cfg, str(self.ws.index), progress, force)
        with self._lock:
            self._open()
            if self._error is not None:
                raise self._error
        return report

    def health(self) -> dict[str, Any]:
        """Status, with a reason (and what to do) for everything that is not right."""
        from engine.indexer import freshness, read_manifest
        from engine.store import Location

        reasons: list[str] = []
        info: dict[str, Any] = {"index_build": None, "embedder": None}
        try:
            eng = self.get()
        except EngineError as exc:
            return {"status": "degraded", "reasons": [str(exc)], "serving": False, **info}
        stats = eng.stats()
        loaded = stats["index"]["build_id"]
        sig = stats["embedder"]
        info["index_build"] = loaded
        info["embedder"] = f"{sig['provider']}/{sig['model']}/{sig['dims']}"
        try:
            on_disk = read_manifest(Location(str(self.ws.index)))
        except EngineError as exc:
            on_disk = None
            reasons.append(str(exc))
        if on_disk is None:
            reasons.append(
                f"the index at {self.ws.index} is gone (serving the copy in memory); "
                "POST /admin/rebuild-index to rebuild it"
            )
        elif on_disk.signature != sig:
            d = on_disk.signature
            reasons.append(
                f"embedder mismatch: the index on disk was rebuilt with "
                f"{d['provider']}/{d['model']}/{d['dims']} but this server serves "
                f"{info['embedder']}; POST /admin/rebuild-index to rebuild it for this config"
            )
        elif on_disk.build_id != loaded:
            reasons.append(
                "the index on disk was rebuilt by another process; POST /admin/rebuild-index "
                "(a no-op re-index) to switch to it"
            )
        if not os.path.isdir(self.ws.kb):
            # Health must describe the problem, not fail on it (it answered 400 here).
            reasons.append(
                f"the knowledge base folder {self.ws.kb} is missing (serving the index in "
                "memory); restore the folder, or restart `wikirag serve --kb DIR`"
            )
            return {"status": "degraded", "reasons": reasons, "serving": True, **info}
        # Freshness against the KB as it is on disk now (the engine's own is from load time).
        kb_sig = kb_file_signature(self.ws.kb)
        cached = self._health_cache
        if cached is not None and cached[0] == kb_sig and cached[1] == loaded:
            fresh = cached[2]
        else:
            from engine.tree import parse_kb

            manifest = on_disk if on_disk is not None and on_disk.build_id == loaded else None
            if manifest is None:
                fresh = dict(stats["freshness"])
            else:
                fresh = freshness(parse_kb(self.ws.kb), self.cfg, manifest)
            self._health_cache = (kb_sig, loaded, fresh)
        if not fresh.get("fresh", False):
            reasons.append(
                f"index is stale: {fresh.get('new', 0)} new, {fresh.get('changed', 0)} changed, "
                f"{fresh.get('deleted', 0)} deleted chapters since it was built; "
                "POST /admin/rebuild-index (or run `wikirag index`)"
            )
        return {
            "status": "degraded" if reasons else "ok",
            "reasons": reasons,
            "serving": True,
            **info,
        }


@dataclass
class Job:
    job_id: str
    force: bool
    kind: str = "rebuild-index"
    status: str = "queued"
    created_at: str = field(default_factory=_now)
    started_at: str | None = None
    finished_at: str | None = None
    stage: str = ""
    done: int = 0
    total: int = 0
    result: dict[str, Any] | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class AdminAuthError(Exception):
    """Raised by the admin dependency; rendered as a 401 {error, detail}."""


class AdminDisabledError(Exception):
    """Raised by the admin dependency when no token is configured; rendered as a 403."""


class JobConflict(Exception):
    def __init__(self, job: Job) -> None:
        super().__init__(job.job_id)
        self.job = job


class RebuildJobs:
    """One rebuild at a time, in a background thread; the last KEEP_JOBS jobs are kept."""

    def __init__(self, served: ServedEngine) -> None:
        self._served = served
        self._lock = threading.Lock()
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._running: Job | None = None
        self._threads: list[threading.Thread] = []

    def start(self, force: bool) -> Job:
        with self._lock:
            if self._running is not None:
                raise JobConflict(self._running)
            job = Job(job_id=uuid.uuid4().hex[:12], force=force)
            self._jobs[job.job_id] = job
            while len(self._jobs) > KEEP_JOBS:
                self._jobs.popitem(last=False)
            self._running = job
            t = threading.Thread(
                target=self._run, args=(job,), name=f"wikirag-rebuild-{job.job_id}", daemon=True
            )
            self._threads = [x for x in self._threads if x.is_alive()] + [t]
        t.start()
        return job

    def get(self, job_id: str) -> Job | None:
        with self._lock:
            return self._jobs.get(job_id)

    def list(self) -> list[Job]:
        with self._lock:
            return list(self._jobs.values())

    def join(self, timeout: float | None = None) -> None:
        """Wait for running jobs (used at shutdown and by tests)."""
        for t in list(self._threads):
            t.join(timeout)

    def _run(self, job: Job) -> None:
        def progress(done: int, total: int, stage: str) -> None:
            job.stage, job.done, job.total = stage, int(done), int(total)

        job.status, job.started_at = "running", _now()
        _log(f"rebuild job {job.job_id} started (force={job.force})")
        try:
            report = self._served.rebuild(force=job.force, progress=progress)
            job.result = report.to_dict()
            job.status = "succeeded"
            _log(f"rebuild job {job.job_id}: {report.summary()}")
        except EngineError as exc:
            job.error, job.status = str(exc), "failed"
            _log(f"rebuild job {job.job_id} failed: {exc}")
        except Exception as exc:  # a job must record every failure, not die silently
            job.error, job.status = f"{type(exc).__name__}: {exc}", "failed"
            _log(f"rebuild job {job.job_id} crashed:\n{traceback.format_exc()}")
        finally:
            job.finished_at = _now()
            job.stage = "done" if job.status == "succeeded" else job.stage
            with self._lock:
                self._running = None


def node_brief(node: Any) -> dict[str, Any]:
    """A chapter as listed under another: id, title, level, breadcrumb, summary, content."""
    return {
        "node_id": node.node_id,
        "title": node.title,
        "level": node.level,
        "breadcrumb": list(node.breadcrumb),
        "summary": node.summary,
        "content": node.content,
    }


def chapter_payload(engine: Any, node_id: str, *, children: bool = True) -> dict[str, Any]:
    """One chapter with its metadata (and children); UnknownNodeError names close ids."""
    from engine.search import node_metadata

    node = engine.chapter(node_id)
    return {
        "node_id": node.node_id,
        "doc_id": node.doc_id,
        "title": node.title,
        "level": node.level,
        "breadcrumb": list(node.breadcrumb),
        "content": node.content,
        "summary": node.summary,
        "parent_id": node.parent_id,
        "metadata": node_metadata(node),
        "children": [node_brief(n) for n in engine.children(node.node_id)] if children else [],
    }


# --------------------------------------------------------------------------------------
# The app


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


_ERRORS = {
    400: {"model": ErrorResponse, "description": "the request cannot be served as asked"},
    422: {"model": ErrorResponse, "description": "the body does not match the schema"},
    503: {"model": ErrorResponse, "description": "no index loaded yet"},
}
_NOT_FOUND = {404: {"model": ErrorResponse, "description": "unknown node id (with close matches)"}}
_AUTH = {
    401: {"model": ErrorResponse, "description": "admin token missing or wrong"},
    403: {"model": ErrorResponse, "description": "admin endpoints disabled (no token set)"},
}

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
) -> FastAPI:
    """The HTTP API serving ``cfg`` over ``ws`` (see the module docstring).

    ``engine`` reuses an already opened engine; ``llm`` is an ``LLMClient`` or None (default:
    the one ``cfg.llm`` / the environment configure); ``admin_token`` defaults to the
    WIKIRAG_ADMIN_TOKEN environment variable (unset or empty: admin endpoints answer 403).
    ``allowed`` lists the Host names served (default: the loopback names, see
    ``workbench.serve.http_guard``); ``max_body`` caps request bodies (413 above).
    ``max_concurrent`` caps searches/answers computed at once (default: the CPU count; 0: no
    cap); more requests wait for a slot instead of all slowing down together.
    """
    from workbench.answer.chat import answer as chat_answer

    config_hash = cfg.hash
    served = ServedEngine(ws, cfg, engine=engine)
    jobs = RebuildJobs(served)
    # "" (argument or environment) means no token: admin endpoints are disabled, since a
    # page in the user's browser could otherwise post to them (CSRF).
    token = (admin_token if admin_token is not None else os.environ.get(ADMIN_TOKEN_ENV)) or None
    if llm is _DEFAULT_LLM:
        from workbench.answer.llm import LLMClient

        llm = LLMClient.from_config(cfg.llm, kb=ws.kb)
    if max_concurrent is None:
        max_concurrent = os.cpu_count() or 2
    if max_concurrent < 0:
        raise ValueError("max_concurrent must be >= 0 (0 = no cap)")
    slots: Any = (
        threading.BoundedSemaphore(max_concurrent) if max_concurrent else contextlib.nullcontext()
    )
    started = time.monotonic()
    counters = {"requests": 0, "errors": 0}
    counters_lock = threading.Lock()

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

    def count_request() -> None:
        with counters_lock:
            counters["requests"] += 1

    app.add_middleware(_ConfigHashHeader, config_hash=config_hash, on_request=count_request)
    # Added last = outermost: a foreign Host / Origin or an oversized body never reaches a route.
    app.add_middleware(
        RequestGuard,
        allowed=allowed_hosts() if allowed is None else tuple(allowed),
        max_body=max_body,
        extra={"config_hash": config_hash},
    )

    def error(status: int, err: str, detail: str, **extra: Any) -> JSONResponse:
        body = {"error": err, "detail": detail, "config_hash": config_hash}
        body.update({k: v for k, v in extra.items() if v is not None})
        headers = {CONFIG_HASH_HEADER: config_hash}
        if status == 401:
            headers["WWW-Authenticate"] = "Bearer"
        with counters_lock:
            counters["errors"] += 1
        return JSONResponse(body, status_code=status, headers=headers)

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
            ids = list(served.get().kb.nodes)
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
        if not served.loaded:
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

    bearer = HTTPBearer(auto_error=False, description=f"set when {ADMIN_TOKEN_ENV} is set")

    def require_admin(
        creds: HTTPAuthorizationCredentials | None = Depends(bearer),  # noqa: B008
    ) -> None:
        if token is None:
            raise AdminDisabledError
        given = creds.credentials if creds is not None else ""
        if not secrets.compare_digest(given.encode(), token.encode()):
            raise AdminAuthError

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

    def with_hash(d: dict[str, Any]) -> dict[str, Any]:
        return {**d, "config_hash": config_hash}

    @app.post(
        "/search",
        response_model=SearchResponseModel,
        responses={**_ERRORS},
        summary="hybrid search over the KB's chapters",
    )
    def search(req: SearchRequest) -> dict[str, Any]:
        with slots:
            resp = served.get().search(
                req.query,
                top_k=req.top_k,
                mode=req.search_mode,
                rerank=req.rerank,
                filters=req.filters.to_engine() if req.filters else None,
                expand=req.expand,
            )
        return resp.to_dict()

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

    # Registered before /chapter/{node_id:path}: a path parameter matches "/children" too.
    @app.get(
        "/chapter/{node_id:path}/children",
        response_model=ChapterListResponse | ChapterResponse,
        responses={**_ERRORS, **_NOT_FOUND},
        summary="the chapter's child chapters (encode '#' in the id as %23)",
    )
    def chapter_children(node_id: str) -> dict[str, Any]:
        out = chapter_or_list(node_id, "children")
        return chapter_detail(out["__chapter__"]) if "__chapter__" in out else out

    @app.get(
        "/chapter/{node_id:path}/siblings",
        response_model=ChapterListResponse | ChapterResponse,
        responses={**_ERRORS, **_NOT_FOUND},
        summary="the chapters sharing its parent (encode '#' in the id as %23)",
    )
    def chapter_siblings(node_id: str) -> dict[str, Any]:
        out = chapter_or_list(node_id, "siblings")
        return chapter_detail(out["__chapter__"]) if "__chapter__" in out else out

    @app.get(
        "/chapter/{node_id:path}",
        response_model=ChapterResponse,
        responses={**_ERRORS, **_NOT_FOUND},
        summary="one chapter's content and its children (encode '#' in the id as %23)",
    )
    def chapter(node_id: str) -> dict[str, Any]:
        return chapter_detail(node_id)

    def chapter_detail(node_id: str) -> dict[str, Any]:
        return with_hash(chapter_payload(served.get(), node_id))

    @app.get("/health", response_model=HealthResponse, responses={503: {"model": HealthResponse}})
    def health() -> Any:
        h = served.health()
        body = with_hash(
            {
                **h,
                "kb": str(ws.kb),
                "index": str(ws.index),
                "uptime_s": round(time.monotonic() - started, 3),
            }
        )
        if not h["serving"]:
            return JSONResponse(body, status_code=503)
        return body

    @app.get("/stats", response_model=StatsResponse, responses={**_ERRORS})
    def stats() -> dict[str, Any]:
        out = dict(served.get().stats())
        with counters_lock:
            server = dict(counters)
        server["uptime_s"] = round(time.monotonic() - started, 3)
        server["jobs"] = [{"job_id": j.job_id, "status": j.status} for j in jobs.list()]
        out["server"] = server
        return with_hash(out)

    @app.post(
        "/ask",
        response_model=AskResponse,
        responses={**_ERRORS, 502: {"model": ErrorResponse}},
        summary="answer a question with numbered citations (LLM if configured, else extractive)",
    )
    def ask(req: AskRequest) -> dict[str, Any]:
        history = [t.model_dump() for t in req.history] if req.history else None
        with slots:
            ans = chat_answer(
                req.question,
                served.get(),
                cfg,
                history=history,
                llm=llm,
                mode=req.mode,
                top_k=req.top_k,
            )
        return with_hash(ans.to_dict())

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
