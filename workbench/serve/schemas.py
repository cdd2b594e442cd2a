"""The HTTP API's request and response models: the OpenAPI schema clients see.

Search modes and expand choices come from ``engine.config`` (one definition), so the schema
offers exactly what the engine accepts.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from engine.config import ExpandMode, SearchMode
from workbench.answer.chat import DEFAULT_ANSWER_MODE, DEFAULT_TOP_K, AnswerMode
from workbench.serve.limits import MAX_QUERY_CHARS


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
    bm25_scale: float = Field(
        default=1.0,
        description="the keyword channel's fusion weight times this for the query "
        "(fusion.cross_lingual_bm25 for a cross-lingual question, else 1)",
    )


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
    top_k: int = Field(
        default=DEFAULT_TOP_K, ge=1, le=50, description="chapters retrieved per round"
    )
    mode: AnswerMode = Field(
        default=DEFAULT_ANSWER_MODE,
        description="loop: retrieve-judge-rewrite; tools: the LLM calls search",
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
