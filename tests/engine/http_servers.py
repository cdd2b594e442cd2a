"""Real HTTP servers on 127.0.0.1 for provider tests (embeddings, rerank, later LLM chat).

``LocalServer`` is a stdlib ``ThreadingHTTPServer`` on an ephemeral port with a handler
registry per path; every request is recorded. Handlers are plain callables
``Request -> Reply``; ``behave(mode, ok)`` wraps one so it can also fail on purpose:

    with LocalServer({"/v1/embeddings": embeddings_handler(dims=8)}) as srv:
        cfg = EmbeddingConfig(provider="openai", base_url=srv.url("/v1"), model="m")
        ...
        srv.route("/v1/embeddings", embeddings_handler(mode="hang"))   # switch at run time

Modes: ``ok``, ``500``, ``hang`` (answers after ``hang_s`` or when the server stops),
``malformed`` (body is not JSON), ``wrong_shape`` (valid JSON of the wrong shape).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

MODES = ("ok", "500", "hang", "malformed", "wrong_shape")


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8"))


@dataclass(frozen=True)
class Reply:
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    delay_s: float = 0.0  # wait this long (or until the server stops) before answering
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[Request], Reply]


def json_reply(obj: Any, status: int = 200) -> Reply:
    return Reply(status=status, body=json.dumps(obj, ensure_ascii=False).encode("utf-8"))


def behave(
    mode: str,
    ok: Handler,
    *,
    wrong_shape: Any = None,
    hang_s: float = 5.0,
) -> Handler:
    """``ok`` itself for mode "ok", else a handler that fails the way ``mode`` names."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")

    def handler(req: Request) -> Reply:
        if mode == "ok":
            return ok(req)
        if mode == "500":
            return json_reply({"error": {"message": "internal failure (test)"}}, status=500)
        if mode == "hang":
            return Reply(delay_s=hang_s, body=b"{}")
        if mode == "malformed":
            return Reply(body=b'{"data": [oops')
        return json_reply(wrong_shape if wrong_shape is not None else {"unexpected": True})

    return handler


class LocalServer:
    """A threaded HTTP server on 127.0.0.1:<ephemeral>; a context manager."""

    def __init__(self, routes: Mapping[str, Handler] | None = None) -> None:
        self._routes: dict[str, Handler] = dict(routes or {})
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.requests: list[Request] = []
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def route(self, path: str, handler: Handler) -> None:
        """Register or replace the handler for ``path`` (exact match, query string ignored)."""
        with self._lock:
            self._routes[path] = handler

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("server is not running; use it as a context manager")
        return self._httpd.server_address[1]

    def url(self, path: str = "") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def __enter__(self) -> LocalServer:
        server = self

        class _Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                path = self.path.split("?", 1)[0]
                req = Request(
                    self.command, path, dict(self.headers.items()), self.rfile.read(length)
                )
                with server._lock:
                    server.requests.append(req)
                    handler = server._routes.get(path)
                reply = handler(req) if handler else json_reply({"error": "no route"}, 404)
                if reply.delay_s and server._stop.wait(reply.delay_s):
                    return  # server stopping: drop the connection unanswered
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", reply.content_type)
                    self.send_header("Content-Length", str(len(reply.body)))
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(reply.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

            do_POST = _serve
            do_GET = _serve

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)


def fake_vector(text: str, dims: int) -> list[float]:
    """A deterministic, deliberately unnormalised vector for ``text``."""
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")
    return (np.random.default_rng(seed).normal(size=dims) * 3.0).round(6).tolist()


def embeddings_handler(mode: str = "ok", *, dims: int = 8, hang_s: float = 5.0) -> Handler:
    """OpenAI ``/v1/embeddings``: data items in REVERSED order, each with its index."""

    def ok(req: Request) -> Reply:
        payload = req.json()
        inputs = payload["input"]
        inputs = [inputs] if isinstance(inputs, str) else inputs
        data = [
            {"object": "embedding", "index": i, "embedding": fake_vector(t, dims)}
            for i, t in enumerate(inputs)
        ]
        return json_reply(
            {"object": "list", "model": payload.get("model"), "data": data[::-1], "usage": {}}
        )

    wrong = {"object": "list", "data": [{"index": 0, "embedding": "not a list"}]}
    return behave(mode, ok, wrong_shape=wrong, hang_s=hang_s)


def overlap_score(query: str, document: str) -> float:
    """Share of the query's words found in the document (the fake reranker's relevance)."""
    q = set(query.lower().split())
    return round(len(q & set(document.lower().split())) / max(len(q), 1), 6)


def rerank_handler(mode: str = "ok", *, hang_s: float = 5.0) -> Handler:
    """Jina/Cohere ``/v1/rerank``: results sorted best first, truncated to top_n."""

    def ok(req: Request) -> Reply:
        payload = req.json()
        docs = payload["documents"]
        scored = sorted(
            (
                {"index": i, "relevance_score": overlap_score(payload["query"], d)}
                for i, d in enumerate(docs)
            ),
            key=lambda r: -r["relevance_score"],
        )
        top_n = payload.get("top_n") or len(docs)
        return json_reply({"model": payload.get("model"), "results": scored[:top_n]})

    wrong = {"results": [{"index": "zero", "score": 1.0}]}
    return behave(mode, ok, wrong_shape=wrong, hang_s=hang_s)
