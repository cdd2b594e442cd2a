"""A real OpenAI-compatible chat-completions server on 127.0.0.1 for the LLM tests.

Built on ``tests.engine.http_servers.LocalServer``. A test decides each reply with a
function of the request payload (or a list of replies used in order):

    def respond(payload):
        return Say("RAG splits by heading [1].")
    with ChatServer(respond) as srv:
        client = LLMClient(LLMSettings(base_url=srv.base_url, model="m", api_key="sk-test"))

Replies: ``Say`` (text; sent as SSE chunks when the request asks for ``stream``),
``CallTools`` (tool calls, raw argument text so it can be broken JSON), ``Fail`` (an HTTP
error status), ``Hang`` (answers only after the client has given up), ``Malformed``
(a body that is not JSON), ``WrongShape`` (valid JSON without ``choices``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.engine.http_servers import LocalServer, Reply, Request, json_reply

CHAT_PATH = "/v1/chat/completions"


@dataclass(frozen=True)
class Say:
    text: str


@dataclass(frozen=True)
class Call:
    name: str
    arguments: str  # raw text: may be broken JSON on purpose
    id: str = "call_1"


@dataclass(frozen=True)
class CallTools:
    calls: tuple[Call, ...]


@dataclass(frozen=True)
class Fail:
    status: int = 500


@dataclass(frozen=True)
class Hang:
    seconds: float = 5.0


@dataclass(frozen=True)
class Malformed:
    body: bytes = b'{"choices": [oops'


@dataclass(frozen=True)
class WrongShape:
    body: dict[str, Any] = field(default_factory=lambda: {"unexpected": True})


Step = Say | CallTools | Fail | Hang | Malformed | WrongShape
Respond = Callable[[dict[str, Any]], Step]


def call_tool(name: str, arguments: str | dict[str, Any], id: str = "call_1") -> CallTools:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return CallTools((Call(name, args, id),))


def task_of(payload: dict[str, Any]) -> str:
    """The ``Task: <name>`` line the workbench puts first in every system prompt."""
    for msg in payload.get("messages", []):
        if msg.get("role") == "system":
            first = str(msg.get("content") or "").splitlines()[0:1]
            if first and first[0].startswith("Task:"):
                return first[0].removeprefix("Task:").strip()
    return ""


def _completion(step: Say | CallTools, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": None}
    finish = "stop"
    if isinstance(step, Say):
        message["content"] = step.text
    else:
        finish = "tool_calls"
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in step.calls
        ]
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def _sse(step: Say | CallTools, model: str) -> bytes:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        body = {
            "id": "chatcmpl-test",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return "data: " + json.dumps(body, ensure_ascii=False) + "\n\n"

    parts = [chunk({"role": "assistant", "content": ""})]
    if isinstance(step, Say):
        # A few characters per chunk so clients really have to join deltas.
        text = step.text
        parts += [chunk({"content": text[i : i + 4]}) for i in range(0, len(text), 4)]
        parts.append(chunk({}, "stop"))
    else:
        for i, c in enumerate(step.calls):
            half = len(c.arguments) // 2
            head = {"index": i, "id": c.id, "type": "function"}
            parts.append(
                chunk({"tool_calls": [{**head, "function": {"name": c.name, "arguments": ""}}]})
            )
            for piece in (c.arguments[:half], c.arguments[half:]):
                parts.append(
                    chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
                )
        parts.append(chunk({}, "tool_calls"))
    parts.append("data: [DONE]\n\n")
    return "".join(parts).encode("utf-8")


class ChatServer(LocalServer):
    """LocalServer with one route, ``/v1/chat/completions``, answered by ``respond``."""

    def __init__(self, respond: Respond | Sequence[Step]) -> None:
        super().__init__()
        if callable(respond):
            self._respond: Respond = respond
        else:
            steps = list(respond)

            def scripted(payload: dict[str, Any]) -> Step:
                if not steps:
                    return Fail(599)
                return steps.pop(0)

            self._respond = scripted
        self.payloads: list[dict[str, Any]] = []
        self.route(CHAT_PATH, self._handle)

    @property
    def base_url(self) -> str:
        return self.url("/v1")

    def answer_for(self, host: str) -> None:
        """Answer as ``http://{host}/v1`` too: with ``HTTP_PROXY`` pointed at this server, a
        client calling that host reaches it here (absolute-form request target), so a test
        sees what would have been sent to a remote host without any network."""
        self.route(f"http://{host}{CHAT_PATH}", self._handle)

    def tasks(self) -> list[str]:
        """The task of every request so far, in order (judge, rewrite, answer, tools, ...)."""
        return [task_of(p) for p in self.payloads]

    def _handle(self, req: Request) -> Reply:
        payload = req.json()
        self.payloads.append(payload)
        step = self._respond(payload)
        model = str(payload.get("model") or "test-model")
        if isinstance(step, Fail):
            return json_reply({"error": {"message": "internal failure (test)"}}, step.status)
        if isinstance(step, Hang):
            return Reply(delay_s=step.seconds, body=b"{}")
        if isinstance(step, Malformed):
            return Reply(body=step.body)
        if isinstance(step, WrongShape):
            return json_reply(step.body)
        if payload.get("stream"):
            return Reply(body=_sse(step, model), content_type="text/event-stream")
        return json_reply(_completion(step, model))
