"""Who may call `wikirag serve` and `wikirag mcp --http`: Host / Origin allow-list, admin
routes off without a token, capped bodies. Real uvicorn on 127.0.0.1 for the HTTP API; the
MCP app in-process (its lifespan runs under TestClient)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from starlette.testclient import TestClient

from tests.serve.conftest import TestKB, live_server
from workbench.serve.app import create_app
from workbench.serve.http_guard import allowed_hosts, check_request
from workbench.serve.limits import MAX_BODY_BYTES
from workbench.serve.served import ServedEngine

EVIL = "http://attacker.example"


@pytest.fixture(scope="module")
def served(test_kb: TestKB) -> Iterator[tuple[str, httpx.Client]]:
    app = create_app(test_kb.ws, test_kb.cfg, llm=None, admin_token="")
    with live_server(app) as url, httpx.Client(base_url=url, timeout=60) as c:
        yield url, c


def test_a_foreign_host_header_is_refused_421(served):
    _, c = served
    r = c.post("/search", json={"query": "RRF"}, headers={"Host": "rebind.attacker.example"})
    assert r.status_code == 421
    assert r.json()["error"] == "host not allowed" and "--allow-host" in r.json()["detail"]
    assert c.get("/health", headers={"Host": "rebind.attacker.example:8000"}).status_code == 421
    for host in ("localhost", "localhost:8000", "127.0.0.1:1234"):
        assert c.post("/search", json={"query": "RRF"}, headers={"Host": host}).status_code == 200


def test_a_cross_site_post_is_refused_403_and_same_origin_passes(served):
    url, c = served
    r = c.post("/search", json={"query": "RRF"}, headers={"Origin": EVIL})
    assert r.status_code == 403 and r.json()["error"] == "origin not allowed"
    assert c.post("/ask", json={"question": "RRF"}, headers={"Origin": "null"}).status_code == 403
    # A form post (the classic CSRF shape) is refused before the body is even parsed.
    r = c.post(
        "/admin/rebuild-index",
        content=b"force=true",
        headers={"Origin": EVIL, "Content-Type": "application/x-www-form-urlencoded"},
    )
    assert r.status_code == 403
    assert c.post("/search", json={"query": "RRF"}, headers={"Origin": url}).status_code == 200
    assert c.get("/health", headers={"Origin": EVIL}).status_code in (200, 503)  # reads allowed


def test_admin_routes_are_disabled_without_a_token(served):
    _, c = served
    r = c.post("/admin/rebuild-index")
    assert r.status_code == 403
    assert r.json()["error"] == "admin disabled" and "WIKIRAG_ADMIN_TOKEN" in r.json()["detail"]
    assert c.get("/admin/jobs").status_code == 403


def test_bodies_over_the_cap_are_refused_413(served):
    _, c = served
    big = b'{"query": "' + b"a" * MAX_BODY_BYTES + b'"}'
    r = c.post("/search", content=big, headers={"Content-Type": "application/json"})
    assert r.status_code == 413 and "1,048,576 bytes" in r.json()["detail"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted while it streams
        yield b'{"query": "'
        for _ in range(20):
            yield b"a" * 65536
        yield b'"}'

    r = c.post("/search", content=chunks(), headers={"Content-Type": "application/json"})
    assert r.status_code == 413
    assert c.post("/search", json={"query": "RRF"}).status_code == 200


def test_allow_host_adds_names_and_the_bind_address():
    assert allowed_hosts() == ("localhost", "127.0.0.1", "::1")
    assert allowed_hosts(["wiki.internal"], bind="0.0.0.0")[-1] == "wiki.internal"
    assert "10.0.0.5" in allowed_hosts(bind="10.0.0.5")
    names = allowed_hosts(["wiki.internal"])
    assert check_request("POST", {"host": "wiki.internal:8000"}, names) is None
    assert check_request("POST", {"host": "[::1]:8000"}, names) is None
    assert check_request("POST", {"host": "evil.example"}, names).status == 421
    assert check_request("POST", {"host": "evil.example"}, allowed_hosts(["*"])) is None


@pytest.fixture(scope="module")
def mcp_client(test_kb: TestKB) -> Iterator[TestClient]:
    from workbench.serve.mcp import build_mcp_server, http_app

    server = build_mcp_server(ServedEngine(test_kb.ws, test_kb.cfg), llm=None)
    with TestClient(http_app(server), base_url="http://127.0.0.1:8765") as c:
        yield c


INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


def test_mcp_http_shares_the_host_origin_and_body_checks(mcp_client):
    c = mcp_client
    assert c.post("/mcp", json=INIT, headers=MCP_HEADERS).status_code == 200
    r = c.post("/mcp", json=INIT, headers={**MCP_HEADERS, "Host": "rebind.attacker.example"})
    assert r.status_code == 421 and r.json()["error"] == "host not allowed"
    r = c.post("/mcp", json=INIT, headers={**MCP_HEADERS, "Origin": EVIL})
    assert r.status_code == 403
    big = b'{"x": "' + b"a" * MAX_BODY_BYTES + b'"}'
    r = c.post("/mcp", content=big, headers={**MCP_HEADERS, "Content-Type": "application/json"})
    assert r.status_code == 413 and "1,048,576" in r.json()["detail"]
