"""JSON-over-HTTP calls for the model providers (embeddings, rerank, later the LLM).

One place turns every way a remote call can go wrong (unreachable, timeout, HTTP error,
body that is not JSON) into a ``ProviderError`` whose message names the endpoint and
says what to check. API keys travel only in the ``Authorization`` header and never
appear in a message.
"""

from __future__ import annotations

import json
import os
from typing import Any, Protocol
from urllib.parse import urlsplit

import httpx

from engine.credentials import (
    DEFAULT_KEY_ENV,
    DEFAULT_RERANK_KEY_ENV,
    ENV_BASE_URL,
    check_key_destination,
    redact_url,
)
from engine.errors import ProviderError

_BODY_PREVIEW = 200


class EndpointConfig(Protocol):
    """The settings an HTTP provider section (embedding, rerank) shares."""

    @property
    def base_url(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def api_key_env(self) -> str: ...
    @property
    def timeout_s(self) -> float: ...


class JsonEndpoint:
    """One provider endpoint, ``POST {base_url}/{path}``, with its model and HTTP client.

    ``section`` is the config section ("embedding", "rerank") that errors name; ``what``
    names the provider in messages; ``example`` is a model name to suggest when none is set.
    """

    def __init__(
        self, cfg: EndpointConfig, *, section: str, path: str, what: str, example: str
    ) -> None:
        if not cfg.model:
            raise ProviderError(
                f"{section}.model is empty; name the model the endpoint serves (e.g. {example})"
            )
        self.url = join_url(cfg.base_url, path, setting=f"{section}.base_url")
        self.model = cfg.model
        self.where = f"{what} at {self.url}"
        self._what = what
        self._api_key_env = cfg.api_key_env
        self._base_url = cfg.base_url
        self._section = section
        self._timeout_s = cfg.timeout_s
        self._client = httpx.Client()

    def post(self, payload: dict[str, Any]) -> Any:
        """The decoded reply to ``payload`` (the key is read from its env var now)."""
        return post_json(
            self._client,
            self.url,
            payload,
            what=self._what,
            timeout_s=self._timeout_s,
            headers=auth_headers(self._api_key_env, self._base_url, self._section),
        )

    def close(self) -> None:
        self._client.close()


def join_url(base_url: str, path: str, *, setting: str) -> str:
    """``{base_url}/{path}`` with exactly one slash; ``setting`` names the config key in errors."""
    base = base_url.strip()
    if not base:
        raise ProviderError(
            f"{setting} is empty; set it to the API root, e.g. http://127.0.0.1:8000/v1"
        )
    if not base.startswith(("http://", "https://")):
        raise ProviderError(f"{setting} must start with http:// or https://, got {base!r}")
    return base.rstrip("/") + "/" + path.lstrip("/")


# Each section's own key variable: the one it may send to loopback and the user's host
# without an approval (engine/credentials.py).
_DEFAULT_KEY_ENV = {"embedding": DEFAULT_KEY_ENV, "rerank": DEFAULT_RERANK_KEY_ENV}


def auth_headers(api_key_env: str, url: str, section: str) -> dict[str, str]:
    """Bearer header from the env var named ``api_key_env``; none if it is unset (local servers).

    Raises ConfigError, before the key is read, when the user has not approved sending that
    variable to the host of ``url`` (the section's base URL; ``check_key_destination``).
    """
    if not api_key_env or not os.environ.get(api_key_env):
        return {}
    check_key_destination(
        section,
        api_key_env,
        url,
        default_key_env=_DEFAULT_KEY_ENV.get(section, DEFAULT_KEY_ENV),
        user_base_url=os.environ.get(ENV_BASE_URL, ""),
    )
    return {"Authorization": f"Bearer {os.environ[api_key_env]}"}


def post_json(
    client: httpx.Client,
    url: str,
    payload: dict[str, Any],
    *,
    what: str,
    timeout_s: float,
    headers: dict[str, str] | None = None,
) -> Any:
    """POST ``payload`` as JSON and return the decoded reply, or raise ProviderError.

    ``what`` names the provider in messages ("embedding provider", "reranker").
    """
    secrets = [v.split(" ", 1)[-1] for v in (headers or {}).values() if v]
    if urlsplit(url).password:
        secrets.append(str(urlsplit(url).password))
    try:
        return _post_json(client, url, payload, what=what, timeout_s=timeout_s, headers=headers)
    except ProviderError as exc:
        # A server may echo the key back in its error body; a key may sit in the URL.
        raise ProviderError(_scrub(str(exc), secrets)) from exc.__cause__


def _post_json(
    client: httpx.Client,
    url: str,
    payload: dict[str, Any],
    *,
    what: str,
    timeout_s: float,
    headers: dict[str, str] | None,
) -> Any:
    shown = _safe_url(url)
    try:
        resp = client.post(url, json=payload, headers=headers, timeout=timeout_s)
    except httpx.TimeoutException as exc:
        raise ProviderError(
            f"{what} at {shown} did not answer within {timeout_s:g} s "
            f"({type(exc).__name__}); check the server or raise the timeout_s setting"
        ) from exc
    except httpx.HTTPError as exc:
        raise ProviderError(
            f"{what} at {shown} is unreachable ({type(exc).__name__}: {exc}); "
            "check base_url and that the server is running"
        ) from exc
    if not resp.is_success:
        raise ProviderError(
            f"{what} at {shown} answered HTTP {resp.status_code}: {_preview(resp.text)}"
        )
    try:
        return resp.json()
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ProviderError(
            f"{what} at {shown} returned a body that is not JSON: {_preview(resp.text)}"
        ) from exc


def _safe_url(url: str) -> str:
    return redact_url(url)


def _scrub(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        if len(secret) >= 4:
            text = text.replace(secret, "***")
    return text


def _preview(text: str) -> str:
    text = " ".join(text.split())
    if not text:
        return "(empty body)"
    return text if len(text) <= _BODY_PREVIEW else text[:_BODY_PREVIEW] + "…"
