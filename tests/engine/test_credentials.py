"""Which environment variables a config may send as an API key, and URLs printed without
their user:password part."""

from __future__ import annotations

import json

import httpx
import pytest

from engine.credentials import (
    check_key_env,
    is_key_like,
    key_destination_warning,
    redact_url,
    redact_urls,
)
from engine.errors import ConfigError, ProviderError
from engine.http_json import auth_headers, post_json


@pytest.mark.parametrize(
    "name", ["OPENAI_API_KEY", "RERANK_API_KEY", "HF_TOKEN", "DEEPSEEK_KEY", "my_api_key", ""]
)
def test_key_like_names_are_accepted(name):
    check_key_env(name, "llm.api_key_env", env={})


@pytest.mark.parametrize(
    "name", ["HOME", "PATH", "AWS_SECRET_ACCESS_KEY_ID", "DATABASE_URL", "KEY", "_TOKEN"]
)
def test_other_names_need_the_users_confirmation(name):
    assert not is_key_like(name)
    env = {name: "value"}
    with pytest.raises(ConfigError) as exc:
        check_key_env(name, "embedding.api_key_env", env=env)
    msg = str(exc.value)
    assert f"embedding.api_key_env = {name!r}" in msg and f"WIKIRAG_ALLOW_KEY_ENV={name}" in msg
    check_key_env(name, "embedding.api_key_env", env={**env, "WIKIRAG_ALLOW_KEY_ENV": f"X, {name}"})
    check_key_env(name, "embedding.api_key_env", env={})  # unset: nothing would be sent


def test_providers_refuse_to_read_a_non_key_variable(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgres://u:p@db/x")
    monkeypatch.delenv("WIKIRAG_ALLOW_KEY_ENV", raising=False)
    with pytest.raises(ConfigError, match=r"rerank\.api_key_env = 'DATABASE_URL'"):
        auth_headers("DATABASE_URL", "rerank.api_key_env")
    monkeypatch.setenv("WIKIRAG_ALLOW_KEY_ENV", "DATABASE_URL")
    assert auth_headers("DATABASE_URL") == {"Authorization": "Bearer postgres://u:p@db/x"}


def test_a_key_sent_to_another_host_than_the_users_is_warned_about():
    env = {"OPENAI_BASE_URL": "https://api.openai.com/v1"}
    msg = key_destination_warning("llm.base_url", "https://collector.example/v1", env)
    assert msg is not None and "collector.example, not to api.openai.com" in msg
    assert key_destination_warning("llm.base_url", "https://API.openai.com:443/x", env) is None
    assert key_destination_warning("llm.base_url", "https://collector.example/v1", {}) is None


def test_urls_are_printed_without_credentials():
    assert (
        redact_url("https://bob:hunter2@llm.example:8443/v1") == "https://***@llm.example:8443/v1"
    )
    assert redact_url("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1"
    text = "failed: http://bob:hunter2@a.example/v1 and https://tok@b.example/x; ok http://c/"
    assert redact_urls(text) == (
        "failed: http://***@a.example/v1 and https://***@b.example/x; ok http://c/"
    )


def test_provider_errors_never_show_url_credentials():
    with httpx.Client() as client, pytest.raises(ProviderError) as exc:
        post_json(
            client,
            "http://bob:hunter2@127.0.0.1:9/v1/embeddings",
            {},
            what="embedding provider",
            timeout_s=2,
        )
    assert "hunter2" not in str(exc.value) and "bob" not in str(exc.value)


def test_a_new_key_host_is_warned_about_once_per_knowledge_base(tmp_path):
    from engine.credentials import KEY_HOSTS_FILE, new_host_warning

    env = {"WIKIRAG_CONFIG_DIR": str(tmp_path / "cfg")}
    wiki, other = tmp_path / "wiki", tmp_path / "other"
    msg = new_host_warning("llm.base_url", "https://llm.corp.example/v1", wiki, env)
    assert msg is not None and "llm.corp.example, a host not used before" in msg
    assert "knowledge base wiki" in msg
    assert new_host_warning("llm.base_url", "https://LLM.corp.example:443/x", wiki, env) is None
    # a pulled commit repoints the key: warned, once
    msg = new_host_warning("llm.base_url", "https://collector.example/v1", wiki, env)
    assert msg is not None and "collector.example" in msg
    assert new_host_warning("llm.base_url", "https://collector.example/v2", wiki, env) is None
    # hosts are remembered per knowledge base
    assert new_host_warning("llm.base_url", "https://collector.example/v1", other, env)
    seen = json.loads((tmp_path / "cfg" / KEY_HOSTS_FILE).read_text(encoding="utf-8"))
    assert seen == {
        str(wiki.resolve()): ["collector.example", "llm.corp.example"],
        str(other.resolve()): ["collector.example"],
    }


def test_the_users_own_host_is_recorded_without_a_warning(tmp_path):
    from engine.credentials import new_host_warning

    env = {"WIKIRAG_CONFIG_DIR": str(tmp_path), "OPENAI_BASE_URL": "https://api.openai.com/v1"}
    assert new_host_warning("llm.base_url", "https://api.openai.com/v1", tmp_path, env) is None
    assert new_host_warning("llm.base_url", "http://127.0.0.1:9/v1", tmp_path, env) is not None


def test_a_damaged_hosts_file_is_started_again(tmp_path):
    from engine.credentials import KEY_HOSTS_FILE, new_host_warning

    (tmp_path / KEY_HOSTS_FILE).write_text("[not, a, mapping]", encoding="utf-8")
    env = {"WIKIRAG_CONFIG_DIR": str(tmp_path)}
    assert new_host_warning("llm.base_url", "https://h.example", tmp_path / "kb", env)
    assert new_host_warning("llm.base_url", "https://h.example", tmp_path / "kb", env) is None
