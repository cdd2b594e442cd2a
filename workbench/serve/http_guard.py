"""Who may call the local HTTP servers: one check for ``wikirag serve`` and ``wikirag mcp --http``.

A server on 127.0.0.1 is still reachable from any web page the user opens: through DNS
rebinding (a foreign name resolving to 127.0.0.1, so the ``Host`` header is foreign) and
through cross-site form posts (the ``Origin`` header is foreign). So every request must name
an allowed host (421 otherwise), every state-changing request from a browser must come from
an allowed origin (403), and every body is capped (413). The defaults allow the loopback
names only; ``--allow-host`` adds names (``*`` allows any, for a trusted reverse proxy).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from workbench.serve.limits import MAX_BODY_BYTES

LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")
SAFE_METHODS = frozenset(("GET", "HEAD", "OPTIONS"))
_ANY_BIND = ("", "0.0.0.0", "::")


def _host_name(value: str) -> str:
    """``Host`` header or origin authority -> bare lower-case name (no port, no brackets)."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value[1:]
    if value.count(":") == 1:
        value = value.split(":", 1)[0]
    return value.rstrip(".")


def allowed_hosts(extra: Iterable[str] = (), *, bind: str = "") -> tuple[str, ...]:
    """The loopback names, ``extra`` names and a specific bind address, normalised."""
    names = [*LOCAL_HOSTS, *extra]
    if bind not in _ANY_BIND:
        names.append(bind)
    out: list[str] = []
    for n in names:
        name = "*" if n.strip() == "*" else _host_name(n)
        if name and name not in out:
            out.append(name)
    return tuple(out)


@dataclass(frozen=True)
class Rejection:
    status: int
    error: str
    detail: str


def check_request(
    method: str, headers: Mapping[str, str], allowed: Iterable[str]
) -> Rejection | None:
    """Why this request must be refused (Host, Origin), or None. ``headers`` lower-case keys."""
    names = set(allowed)
    if "*" in names:
        return None
    host = headers.get("host", "")
    if _host_name(host) not in names:
        return Rejection(
            421,
            "host not allowed",
            f"Host {host[:100]!r} is not served here (allowed: {', '.join(sorted(names))}); "
            "start the server with --allow-host NAME to serve another name",
        )
    origin = headers.get("origin")
    if method.upper() not in SAFE_METHODS and origin is not None:
        # "null" (sandboxed frames, file://) has no host and is refused with the rest.
        origin_host = _host_name(urlsplit(origin).netloc) if "://" in origin else ""
        if origin_host not in names:
            return Rejection(
                403,
                "origin not allowed",
                f"cross-site request from Origin {origin[:100]!r} refused; "
                "add its host with --allow-host if this page is yours",
            )
    return None


def _too_large(limit: int) -> Rejection:
    return Rejection(
        413, "request body too large", f"request bodies are limited to {limit:,} bytes"
    )


class RequestGuard:
    """Pure ASGI middleware: Host / Origin allow-list and a body cap, before the app runs.

    ``extra`` is merged into every error body (e.g. the config hash of ``wikirag serve``).
    """

    def __init__(
        self,
        app: Any,
        *,
        allowed: Iterable[str],
        max_body: int = MAX_BODY_BYTES,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        self.app = app
        self.allowed = tuple(allowed)
        self.max_body = max_body
        self.extra = dict(extra or {})

    async def _reject(self, send: Any, r: Rejection) -> None:
        body = json.dumps({"error": r.error, "detail": r.detail, **self.extra}).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ]
        await send({"type": "http.response.start", "status": r.status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        rejection = check_request(scope.get("method", "GET"), headers, self.allowed)
        if rejection is not None:
            await self._reject(send, rejection)
            return
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body:
            await self._reject(send, _too_large(self.max_body))
            return
        # Chunked bodies carry no length: read up to the cap, then replay to the app.
        chunks: list[Any] = []
        size = 0
        more = scope.get("method", "GET").upper() not in SAFE_METHODS
        while more:
            message = await receive()
            chunks.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if size > self.max_body:
                await self._reject(send, _too_large(self.max_body))
                return
            more = message.get("more_body", False)

        async def replay() -> Any:
            if chunks:
                return chunks.pop(0)
            return await receive()

        await self.app(scope, replay, send)
