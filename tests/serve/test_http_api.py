"""The HTTP API through a real uvicorn server on 127.0.0.1 (hash embedder, small KB copy)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from tests.serve.conftest import TestKB, live_server, make_kb
from workbench.serve.app import create_app
from workbench.serve.served import Job, JobConflict, RebuildJobs

SEED_RESULT_KEYS = {
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
SEED_METADATA_KEYS = {
    "file_path",
    "line",
    "anchor",
    "level",
    "keywords",
    "doc_type",
    "priority",
    "category",
}
TOKEN = "test-admin-token"  # admin routes are disabled without one
ADMIN = {"Authorization": f"Bearer {TOKEN}"}
SEED_RESPONSE_KEYS = {"results", "total", "took_ms", "index_stats", "timings", "config_hash"}


def path_of(node_id: str) -> str:
    """A node id as a URL path segment: '#' must travel as %23."""
    return "/chapter/" + quote(node_id, safe="/")


def wait_job(client: httpx.Client, job_id: str, headers: dict | None = None) -> dict:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        job = client.get(f"/admin/jobs/{job_id}", headers=headers).json()
        if job["status"] in ("succeeded", "failed"):
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} did not finish")


@pytest.fixture(scope="module")
def client(test_kb: TestKB) -> Iterator[httpx.Client]:
    app = create_app(test_kb.ws, test_kb.cfg, llm=None, admin_token="")
    with live_server(app) as url, httpx.Client(base_url=url, timeout=60) as c:
        yield c


def test_search_returns_the_seed_shape_and_the_config_hash(client, test_kb):
    r = client.post("/search", json={"query": "按标题切分", "top_k": 3})
    assert r.status_code == 200
    body = r.json()
    assert r.headers["x-config-hash"] == test_kb.cfg.hash == body["config_hash"]
    assert set(body) >= SEED_RESPONSE_KEYS
    assert len(body["results"]) == 3
    assert body["total"] >= 3
    for hit in body["results"]:
        assert set(hit) >= SEED_RESULT_KEYS
        assert set(hit["rank_source"]) == {"vector", "bm25", "rerank"}
        assert set(hit["metadata"]) >= SEED_METADATA_KEYS
    assert body["results"][0]["node_id"].startswith("rag/chunking-strategies")
    assert body["index_stats"]["embedder"].startswith("hash/")
    scores = [h["score"] for h in body["results"]]
    assert scores == sorted(scores, reverse=True)


def test_search_mode_filters_and_expand(client):
    r = client.post("/search", json={"query": "BM25 分词", "search_mode": "keyword", "top_k": 5})
    assert r.status_code == 200
    assert all(h["rank_source"]["vector"] is None for h in r.json()["results"])

    r = client.post(
        "/search",
        json={"query": "检索", "top_k": 20, "filters": {"category": "retrieval"}},
    )
    hits = r.json()["results"]
    assert hits and {h["metadata"]["category"] for h in hits} == {"retrieval"}

    r = client.post(
        "/search", json={"query": "检索", "top_k": 5, "filters": {"doc_type": ["faq", "concept"]}}
    )
    assert {h["metadata"]["doc_type"] for h in r.json()["results"]} <= {"faq", "concept"}

    r = client.post(
        "/search",
        json={"query": "文档切分策略", "top_k": 1, "expand": "children", "search_mode": "keyword"},
    )
    hit = r.json()["results"][0]
    assert hit["expanded"] and {e["relation"] for e in hit["expanded"]} == {"child"}


def test_rerank_without_a_reranker_warns_instead_of_failing(client):
    r = client.post("/search", json={"query": "RRF", "rerank": True, "top_k": 2})
    assert r.status_code == 200
    assert any("rerank" in w for w in r.json()["warnings"])


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        ({"query": ""}, 422, "query must not be empty"),
        ({"query": "   "}, 422, "query must not be empty"),
        ({}, 422, "query"),
        ({"query": "x", "top_k": 0}, 422, "top_k"),
        ({"query": "x", "search_mode": "fuzzy"}, 422, "search_mode"),
        ({"query": "x", "expand": "cousins"}, 422, "expand"),
        ({"query": "x", "filters": {"colour": "red"}}, 422, "filters.colour"),
        ({"query": "x", "topk": 3}, 422, "topk"),
        ({"query": "x", "filters": {"category": []}}, 400, "filter 'category' has no value"),
    ],
)
def test_bad_search_requests_say_what_to_fix(client, test_kb, body, status, says):
    r = client.post("/search", json=body)
    assert r.status_code == status
    err = r.json()
    assert set(err) >= {"error", "detail", "config_hash"}
    assert says in err["detail"]
    assert r.headers["x-config-hash"] == test_kb.cfg.hash


def test_body_that_is_not_json_is_a_422(client):
    r = client.post("/search", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 422
    assert r.json()["error"] == "invalid request"


def test_chapter_with_encoded_hash_children_and_siblings(client, test_kb):
    kb = test_kb.ws.kb
    doc = "rag/chunking-strategies"
    r = client.get(path_of(doc))
    assert r.status_code == 200
    top = r.json()
    assert top["level"] == 0 and top["parent_id"] is None
    assert top["config_hash"] == test_kb.cfg.hash
    section = top["children"][0]["node_id"]
    assert section.startswith(doc + "#")

    r = client.get(path_of(section))
    assert r.status_code == 200
    ch = r.json()
    assert ch["node_id"] == section and ch["parent_id"] == doc
    assert ch["content"] in (kb / "rag/chunking-strategies.md").read_text(encoding="utf-8")
    assert ch["metadata"]["file_path"] == "rag/chunking-strategies.md"
    kids = [c["node_id"] for c in ch["children"]]
    assert kids and all(k.startswith(section + "/") for k in kids)

    r = client.get(path_of(section) + "/children")
    assert r.status_code == 200
    assert r.json()["relation"] == "children"
    assert [c["node_id"] for c in r.json()["chapters"]] == kids

    r = client.get(path_of(kids[0]) + "/siblings")
    assert r.status_code == 200
    sibs = [c["node_id"] for c in r.json()["chapters"]]
    assert kids[0] not in sibs and set(sibs) == set(kids[1:])


def test_unknown_chapter_is_a_404_with_close_matches(client):
    r = client.get(path_of("rag/chunking-strategy"))
    assert r.status_code == 404
    err = r.json()
    assert err["error"] == "unknown node"
    assert "rag/chunking-strategies" in err["close_matches"]
    assert "did you mean" in err["detail"]
    assert client.get(path_of("rag/nothing#here") + "/children").status_code == 404


def test_health_stats_and_docs(client, test_kb):
    r = client.get("/health")
    assert r.status_code == 200
    h = r.json()
    assert h["status"] == "ok" and h["serving"] and h["reasons"] == []
    assert h["config_hash"] == test_kb.cfg.hash

    s = client.get("/stats").json()
    assert s["documents"] == 5 and s["config_hash"] == test_kb.cfg.hash
    assert s["server"]["requests"] >= 1
    assert s["freshness"]["fresh"] is True

    spec = client.get("/openapi.json").json()
    assert {"/search", "/ask", "/health", "/stats", "/admin/rebuild-index"} <= set(spec["paths"])
    assert "/chapter/{node_id}" in spec["paths"]
    assert "%23" in spec["info"]["description"]
    assert client.get("/docs").status_code == 200


def test_ask_answers_with_citations_to_retrieved_chapters(client, test_kb):
    r = client.post("/ask", json={"question": "按标题切分的 chunk size 是多少？", "top_k": 3})
    assert r.status_code == 200
    a = r.json()
    assert a["config_hash"] == test_kb.cfg.hash
    assert a["mode"] == "extractive" and a["notice"]
    retrieved = {x["node_id"] for x in a["retrieved"]}
    assert {c["node_id"] for c in a["citations"]} <= retrieved

    r = client.post("/ask", json={"question": " "})
    assert r.status_code == 422 and "question must not be empty" in r.json()["detail"]


def test_unknown_routes_and_methods_are_json_errors(client, test_kb):
    r = client.get("/nope")
    assert r.status_code == 404 and "/docs" in r.json()["detail"]
    assert r.headers["x-config-hash"] == test_kb.cfg.hash
    r = client.get("/search")
    assert r.status_code == 405 and r.json()["error"]


def test_admin_endpoints_need_the_bearer_token(test_kb, monkeypatch):
    monkeypatch.setenv("WIKIRAG_ADMIN_TOKEN", "s3cret")
    app = create_app(test_kb.ws, test_kb.cfg, llm=None)
    with live_server(app) as url, httpx.Client(base_url=url, timeout=60) as c:
        r = c.post("/admin/rebuild-index")
        assert r.status_code == 401
        assert r.headers["www-authenticate"] == "Bearer"
        assert "WIKIRAG_ADMIN_TOKEN" in r.json()["detail"]
        assert c.get("/admin/jobs/x", headers={"Authorization": "Bearer nope"}).status_code == 401
        assert c.get("/admin/jobs").status_code == 401
        assert c.post("/search", json={"query": "RRF"}).status_code == 200  # not protected

        ok = {"Authorization": "Bearer s3cret"}
        r = c.post("/admin/rebuild-index", headers=ok)
        assert r.status_code == 202
        job = wait_job(c, r.json()["job_id"], ok)
        assert job["status"] == "succeeded", job
        assert job["result"]["unchanged"] == job["result"]["rows"]
        assert c.get("/admin/jobs/missing", headers=ok).status_code == 404
        assert [j["job_id"] for j in c.get("/admin/jobs", headers=ok).json()] == [job["job_id"]]


def test_only_one_rebuild_runs_at_a_time():
    release, progressed = threading.Event(), threading.Event()

    class SlowServed:
        def rebuild(self, *, force: bool, progress):
            progress(1, 2, "embed")
            progressed.set()
            release.wait(10)

            class Report:
                def to_dict(self):
                    return {"rows": 1}

                def summary(self):
                    return "done"

            return Report()

    jobs = RebuildJobs(SlowServed())  # type: ignore[arg-type]
    first = jobs.start(force=False)
    with pytest.raises(JobConflict) as info:
        jobs.start(force=True)
    assert info.value.job.job_id == first.job_id
    assert progressed.wait(10)
    assert first.status == "running"
    assert (first.stage, first.done, first.total) == ("embed", 1, 2)
    release.set()
    jobs.join(10)
    assert first.status == "succeeded" and first.result == {"rows": 1}
    assert isinstance(jobs.start(force=False), Job)
    jobs.join(10)


def test_without_an_index_the_server_is_degraded_until_a_rebuild(tmp_path):
    kb = make_kb(tmp_path, index=False)
    app = create_app(kb.ws, kb.cfg, llm=None, admin_token=TOKEN)
    with live_server(app) as url, httpx.Client(base_url=url, timeout=60, headers=ADMIN) as c:
        r = c.get("/health")
        assert r.status_code == 503
        assert r.json()["status"] == "degraded" and "wikirag index" in r.json()["reasons"][0]
        r = c.post("/search", json={"query": "RRF"})
        assert r.status_code == 503 and r.json()["error"] == "index missing"
        assert "POST /admin/rebuild-index" in r.json()["detail"]

        job = wait_job(c, c.post("/admin/rebuild-index").json()["job_id"])
        assert job["status"] == "succeeded" and job["result"]["full_rebuild"]
        assert c.get("/health").json()["status"] == "ok"
        assert c.post("/search", json={"query": "RRF"}).json()["results"]


def test_an_embedder_mismatch_is_reported_and_fixed_by_a_rebuild(tmp_path):
    kb = make_kb(tmp_path)  # indexed with the hash embedder at 256 dims
    cfg = kb.cfg.with_overrides({"embedding.dims": 128})
    app = create_app(kb.ws, cfg, llm=None, admin_token=TOKEN)
    with live_server(app) as url, httpx.Client(base_url=url, timeout=60, headers=ADMIN) as c:
        r = c.get("/health")
        assert r.status_code == 503
        assert "embedder hash/char-ngram-1-3-crc32-v1/256" in r.json()["reasons"][0]
        assert "/128" in r.json()["reasons"][0]
        r = c.post("/search", json={"query": "RRF"})
        assert r.status_code == 503 and r.json()["config_hash"] == cfg.hash

        job = wait_job(c, c.post("/admin/rebuild-index").json()["job_id"])
        assert job["status"] == "succeeded" and job["result"]["full_rebuild"]
        assert any("embedder changed" in w for w in job["result"]["warnings"])
        h = c.get("/health").json()
        assert h["status"] == "ok" and h["embedder"].endswith("/128")


def test_health_reports_a_stale_index_after_a_kb_edit(tmp_path):
    kb = make_kb(tmp_path)
    app = create_app(kb.ws, kb.cfg, llm=None, admin_token=TOKEN)
    with live_server(app) as url, httpx.Client(base_url=url, timeout=60, headers=ADMIN) as c:
        assert c.get("/health").json()["status"] == "ok"
        f = kb.ws.kb / "rag/rag-faq.md"
        f.write_text(f.read_text(encoding="utf-8") + "\n新增的一段。\n", encoding="utf-8")
        h = c.get("/health").json()
        assert h["status"] == "degraded" and h["serving"]
        assert any("index is stale: 0 new, 1 changed" in r for r in h["reasons"])


def _keep_searching(
    url: str, stop: threading.Event, failures: list[str], counts: list[int], pause: float = 0.0
) -> None:
    """Search until ``stop``; every answer that is not 200 with results goes to ``failures``."""
    with httpx.Client(base_url=url, timeout=60) as s:
        while not stop.is_set():
            r = s.post("/search", json={"query": "混合检索 RRF", "top_k": 5})
            if r.status_code != 200 or not r.json()["results"]:
                failures.append(f"{r.status_code} {r.text[:200]}")
            counts[0] += 1
            time.sleep(pause)


def test_rebuild_while_searching_switches_to_the_new_content(tmp_path):
    kb = make_kb(tmp_path)
    marker = "zebraquokkamarker"
    app = create_app(kb.ws, kb.cfg, llm=None, admin_token=TOKEN)
    with live_server(app) as url, httpx.Client(base_url=url, timeout=60, headers=ADMIN) as c:
        section = c.get(path_of("retrieval/hybrid-search")).json()["children"][0]["node_id"]
        before = c.get(path_of(section)).json()["content"]
        assert marker not in before
        path: Path = kb.ws.kb / "retrieval/hybrid-search.md"
        text = path.read_text(encoding="utf-8")
        first_line = before.splitlines()[0]
        path.write_text(
            text.replace(first_line, f"{first_line}\n\n{marker} 是新加的一句。", 1),
            encoding="utf-8",
        )

        stop = threading.Event()
        failures: list[str] = []
        counts = [0]
        args = (url, stop, failures, counts)
        threads = [threading.Thread(target=_keep_searching, args=args) for _ in range(3)]
        for t in threads:
            t.start()
        try:
            time.sleep(0.3)
            job = wait_job(c, c.post("/admin/rebuild-index", json={"force": True}).json()["job_id"])
            time.sleep(0.3)
        finally:
            stop.set()
            for t in threads:
                t.join(30)
        assert job["status"] == "succeeded", job
        assert job["result"]["full_rebuild"] is True
        assert failures == []
        assert counts[0] > 3

        assert marker in c.get(path_of(section)).json()["content"]
        hit = c.post(
            "/search", json={"query": marker, "search_mode": "keyword", "top_k": 1}
        ).json()["results"][0]
        assert hit["node_id"] == section and marker in hit["content"]
        assert c.get("/health").json()["status"] == "ok"


def test_load_8_clients_x_50_requests_without_errors(client):
    queries = [
        "切块策略",
        "RRF 融合权重",
        "BM25 k1",
        "父子块",
        "jieba 词典",
        "top_k",
        "FAQ",
        "混合检索",
    ]

    def run(i: int) -> list[int]:
        statuses = []
        with httpx.Client(base_url=str(client.base_url), timeout=60) as c:
            for j in range(50):
                body = {"query": queries[(i + j) % len(queries)], "top_k": 5}
                if j % 5 == 4:
                    body["search_mode"] = "keyword"
                r = c.post("/search", json=body)
                ok = r.status_code == 200 and len(r.json()["results"]) == 5
                statuses.append(200 if ok else r.status_code)
        return statuses

    with ThreadPoolExecutor(8) as pool:
        statuses = [s for batch in pool.map(run, range(8)) for s in batch]
    assert len(statuses) == 400
    assert statuses == [200] * 400


def test_health_says_the_kb_folder_is_missing_with_a_200(tmp_path):
    import shutil

    kb = make_kb(tmp_path)
    app = create_app(kb.ws, kb.cfg, llm=None, admin_token="")
    with live_server(app) as url, httpx.Client(base_url=url, timeout=60) as c:
        assert c.get("/health").json()["status"] == "ok"
        shutil.rmtree(kb.ws.kb)
        r = c.get("/health")
        assert r.status_code == 200
        h = r.json()
        assert h["status"] == "degraded" and h["serving"] is True
        assert any("knowledge base folder" in x and "is missing" in x for x in h["reasons"])
        assert c.post("/search", json={"query": "RRF"}).status_code == 200  # still serving


def test_a_server_follows_an_index_rebuilt_by_the_cli_without_dropping_requests(tmp_path):
    import os
    import subprocess
    import sys

    kb = make_kb(tmp_path)
    marker = "okapifollowmarker"
    app = create_app(kb.ws, kb.cfg, llm=None, admin_token=TOKEN)
    with live_server(app) as url, httpx.Client(base_url=url, timeout=60) as c:
        before = c.post("/search", json={"query": marker, "search_mode": "keyword"}).json()
        assert marker not in str(before["results"])
        path: Path = kb.ws.kb / "retrieval/hybrid-search.md"
        path.write_text(
            path.read_text(encoding="utf-8") + f"\n\n## 新的一节\n\n{marker} 是新加的一句。\n",
            encoding="utf-8",
        )
        stop = threading.Event()
        failures: list[str] = []
        t = threading.Thread(target=_keep_searching, args=(url, stop, failures, [0], 0.05))
        t.start()
        try:
            # Another process rebuilds the index, as `wikirag index` from a shell would.
            cli = [sys.executable, "-m", "workbench.cli", "index", "--kb", str(kb.ws.kb)]
            cli += ["--index", str(kb.ws.index), "--config", str(kb.config_file)]
            done = subprocess.run(cli, capture_output=True, text=True, env=dict(os.environ))
            assert done.returncode == 0, done.stderr
            deadline = time.monotonic() + 30
            hits: list[dict] = []
            while time.monotonic() < deadline:
                hits = c.post(
                    "/search", json={"query": marker, "search_mode": "keyword", "top_k": 1}
                ).json()["results"]
                if hits and marker in hits[0]["content"]:
                    break
                time.sleep(0.2)
        finally:
            stop.set()
            t.join(30)
        assert hits and marker in hits[0]["content"], "the server never switched"
        assert failures == []
        assert c.get("/health").json()["status"] == "ok"
