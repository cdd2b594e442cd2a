"""A small LLM client for any OpenAI-compatible chat-completions endpoint.

Settings come from the config's ``llm`` section, else from the environment or a ``.env``
file (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``, ``WIKIRAG_LLM_MODEL``). Without a base URL
and a model there is no LLM, and every feature that would use one falls back to a rule.

The API key is a secret: ``LLMSettings`` masks it in its repr, and ``redact`` removes every
key this process has loaded from any text before it reaches a log, a trace or the screen.
Every failure of a call (timeout, HTTP error, unreachable server, malformed reply) becomes
an ``LLMError`` (a ``ProviderError``) with one readable line that names the endpoint.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.config import LLMConfig
from engine.credentials import (
    DEFAULT_KEY_ENV,
    ENV_BASE_URL,
    check_key_destination,
    redact_url,
    redact_urls,
)
from engine.errors import ProviderError

ENV_MODEL = "WIKIRAG_LLM_MODEL"
NO_LLM_HINT = "set OPENAI_BASE_URL and WIKIRAG_LLM_MODEL"

# Keys seen by this process. ``redact`` needs them without being handed the settings, so a
# stray ``str(exc)`` anywhere can still be cleaned; it only ever grows.
_SECRETS: set[str] = set()
_SECRETS_LOCK = threading.Lock()
_MIN_SECRET_LEN = 4  # shorter "keys" (e.g. "x") would redact ordinary text


def _remember_secret(value: str) -> None:
    if len(value) >= _MIN_SECRET_LEN:
        with _SECRETS_LOCK:
            _SECRETS.add(value)


def redact(text: str, *secrets: str) -> str:
    """``text`` with every known API key (and any ``secrets`` given) replaced by ``***``, and
    the ``user:password@`` part of every URL in it cut (``engine.credentials.redact_urls``)."""
    with _SECRETS_LOCK:
        known = set(_SECRETS)
    known.update(s for s in secrets if s and len(s) >= _MIN_SECRET_LEN)
    for secret in sorted(known, key=len, reverse=True):
        text = text.replace(secret, "***")
    return redact_urls(text)


@dataclass(frozen=True)
class LLMSettings:
    """Where the LLM lives and how to call it. ``repr`` never shows the key."""

    base_url: str
    model: str
    api_key: str = field(default="", repr=False)
    timeout_s: float = 60.0
    temperature: float = 0.2
    max_tokens: int = 1024
    source: str = "config"  # where base URL/model came from: config | env | .env

    def __post_init__(self) -> None:
        _remember_secret(self.api_key)

    def __repr__(self) -> str:
        key = "***" if self.api_key else "(none)"
        return (
            f"LLMSettings(base_url={redact_url(self.base_url)!r}, model={self.model!r}, "
            f"api_key={key}, timeout_s={self.timeout_s!r}, source={self.source!r})"
        )

    __str__ = __repr__

    def to_dict(self) -> dict[str, Any]:
        """Safe to log or export: the key is reduced to whether it is set."""
        return {
            "base_url": redact_url(self.base_url),
            "model": self.model,
            "api_key": "***" if self.api_key else "",
            "timeout_s": self.timeout_s,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "source": self.source,
        }


def read_dotenv(path: str | Path) -> dict[str, str]:
    """Parse simple ``KEY=VALUE`` lines (``export``, quotes and ``#`` comments allowed)."""
    p = Path(path)
    if not p.is_file():
        return {}
    out: dict[str, str] = {}
    for raw in p.read_text(encoding="utf-8", errors="replace").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export ") :].lstrip()
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not key:
            continue
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        elif " #" in value:
            value = value.split(" #", 1)[0].rstrip()
        out[key] = value
    return out


def llm_settings(
    cfg: LLMConfig,
    env: Mapping[str, str] | None = None,
    dotenv_path: str | Path | None = ".env",
) -> LLMSettings | None:
    """Resolve the LLM settings: config first, then ``env``, then the ``.env`` file.

    Returns None when no base URL or no model is known (no LLM; callers fall back).
    Raises ConfigError, before the key is read, when ``llm.api_key_env`` is set but the user
    has not approved sending it to the base URL's host (``check_key_destination``).
    """
    environ = os.environ if env is None else env
    dotenv = read_dotenv(dotenv_path) if dotenv_path else {}

    def lookup(name: str) -> tuple[str, str]:
        if environ.get(name):
            return str(environ[name]).strip(), "env"
        if dotenv.get(name):
            return dotenv[name].strip(), ".env"
        return "", ""

    base_url, model = cfg.base_url.strip(), cfg.model.strip()
    sources = []
    if not base_url:
        base_url, src = lookup(ENV_BASE_URL)
        sources.append(src)
    if not model:
        model, src = lookup(ENV_MODEL)
        sources.append(src)
    source = next((s for s in sources if s), "config")
    if not base_url or not model:
        return None
    key_env = cfg.api_key_env
    if key_env and (environ.get(key_env) or dotenv.get(key_env)):
        check_key_destination(
            "llm",
            key_env,
            base_url,
            default_key_env=DEFAULT_KEY_ENV,
            user_base_url=lookup(ENV_BASE_URL)[0],
            env=environ,
        )
    key, _ = lookup(key_env) if key_env else ("", "")
    return LLMSettings(
        base_url=base_url,
        model=model,
        api_key=key,
        timeout_s=cfg.timeout_s,
        temperature=cfg.temperature,
        max_tokens=cfg.max_tokens,
        source=source,
    )


class LLMError(ProviderError):
    """An LLM call failed. ``reason`` is short enough for a notice ("HTTP 500", "timeout")."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(redact(message))
        self.reason = reason


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text as the model sent it; parsed by the caller, defensively


@dataclass(frozen=True)
class LLMReply:
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str = ""
    ms: float = 0.0

    def assistant_message(self) -> dict[str, Any]:
        """The reply as a message to append to the conversation (tool calls included)."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.content or None}
        if self.tool_calls:
            msg["tool_calls"] = [
                {
                    "id": tc.id,
                    "type": "function",
                    "function": {"name": tc.name, "arguments": tc.arguments},
                }
                for tc in self.tool_calls
            ]
        return msg


class LLMClient:
    """Chat completions against one OpenAI-compatible endpoint (built on the ``openai`` SDK)."""

    def __init__(self, settings: LLMSettings, *, max_retries: int = 0) -> None:
        if max_retries not in (0, 1):
            raise ValueError("max_retries must be 0 or 1; a chat turn should fail fast")
        import openai  # here, not at module level: the CLI should start fast without it

        self.settings = settings
        self._openai = openai
        # A placeholder key: local servers (vLLM, llama.cpp, Ollama) accept anything, and the
        # SDK refuses to start without one.
        self._client = openai.OpenAI(
            base_url=settings.base_url,
            api_key=settings.api_key or "no-key",
            timeout=settings.timeout_s,
            max_retries=max_retries,
        )

    @classmethod
    def from_config(
        cls,
        cfg: LLMConfig,
        env: Mapping[str, str] | None = None,
        dotenv_path: str | Path | None = ".env",
    ) -> LLMClient | None:
        """A client when an LLM is configured, else None (see ``llm_settings``)."""
        settings = llm_settings(cfg, env=env, dotenv_path=dotenv_path)
        return cls(settings) if settings else None

    def __repr__(self) -> str:
        return f"LLMClient({self.settings!r})"

    @property
    def model(self) -> str:
        return self.settings.model

    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        timeout: float | None = None,
        on_delta: Callable[[str], None] | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> LLMReply:
        """One chat completion. With ``on_delta`` the reply is streamed and every text delta
        is passed to it as it arrives; the full reply is returned either way.

        Raises LLMError (a ProviderError) on any failure.
        """
        started = time.perf_counter()
        kwargs: dict[str, Any] = {
            "model": self.settings.model,
            "messages": [dict(m) for m in messages],
            "temperature": self.settings.temperature if temperature is None else temperature,
            "max_tokens": self.settings.max_tokens if max_tokens is None else max_tokens,
            "timeout": self.settings.timeout_s if timeout is None else timeout,
        }
        if tools:
            kwargs["tools"] = [dict(t) for t in tools]
        try:
            if on_delta is None:
                reply = self._parse(self._client.chat.completions.create(**kwargs))
            else:
                stream = self._client.chat.completions.create(stream=True, **kwargs)
                reply = self._collect(stream, on_delta)
        except LLMError:
            raise
        except Exception as exc:  # the SDK, httpx and json raise many types; map them all
            raise self._error(exc, kwargs["timeout"]) from exc
        return LLMReply(reply.content, reply.tool_calls, reply.finish_reason, _ms_since(started))

    def stream_text(
        self, messages: Sequence[Mapping[str, Any]], *, timeout: float | None = None
    ) -> Iterator[str]:
        """Yield the text deltas of a streamed reply (no tools). Raises LLMError on failure."""
        kwargs: dict[str, Any] = {
            "model": self.settings.model,
            "messages": [dict(m) for m in messages],
            "temperature": self.settings.temperature,
            "max_tokens": self.settings.max_tokens,
            "timeout": self.settings.timeout_s if timeout is None else timeout,
            "stream": True,
        }
        try:
            for chunk in self._client.chat.completions.create(**kwargs):
                yield from _chunk_texts(chunk)
        except Exception as exc:
            raise self._error(exc, kwargs["timeout"]) from exc

    def _parse(self, completion: Any) -> LLMReply:
        choices = getattr(completion, "choices", None)
        if not isinstance(choices, list) or not choices:
            raise self._malformed("the reply has no choices")
        message = getattr(choices[0], "message", None)
        if message is None:
            raise self._malformed("the first choice has no message")
        content = getattr(message, "content", None)
        if content is not None and not isinstance(content, str):
            raise self._malformed("message content is not text")
        calls: list[ToolCall] = []
        for i, tc in enumerate(getattr(message, "tool_calls", None) or []):
            fn = getattr(tc, "function", None)
            name = getattr(fn, "name", None)
            if not isinstance(name, str) or not name:
                raise self._malformed("a tool call has no function name")
            args = getattr(fn, "arguments", None)
            calls.append(
                ToolCall(
                    id=str(getattr(tc, "id", None) or f"call_{i}"),
                    name=name,
                    arguments=args if isinstance(args, str) else json.dumps(args or {}),
                )
            )
        finish = getattr(choices[0], "finish_reason", None) or ""
        return LLMReply(content or "", tuple(calls), str(finish))

    def _collect(self, stream: Any, on_delta: Callable[[str], None]) -> LLMReply:
        text: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        finish = ""
        n_chunks = 0
        for chunk in stream:
            n_chunks += 1
            choices = getattr(chunk, "choices", None)
            if choices is None:
                raise self._malformed("a streamed chunk has no choices")
            for choice in choices:
                delta = getattr(choice, "delta", None)
                finish = getattr(choice, "finish_reason", None) or finish
                if delta is None:
                    continue
                piece = getattr(delta, "content", None)
                if isinstance(piece, str) and piece:
                    text.append(piece)
                    on_delta(piece)
                for tc in getattr(delta, "tool_calls", None) or []:
                    index = getattr(tc, "index", None)
                    slot = calls.setdefault(
                        index if isinstance(index, int) else len(calls),
                        {"id": "", "name": "", "arguments": ""},
                    )
                    slot["id"] = getattr(tc, "id", None) or slot["id"]
                    fn = getattr(tc, "function", None)
                    if fn is not None:
                        slot["name"] += getattr(fn, "name", None) or ""
                        slot["arguments"] += getattr(fn, "arguments", None) or ""
        if n_chunks == 0:
            raise self._malformed("the stream carried no events")
        tool_calls = []
        for i, (_, slot) in enumerate(sorted(calls.items())):
            if not slot["name"]:
                raise self._malformed("a streamed tool call has no function name")
            tool_calls.append(ToolCall(slot["id"] or f"call_{i}", slot["name"], slot["arguments"]))
        return LLMReply("".join(text), tuple(tool_calls), finish)

    def _malformed(self, what: str) -> LLMError:
        return LLMError(
            f"LLM endpoint at {redact_url(self.settings.base_url)} sent a malformed reply ({what}); "
            "check that it speaks the OpenAI chat-completions API",
            "malformed response",
        )

    def _error(self, exc: Exception, timeout_s: float) -> LLMError:
        o = self._openai
        url = redact_url(self.settings.base_url)
        if isinstance(exc, o.APITimeoutError):
            return LLMError(
                f"LLM endpoint at {url} did not answer within {timeout_s:g} s; "
                "check the server or raise llm.timeout_s",
                f"timeout after {timeout_s:g} s",
            )
        if isinstance(exc, o.APIConnectionError):
            return LLMError(
                f"LLM endpoint at {url} is unreachable ({exc}); "
                "check llm.base_url / OPENAI_BASE_URL and that the server is running",
                "unreachable",
            )
        if isinstance(exc, o.APIStatusError):
            detail = " ".join(str(exc).split())[:200]
            hint = (
                "check the API key (OPENAI_API_KEY)"
                if exc.status_code in (401, 403)
                else "check the model name (WIKIRAG_LLM_MODEL) and the server"
            )
            return LLMError(
                f"LLM endpoint at {url} answered HTTP {exc.status_code}: {detail}; {hint}",
                f"HTTP {exc.status_code}",
            )
        return self._malformed(f"{type(exc).__name__}: {' '.join(str(exc).split())[:160]}")


def _chunk_texts(chunk: Any) -> Iterator[str]:
    for choice in getattr(chunk, "choices", None) or []:
        delta = getattr(choice, "delta", None)
        piece = getattr(delta, "content", None) if delta is not None else None
        if isinstance(piece, str) and piece:
            yield piece


def _ms_since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000.0, 2)
