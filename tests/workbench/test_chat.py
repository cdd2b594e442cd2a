"""The chat answer loop, tool calling and citation defences, against a real local LLM server.

The retriever is a small stand-in over hand-written SearchResults (lexical overlap ranking),
so these tests do not wait for engine.search.
"""

from __future__ import annotations

import json
from datetime import date
from typing import Any

import pytest

from engine.chapters import Node
from engine.config import EngineConfig
from engine.errors import UnknownNodeError
from engine.types import SearchResponse, SearchResult
from tests.workbench.openai_server import (
    Call,
    CallTools,
    ChatServer,
    Fail,
    Hang,
    Malformed,
    Say,
    WrongShape,
    call_tool,
    task_of,
)
from workbench.answer.chat import answer
from workbench.answer.chat_answer import ChatAnswer
from workbench.answer.citations import check_citations
from workbench.answer.drafting import draft_golden_item
from workbench.answer.evidence import ENOUGH_COVERAGE, INSUFFICIENT_COVERAGE, rule_verdict
from workbench.answer.extractive import extractive_answer
from workbench.answer.followup import is_followup, resolve_followup
from workbench.answer.llm import LLMClient, LLMSettings
from workbench.answer.rewrite import rule_rewrite
from workbench.answer.terms import key_terms

KEY = "sk-chat-SECRET-9876543210"
CFG = EngineConfig()

CHAPTERS = [
    (
        "rag/chunking-strategies#切块策略/按标题切分",
        "按标题切分",
        ["切块策略", "按标题切分"],
        "## 按标题切分\n按标题切分是 RAG 最常用的切块策略。每个章节成为一个检索单元，并保留面包屑。"
        "标题层级越深，切出的块越小。",
        "rag/chunking-strategies.md",
        12,
        "rag",
    ),
    (
        "rag/chunking-strategies#切块策略/固定长度切分",
        "固定长度切分",
        ["切块策略", "固定长度切分"],
        "## 固定长度切分\n固定长度切分按 512 个 token 切块，实现简单但会切断语义。重叠窗口可以缓解边界问题。",
        "rag/chunking-strategies.md",
        20,
        "rag",
    ),
    (
        "retrieval/bm25#bm25",
        "BM25",
        ["Lexical retrieval", "BM25"],
        "## BM25\nBM25 scores documents by term frequency and inverse document frequency. "
        "The k1 parameter controls term saturation. The b parameter controls length normalisation.",
        "retrieval/bm25.md",
        3,
        "retrieval",
    ),
    (
        "retrieval/fusion#rrf",
        "Reciprocal rank fusion",
        ["Fusion", "Reciprocal rank fusion"],
        "## Reciprocal rank fusion\nReciprocal rank fusion combines ranked lists. Each list adds "
        "its weight divided by k plus the rank. A larger k flattens the differences between ranks.",
        "retrieval/fusion.md",
        8,
        "retrieval",
    ),
    (
        "agents/tool-allowlist#allowlist",
        "Tool allowlist",
        ["Tools", "Tool allowlist"],
        "## Tool allowlist\nTool calls are checked against an allowlist. Unknown tools are "
        "rejected with an error message that lists the allowed tools.",
        "agents/tool-allowlist.md",
        5,
        "agents",
    ),
]


def result(i: int, score: float) -> SearchResult:
    node_id, title, crumb, content, path, line, cat = CHAPTERS[i]
    return SearchResult(
        node_id=node_id,
        score=score,
        rank_source={"vector": None, "bm25": None, "rerank": None},
        title=title,
        breadcrumb=crumb,
        content=content,
        summary="",
        metadata={"file_path": path, "line": line, "category": cat},
    )


def response(query: str, results: list[SearchResult]) -> SearchResponse:
    return SearchResponse(query, results, len(results), 1.0, {}, {}, CFG.hash)


class OverlapRetriever:
    """Ranks the chapters by shared key terms with the query; every chapter is returned
    (like a vector channel would), ties in list order."""

    def __init__(self) -> None:
        self.queries: list[str] = []

    def search(self, query: str, *, top_k: int | None = None, **kw: Any) -> SearchResponse:
        self.queries.append(query)
        terms = key_terms(query)
        scored = []
        for i, (_, title, crumb, content, *_rest) in enumerate(CHAPTERS):
            text = " ".join([*crumb, title, content]).lower()
            scored.append((-sum(t in text for t in terms), i))
        scored.sort()
        k = top_k or 10
        return response(query, [result(i, float(-s)) for s, i in scored[:k]])

    def chapter(self, node_id: str) -> Node:
        for nid, title, crumb, content, path, line, cat in CHAPTERS:
            if nid == node_id:
                return Node(
                    node_id=nid,
                    doc_id=nid.split("#")[0],
                    title=title,
                    level=2,
                    ordinal=1,
                    parent_id=None,
                    children_ids=(),
                    breadcrumb=tuple(crumb),
                    line=line,
                    anchor=title,
                    content=content,
                    summary="",
                    file_path=path,
                    frontmatter={"category": cat},
                )
        raise UnknownNodeError(f"no chapter {node_id!r}; use an id from knowledge_search")


class ScriptedRetriever(OverlapRetriever):
    """Returns a fixed list of chapter indexes per call, whatever the query."""

    def __init__(self, rounds: list[list[int]]) -> None:
        super().__init__()
        self.rounds = rounds

    def search(self, query: str, *, top_k: int | None = None, **kw: Any) -> SearchResponse:
        self.queries.append(query)
        picks = self.rounds[min(len(self.queries), len(self.rounds)) - 1]
        return response(query, [result(i, 1.0 / (r + 1)) for r, i in enumerate(picks)])


def llm_for(srv: ChatServer, timeout_s: float = 5.0) -> LLMClient:
    return LLMClient(
        LLMSettings(base_url=srv.base_url, model="test-model", api_key=KEY, timeout_s=timeout_s)
    )


def steps(ans: ChatAnswer, kind: str) -> list[str]:
    return [s["detail"] for s in ans.trace if s["step"] == kind]


def assert_key_absent(ans: ChatAnswer) -> None:
    assert KEY not in json.dumps(ans.to_dict(), ensure_ascii=False)
    assert KEY not in repr(ans)


def assert_citations_valid(ans: ChatAnswer) -> None:
    by_n = {r["n"]: r["node_id"] for r in ans.retrieved}
    for c in ans.citations:
        assert by_n[c["n"]] == c["node_id"]
        assert f"[{c['n']}]" in ans.answer


Q_CHUNK = "RAG 的切块策略有哪些？"
Q_NONE = "公司年会在哪里举办？"


def test_rule_thresholds():
    assert key_terms(Q_CHUNK) == ["rag", "切块", "策略"]
    assert (ENOUGH_COVERAGE, INSUFFICIENT_COVERAGE) == (0.6, 0.35)
    assert rule_verdict(2 / 3) == "enough"
    assert rule_verdict(0.6) == "enough"
    assert rule_verdict(0.5) == "grey"
    assert rule_verdict(1 / 3) == "insufficient"
    assert rule_verdict(0.0) == "insufficient"


def test_extractive_without_llm_cites_valid_sources():
    streamed: list[str] = []
    ans = answer(Q_CHUNK, OverlapRetriever(), llm=None, top_k=3, stream_cb=streamed.append)
    assert ans.mode == "extractive" and not ans.refusal
    assert ans.notice == (
        "No LLM configured (set OPENAI_BASE_URL and WIKIRAG_LLM_MODEL): "
        "extractive answer from the top chapters"
    )
    lines = ans.answer.splitlines()
    assert 2 <= len(lines) <= 4
    assert all(line.rstrip().endswith(("[1]", "[2]", "[3]")) for line in lines)
    assert "按标题切分是 RAG 最常用的切块策略。 [1]" in lines
    assert [c["n"] for c in ans.citations] == [1, 2]
    assert ans.citations[0] == {
        "n": 1,
        "node_id": "rag/chunking-strategies#切块策略/按标题切分",
        "breadcrumb": ["切块策略", "按标题切分"],
        "file_path": "rag/chunking-strategies.md",
        "line": 12,
    }
    assert_citations_valid(ans)
    assert ans.rounds == 1 and [s["step"] for s in ans.trace] == ["retrieve", "judge", "generate"]
    assert streamed == [ans.answer]
    assert ans.to_dict()["citations"] == ans.citations


def test_extractive_picks_highest_overlap_sentences():
    sources = [_src(2)]
    text, cited = extractive_answer("What does the k1 parameter control in BM25?", sources)
    assert text.splitlines() == [
        "BM25 scores documents by term frequency and inverse document frequency. [1]",
        "The k1 parameter controls term saturation. [1]",
        "The b parameter controls length normalisation. [1]",
    ]
    assert cited == [1]


def test_refusal_on_unanswerable_question_names_what_kb_covers():
    ans = answer(Q_NONE, OverlapRetriever(), llm=None, top_k=3)
    assert ans.refusal and ans.citations == []
    # the retrieved chapters share no term with the question: none is named as "close"
    assert ans.answer == "知识库中没有找到与这个问题相关的内容。"
    assert "切块策略" not in ans.answer
    assert ans.rounds == 3  # two rewrites tried before giving up
    assert len(ans.retrieved) == 3
    assert draft_golden_item(Q_NONE, ans, existing_ids=["q001"], today=date(2025, 1, 2)) == {
        "id": "q002",
        "query": Q_NONE,
        "unanswerable": True,
        "notes": "drafted from chat on 2025-01-02 (refused: check the KB really lacks it)",
    }


def test_refusal_in_english():
    ans = answer("Where is the company party held?", OverlapRetriever(), llm=None, top_k=2)
    assert ans.refusal
    assert ans.answer == "The knowledge base has nothing on this question."


def test_rule_rewrite_is_prepended_to_the_original_question():
    q = "BM25 saturation fusion weights"
    assert key_terms(q) == ["bm25", "saturation", "fusion", "weights"]
    # Round 1: BM25 chapter has 2 of 4 terms (grey); rounds 2-3 find nothing useful.
    retr = ScriptedRetriever([[2, 4], [3], [3]])
    ans = answer(q, retr, llm=None, top_k=2)
    first_rewrite = rule_rewrite(q, [_src(2), _src(4)])
    # The title "BM25" repeats the term "bm25" (case-insensitively) and is dropped.
    assert first_rewrite == "bm25 saturation fusion weights Tool allowlist"
    assert retr.queries[1] == f"{first_rewrite} {q}"
    second_rewrite = "bm25 saturation fusion weights Reciprocal rank fusion"
    assert retr.queries[2] == f"{second_rewrite} {q}"
    assert ans.rounds == 3
    assert ans.query == q  # round 1 (grey) beat the two insufficient rewrites


def _src(i: int, n: int = 1):
    from workbench.answer.sources import source_from_result

    return source_from_result(n, result(i, 1.0))


def test_best_round_is_used_not_a_union():
    q = "BM25 saturation fusion weights"
    # round 1: only the tool chapter (0/4, insufficient); round 2: BM25 (2/4, grey);
    # round 3: RRF + tool chapter (1/4, insufficient). Round 2 must win, alone.
    retr = ScriptedRetriever([[4], [2], [3, 4]])
    ans = answer(q, retr, llm=None, top_k=3)
    assert not ans.refusal
    assert [r["node_id"] for r in ans.retrieved] == ["retrieval/bm25#bm25"]
    assert {c["node_id"] for c in ans.citations} == {"retrieval/bm25#bm25"}
    assert ans.query == retr.queries[1]
    assert any(d.startswith("chose round 2 of 3 (grey") for d in steps(ans, "judge"))


def test_clear_evidence_stops_after_one_round():
    retr = OverlapRetriever()
    answer(Q_CHUNK, retr, llm=None, top_k=3)
    assert retr.queries == [Q_CHUNK]


def test_followup_prefixes_previous_key_terms():
    assert is_followup("那它的缺点呢？") and is_followup("And what about b?")
    assert not is_followup(Q_CHUNK)
    retr = OverlapRetriever()
    first = answer("BM25 的 k1 参数是什么？", retr, llm=None, top_k=3)
    follow = answer("那它的缺点呢？", retr, history=[first], llm=None, top_k=3)
    assert first.rounds == 1
    assert retr.queries[1] == "bm25 k1 参数 那它的缺点呢？"
    assert follow.query.startswith("bm25 k1 参数 ")
    notes = [d for d in steps(follow, "rewrite") if d.startswith("follow-up resolved")]
    assert notes == [
        "follow-up resolved against the previous turn ('BM25 的 k1 参数是什么？'): "
        "'bm25 k1 参数 那它的缺点呢？'"
    ]
    # The same with OpenAI-style role messages as history.
    hist = [
        {"role": "user", "content": "BM25 的 k1 参数是什么？"},
        {"role": "assistant", "content": "..."},
    ]
    assert resolve_followup("那它的缺点呢？", hist)[0] == "bm25 k1 参数 那它的缺点呢？"
    # No history, or a self-contained question: untouched.
    assert resolve_followup("那它的缺点呢？", None) == ("那它的缺点呢？", None)
    assert resolve_followup(Q_CHUNK, hist) == (Q_CHUNK, None)


def test_check_citations_removes_unknown_numbers():
    sources = [_src(0, 1), _src(1, 2), _src(2, 3)]
    text, valid, removed = check_citations("A [1]. B [7]. C [2, 9]. D 【3】.", sources)
    assert text == "A [1]. B. C [2]. D [3]."  # 【3】 normalised, so the UI links it too
    assert valid == [1, 2, 3] and removed == [7, 9]


def respond_answer(text: str):
    def respond(payload: dict[str, Any]):
        return Say(text) if task_of(payload) == "answer" else Fail(400)

    return respond


def test_llm_answer_with_valid_citations():
    with ChatServer(respond_answer("按标题切分是最常用的策略 [1]，固定长度更简单 [2]。")) as srv:
        ans = answer(Q_CHUNK, OverlapRetriever(), llm=llm_for(srv), top_k=3)
        assert srv.tasks() == ["answer"]  # clear evidence: no LLM judge, no rewrite
        user = srv.payloads[0]["messages"][-1]["content"]
    assert ans.mode == "llm" and ans.notice is None and not ans.refusal
    assert ans.answer == "按标题切分是最常用的策略 [1]，固定长度更简单 [2]。"
    assert [c["node_id"] for c in ans.citations] == [
        "rag/chunking-strategies#切块策略/按标题切分",
        "rag/chunking-strategies#切块策略/固定长度切分",
    ]
    assert (
        '<source n="1" chapter="切块策略 › 按标题切分" where="rag/chunking-strategies.md:12">'
        in user
    )
    assert '<source n="3"' in user and '<source n="4"' not in user
    assert_key_absent(ans)


def test_bogus_citation_is_removed_and_traced():
    deltas: list[str] = []
    raw = "按标题切分最常用 [1]。另见 [7]。"
    with ChatServer(respond_answer(raw)) as srv:
        ans = answer(
            Q_CHUNK, OverlapRetriever(), llm=llm_for(srv), top_k=3, stream_cb=deltas.append
        )
    assert "".join(deltas) == raw  # streamed raw, then checked
    assert ans.answer == "按标题切分最常用 [1]。另见。"
    assert [c["n"] for c in ans.citations] == [1]
    assert "removed citation(s) [7]: only sources 1..3 were given" in steps(ans, "verify")


def test_model_says_not_in_kb_becomes_refusal():
    with ChatServer(respond_answer("NOT_IN_KB")) as srv:
        ans = answer(Q_CHUNK, OverlapRetriever(), llm=llm_for(srv), top_k=3)
    assert ans.refusal and ans.citations == [] and ans.mode == "llm"
    assert "它涵盖的相关章节有" in ans.answer


@pytest.mark.parametrize(
    ("step", "reason"),
    [
        (Fail(500), "HTTP 500"),
        (Hang(5.0), "timeout after 0.3 s"),
        (Malformed(), "malformed response"),
        (WrongShape(), "malformed response"),
    ],
)
def test_llm_failure_falls_back_to_extractive(step, reason):
    with ChatServer([step]) as srv:
        ans = answer(Q_CHUNK, OverlapRetriever(), llm=llm_for(srv, timeout_s=0.3), top_k=3)
    assert ans.mode == "extractive" and not ans.refusal
    assert ans.notice == f"LLM endpoint failed ({reason}): extractive answer instead"
    assert ans.citations and "[1]" in ans.answer
    assert_citations_valid(ans)
    assert any(d.startswith("LLM failed: LLM endpoint at") for d in steps(ans, "generate"))
    assert_key_absent(ans)


def test_grey_zone_asks_the_llm_judge_only_there():
    q = "BM25 saturation fusion weights"
    with ChatServer(
        lambda p: Say("YES") if task_of(p) == "judge" else Say("k1 controls saturation [1].")
    ) as srv:
        ans = answer(q, ScriptedRetriever([[2, 4]]), llm=llm_for(srv), top_k=2)
        assert srv.tasks() == ["judge", "answer"]
    assert ans.rounds == 1 and not ans.refusal
    assert "rule: coverage 0.50 -> grey; LLM said 'YES' -> enough" in steps(ans, "judge")


def test_llm_judge_no_and_llm_rewrite_prepended():
    q = "BM25 saturation fusion weights"
    replies = {"judge": Say("NO"), "rewrite": Say('"bm25 k1 saturation"')}
    with ChatServer(lambda p: replies.get(task_of(p), Say("unused"))) as srv:
        retr = ScriptedRetriever([[2, 4]])
        ans = answer(q, retr, llm=llm_for(srv), top_k=2)
        assert srv.tasks() == ["judge", "rewrite", "judge", "rewrite"]
    # The second rewrite repeats the first, so no third round is run.
    assert retr.queries == [q, f"bm25 k1 saturation {q}"]
    assert "rewrite repeats an earlier query; stopping" in steps(ans, "rewrite")
    assert ans.refusal and ans.rounds == 2  # the LLM judged every round insufficient
    assert ans.mode == "llm"


def test_key_never_leaks_into_trace_or_exports():
    with ChatServer([Fail(500)]) as srv:
        llm = llm_for(srv)
        ans = answer(Q_CHUNK, OverlapRetriever(), llm=llm, top_k=3)
    assert KEY not in repr(llm) and KEY not in repr(llm.settings)
    assert_key_absent(ans)
    assert KEY not in json.dumps(ans.trace, ensure_ascii=False)


def tools_script(*turns):
    """Tool-mode replies in order; the loop-mode answer task gets a fixed reply."""
    queue = list(turns)

    def respond(payload):
        if task_of(payload) == "tools":
            return queue.pop(0) if queue else Say("out of script")
        return Say("loop answer [1]")

    return respond


def tool_results(srv: ChatServer, request: int) -> list[str]:
    return [m["content"] for m in srv.payloads[request]["messages"] if m["role"] == "tool"]


def test_tools_mode_citations_refer_to_tool_results():
    with ChatServer(
        tools_script(
            call_tool("knowledge_search", {"query": "BM25 k1", "top_k": 2}),
            call_tool("chapter_detail", {"node_id": "retrieval/fusion#rrf"}, id="c2"),
            Say("k1 controls saturation [1]; RRF flattens ranks [3]; see [9]."),
        )
    ) as srv:
        ans = answer("What does k1 do in BM25?", OverlapRetriever(), llm=llm_for(srv), mode="tools")
        assert srv.tasks() == ["tools", "tools", "tools"]
        assert srv.payloads[0]["tools"][0]["function"]["name"] == "knowledge_search"
        first = tool_results(srv, 1)[0]
    assert first.startswith(
        '<source n="1" chapter="Lexical retrieval › BM25" where="node_id=retrieval/bm25#bm25">'
    )
    assert ans.mode == "llm" and not ans.refusal and ans.rounds == 1
    assert [(r["n"], r["node_id"]) for r in ans.retrieved] == [
        (1, "retrieval/bm25#bm25"),
        (2, "rag/chunking-strategies#切块策略/按标题切分"),
        (3, "retrieval/fusion#rrf"),
    ]
    assert [c["node_id"] for c in ans.citations] == ["retrieval/bm25#bm25", "retrieval/fusion#rrf"]
    assert ans.answer == "k1 controls saturation [1]; RRF flattens ranks [3]; see."
    assert "removed citation(s) [9]: only sources 1..3 were given" in steps(ans, "verify")


def test_tools_mode_bad_json_and_unknown_tool_are_told_to_the_model():
    with ChatServer(
        tools_script(
            call_tool("knowledge_search", '{"query": "BM25'),
            call_tool("drop_tables", {}),
            call_tool("knowledge_search", {"query": "BM25 k1", "top_k": 0}),
            call_tool("chapter_detail", {"node_id": "nope#x"}),
            call_tool("knowledge_search", {"query": "BM25 k1"}),
            Say("BM25 uses k1 for saturation [1]."),
        )
    ) as srv:
        ans = answer("What does k1 do in BM25?", OverlapRetriever(), llm=llm_for(srv), mode="tools")
        errors = [tool_results(srv, i)[-1] for i in range(1, 5)]
    assert errors[0].startswith("error: arguments are not valid JSON (Unterminated string")
    assert (
        errors[1]
        == "error: unknown tool 'drop_tables'; the tools are chapter_detail, knowledge_search"
    )
    assert errors[2] == "error: top_k must be an integer from 1 to 20"
    assert errors[3] == "error: no chapter 'nope#x'; use an id from knowledge_search"
    assert not ans.refusal and ans.citations[0]["node_id"] == "retrieval/bm25#bm25"
    assert len(steps(ans, "tool_call")) == 5


def test_tools_mode_repeated_failing_call_is_stopped():
    broken = call_tool("knowledge_search", '{"query": ')
    with ChatServer(tools_script(broken, broken, broken, broken)) as srv:
        ans = answer(Q_CHUNK, OverlapRetriever(), llm=llm_for(srv), mode="tools", top_k=3)
        assert srv.tasks() == ["tools", "tools", "answer"]
    assert ans.notice == (
        "Tool calling stopped (the model repeated the failing call knowledge_search): "
        "answered with the retrieval loop"
    )
    assert ans.answer == "loop answer [1]" and ans.mode == "llm"
    assert "stopped: the model repeated the failing call knowledge_search" in steps(
        ans, "tool_call"
    )


def test_tools_mode_turn_limit():
    search = call_tool("knowledge_search", {"query": "切块"})
    with ChatServer(tools_script(*[search] * 10)) as srv:
        ans = answer(Q_CHUNK, OverlapRetriever(), llm=llm_for(srv), mode="tools", max_turns=3)
        assert srv.tasks() == ["tools"] * 3 + ["answer"]
    assert ans.notice is not None and ans.notice.startswith(
        "Tool calling stopped (turn limit (3) reached)"
    )


def test_tools_mode_streams_tool_calls_and_answer():
    deltas: list[str] = []
    step = CallTools((Call("knowledge_search", '{"query": "切块策略"}', "s1"),))
    with ChatServer(tools_script(step, Say("按标题切分 [1]。"))) as srv:
        ans = answer(
            Q_CHUNK,
            OverlapRetriever(),
            llm=llm_for(srv),
            mode="tools",
            stream_cb=deltas.append,
        )
        assert all(p.get("stream") for p in srv.payloads)
    assert "".join(deltas) == "按标题切分 [1]。"
    assert ans.citations[0]["node_id"] == "rag/chunking-strategies#切块策略/按标题切分"


def test_tools_mode_answer_without_evidence_is_refused():
    with ChatServer(tools_script(Say("The party is in Paris."))) as srv:
        ans = answer(Q_NONE, OverlapRetriever(), llm=llm_for(srv), mode="tools", top_k=2)
    assert ans.refusal and ans.citations == []
    assert len(ans.retrieved) == 2  # a search on the question shows what the KB covers


def test_tools_mode_llm_failure_falls_back():
    with ChatServer([Fail(502)]) as srv:
        ans = answer(Q_CHUNK, OverlapRetriever(), llm=llm_for(srv), mode="tools", top_k=3)
    assert ans.mode == "extractive"
    assert ans.notice == "LLM endpoint failed (HTTP 502): extractive answer instead"
    assert_citations_valid(ans)


def test_tools_mode_without_llm_is_the_extractive_loop():
    ans = answer(Q_CHUNK, OverlapRetriever(), llm=None, mode="tools", top_k=3)
    assert ans.mode == "extractive" and ans.citations


def test_bad_arguments_are_rejected():
    with pytest.raises(ValueError, match="mode"):
        answer(Q_CHUNK, OverlapRetriever(), mode="magic")
    with pytest.raises(ValueError, match="top_k"):
        answer(Q_CHUNK, OverlapRetriever(), top_k=0)
    with pytest.raises(ValueError, match="empty"):
        answer("  ", OverlapRetriever())


def test_draft_golden_item_from_citations():
    ans = answer(Q_CHUNK, OverlapRetriever(), llm=None, top_k=3)
    item = draft_golden_item(
        Q_CHUNK, ans, existing_ids=["q001", "q009", "q010", "custom"], today=date(2025, 3, 4)
    )
    assert item == {
        "id": "q011",
        "query": Q_CHUNK,
        "relevant": [
            "rag/chunking-strategies#切块策略/按标题切分",
            "rag/chunking-strategies#切块策略/固定长度切分",
        ],
        "difficulty": "medium",
        "category": "rag",
        "notes": "drafted from chat on 2025-03-04",
    }
    assert draft_golden_item(Q_CHUNK, ans, today=date(2025, 3, 4))["id"] == "q001"


def test_draft_golden_item_category_majority_and_cap():
    cits = [
        {"n": i + 1, "node_id": CHAPTERS[i][0], "breadcrumb": [], "file_path": "", "line": 1}
        for i in (4, 2, 3, 0, 1)
    ]
    retrieved = [
        {
            "n": i + 1,
            "node_id": CHAPTERS[i][0],
            "category": CHAPTERS[i][6],
            "file_path": CHAPTERS[i][4],
        }
        for i in range(5)
    ]
    ans = ChatAnswer("q", "a", cits, False, "llm", None, retrieved, [], 1)
    item = draft_golden_item("q", ans, today=date(2025, 1, 1))
    assert item["relevant"] == [CHAPTERS[i][0] for i in (4, 2, 3, 0)]  # at most 4
    assert item["category"] == "retrieval"  # 2 of the 4, ahead of agents and rag


@pytest.fixture
def cli_env(tmp_path, monkeypatch):
    """cwd = an empty workspace; engine.search replaced by a stand-in over OverlapRetriever
    (the CLI wiring only); returns (workspace, the Engine.open calls)."""
    import sys
    import types

    opened: list[tuple[Any, Any, EngineConfig]] = []

    class StandInEngine:
        @classmethod
        def open(cls, kb_dir, index_uri, config):
            opened.append((kb_dir, index_uri, config))
            return OverlapRetriever()

    module = types.ModuleType("engine.search")
    module.Engine = StandInEngine  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "engine.search", module)
    monkeypatch.chdir(tmp_path)
    for var in ("OPENAI_BASE_URL", "WIKIRAG_LLM_MODEL", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    (tmp_path / "kb").mkdir()
    return tmp_path, opened


def test_cli_ask_json_without_llm(cli_env, capsys):
    from workbench.cli import main

    assert main(["ask", Q_CHUNK, "--kb", "kb", "--json", "--top-k", "3"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= {"answer", "citations", "refusal", "mode", "notice", "trace"}
    assert out["mode"] == "extractive" and out["refusal"] is False
    assert out["notice"].startswith("No LLM configured")
    assert set(out["citations"][0]) == {"n", "node_id", "breadcrumb", "file_path", "line"}
    kb_dir, index, cfg = cli_env[1][0]
    assert str(kb_dir) == "kb" and str(index) == ".wikirag/kb" and cfg == EngineConfig()


def test_cli_ask_text_with_llm_from_dotenv(cli_env, capsys):
    from workbench.cli import main

    with ChatServer(respond_answer("按标题切分 [1]。")) as srv:
        (cli_env[0] / ".env").write_text(
            f"OPENAI_BASE_URL={srv.base_url}\nWIKIRAG_LLM_MODEL=m\nOPENAI_API_KEY={KEY}\n",
            encoding="utf-8",
        )
        assert main(["ask", Q_CHUNK, "--kb", "kb"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(
        "按标题切分 [1]。\n\nSources:\n  [1] 切块策略 › 按标题切分  (rag/chunking-strategies.md:12)"
    )
    assert "Note:" not in out and KEY not in out


def test_cli_ask_llm_failure_is_a_notice_not_a_traceback(cli_env, capsys):
    from workbench.cli import main

    with ChatServer([Fail(500)]) as srv:
        (cli_env[0] / ".env").write_text(
            f"OPENAI_BASE_URL={srv.base_url}\nWIKIRAG_LLM_MODEL=m\nOPENAI_API_KEY={KEY}\n",
            encoding="utf-8",
        )
        assert main(["ask", Q_CHUNK, "--kb", "kb"]) == 0
    captured = capsys.readouterr()
    assert "Note: LLM endpoint failed (HTTP 500): extractive answer instead" in captured.out
    assert "Traceback" not in captured.err and KEY not in captured.out + captured.err


REAL_KB = {
    "rag/chunking.md": "---\ntitle: 切块策略\ncategory: rag\n---\n# 切块策略\n\n切块决定检索的最小单位。\n\n"
    "## 按标题切块\n\n按 Markdown 标题切块，每个章节是一个块，并保留面包屑。\n\n"
    "## 固定长度切块\n\n按固定 token 数切块，块之间有 overlap。\n",
    "retrieval/rerank.md": "---\ntitle: 重排\ncategory: retrieval\n---\n# 重排\n\n重排模型对候选做精排。\n\n"
    "## 交叉编码器\n\n交叉编码器同时读取查询和文档，打分更准。\n",
}


@pytest.fixture(scope="module")
def real_engine(tmp_path_factory):
    """The real engine over a two-file KB with the offline "hash" embedder."""
    from engine.indexer import build_index
    from engine.search import Engine
    from engine.tree import parse_kb

    root = tmp_path_factory.mktemp("real")
    for rel, text in REAL_KB.items():
        (root / "kb" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "kb" / rel).write_text(text, encoding="utf-8")
    cfg = EngineConfig().with_overrides({"embedding.provider": "hash"})
    build_index(parse_kb(root / "kb"), cfg, str(root / "index"))
    return Engine.open(root / "kb", root / "index", cfg), cfg


def test_real_engine_extractive_and_refusal(real_engine):
    engine, _cfg = real_engine
    ans = answer("按标题切块是怎么做的？", engine, llm=None, top_k=3)
    assert not ans.refusal and ans.mode == "extractive"
    assert ans.citations[0]["node_id"] == "rag/chunking#切块策略/按标题切块"
    assert ans.citations[0]["file_path"] == "rag/chunking.md"
    assert_citations_valid(ans)
    refused = answer("公司年会在哪里举办？", engine, llm=None, top_k=3)
    assert refused.refusal and refused.citations == []
    item = draft_golden_item("按标题切块是怎么做的？", ans, today=date(2025, 1, 1))
    assert item["relevant"][0] == "rag/chunking#切块策略/按标题切块"
    assert item["category"] == "rag"


def test_real_engine_tools_mode(real_engine):
    engine, _cfg = real_engine
    script = tools_script(
        call_tool("knowledge_search", {"query": "交叉编码器", "top_k": 2}),
        call_tool("chapter_detail", {"node_id": "retrieval/rerank#重排/交叉编码器"}, id="c2"),
        Say("交叉编码器同时读取查询和文档 [1]。"),
    )
    with ChatServer(script) as srv:
        ans = answer("交叉编码器怎么打分？", engine, llm=llm_for(srv), mode="tools")
        detail = tool_results(srv, 2)[-1]
    assert "交叉编码器同时读取查询和文档" in detail
    assert ans.citations[0]["node_id"] == "retrieval/rerank#重排/交叉编码器"
    assert not ans.refusal
