"""Which API key may go to which host (the user's approvals, never a config's), and URLs
printed without their user:password part."""

from __future__ import annotations

import httpx
import pytest

from engine.credentials import (
    allow,
    approvals_path,
    check_key_destination,
    key_approved,
    read_approvals,
    redact_url,
    redact_urls,
    revoke,
)
from engine.errors import ConfigError, ProviderError
from engine.http_json import auth_headers, post_json


def _ok(key_env: str, url: str, env: dict[str, str], user_url: str = "") -> bool:
    return key_approved(
        key_env, url, default_key_env="OPENAI_API_KEY", user_base_url=user_url, env=env
    )


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:8000/v1", "http://localhost/v1", "http://[::1]:9/v1", "http://127.3.4.5/"],
)
def test_the_default_variable_may_go_to_loopback(url, tmp_path):
    env = {"WIKIRAG_CONFIG_DIR": str(tmp_path)}
    assert _ok("OPENAI_API_KEY", url, env)
    assert not _ok("AWS_SECRET_ACCESS_KEY", url, env)  # loopback is not enough for another one


def test_remote_hosts_need_the_users_base_url_or_an_approval(tmp_path):
    env = {"WIKIRAG_CONFIG_DIR": str(tmp_path)}
    assert not _ok("OPENAI_API_KEY", "https://api.openai.com/v1", env)
    assert _ok("OPENAI_API_KEY", "https://API.openai.com:443/x", env, "https://api.openai.com/v1")
    assert not _ok(
        "OPENAI_API_KEY", "https://api.openai.com.evil.example/v1", env, "https://api.openai.com"
    )
    env["WIKIRAG_APPROVED_KEYS"] = "api.openai.com, MY_KEY@llm.corp.example"
    assert _ok("OPENAI_API_KEY", "https://api.openai.com/v1", env)  # bare host: default var
    assert _ok("MY_KEY", "https://llm.corp.example/v1", env)
    assert not _ok("MY_KEY", "https://api.openai.com/v1", env)  # pairs, not a cross product
    assert not _ok("OPENAI_API_KEY", "not a url", env)


def test_approvals_are_written_by_allow_and_removed_by_revoke(tmp_path):
    env = {"WIKIRAG_CONFIG_DIR": str(tmp_path / "cfg")}
    assert read_approvals(env) == []
    path = allow("MY_KEY", "LLM.corp.example", env)
    assert path == approvals_path(env) == tmp_path / "cfg" / "keys.yaml"
    allow("MY_KEY", "llm.corp.example", env)  # twice: one entry
    allow("OPENAI_API_KEY", "api.openai.com", env)
    assert read_approvals(env) == [
        ("MY_KEY", "llm.corp.example"),
        ("OPENAI_API_KEY", "api.openai.com"),
    ]
    assert _ok("MY_KEY", "https://llm.corp.example/v1", env)
    revoke("MY_KEY", "llm.corp.example", env)
    assert read_approvals(env) == [("OPENAI_API_KEY", "api.openai.com")]
    assert not _ok("MY_KEY", "https://llm.corp.example/v1", env)
    assert list((tmp_path / "cfg").iterdir()) == [path]  # no temp file left beside it


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("approved: [oops", "keys.yaml is not valid YAML"),
        ("approved: {key_env: A}", "'approved' must be a list"),
        ("approved:\n- {key_env: A}", r"approved\[0\] must have string key_env and host"),
        ("approved:\n- {key_env: 'A B', host: h}", "is not an environment variable name"),
        ("approved:\n- &a {key_env: A, host: h}\n- *a", "aliases"),
    ],
)
def test_a_damaged_approvals_file_is_a_one_line_error_naming_it(tmp_path, text, message):
    (tmp_path / "keys.yaml").write_text(text, encoding="utf-8")
    env = {"WIKIRAG_CONFIG_DIR": str(tmp_path)}
    with pytest.raises(ConfigError, match=message) as exc:
        read_approvals(env)
    assert str(tmp_path / "keys.yaml") in str(exc.value) and "\n" not in str(exc.value)


def test_the_refusal_says_how_to_approve_and_shows_no_url_credentials(tmp_path):
    with pytest.raises(ConfigError) as exc:
        check_key_destination(
            "embedding",
            "GITHUB_TOKEN",
            "https://bob:hunter2@collector.example/v1",
            default_key_env="OPENAI_API_KEY",
            env={"WIKIRAG_CONFIG_DIR": str(tmp_path)},
        )
    msg = str(exc.value)
    assert msg.startswith("embedding.api_key_env = 'GITHUB_TOKEN' would send that variable to ")
    assert "`wikirag keys allow --key-env GITHUB_TOKEN --host collector.example`" in msg
    assert "hunter2" not in msg and "\n" not in msg


def test_providers_refuse_before_reading_an_unapproved_key(monkeypatch, tmp_path):
    monkeypatch.setenv("WIKIRAG_CONFIG_DIR", str(tmp_path))
    monkeypatch.delenv("WIKIRAG_APPROVED_KEYS", raising=False)
    monkeypatch.setenv("DATABASE_URL", "postgres://u:p@db/x")
    with pytest.raises(ConfigError, match=r"rerank\.api_key_env = 'DATABASE_URL'"):
        auth_headers("DATABASE_URL", "http://127.0.0.1:9/v1", "rerank")
    monkeypatch.setenv("RERANK_API_KEY", "rk-1")
    assert auth_headers("RERANK_API_KEY", "http://127.0.0.1:9/v1", "rerank") == {
        "Authorization": "Bearer rk-1"
    }
    monkeypatch.setenv("WIKIRAG_APPROVED_KEYS", "DATABASE_URL@127.0.0.1")
    assert auth_headers("DATABASE_URL", "http://127.0.0.1:9/v1", "rerank") == {
        "Authorization": "Bearer postgres://u:p@db/x"
    }
    monkeypatch.delenv("DATABASE_URL")
    assert auth_headers("DATABASE_URL", "http://collector.example/v1", "rerank") == {}


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


def test_keys_command_allows_lists_and_revokes(tmp_path, monkeypatch, capsys):
    from workbench.cli import main

    monkeypatch.setenv("WIKIRAG_CONFIG_DIR", str(tmp_path))
    assert main(["keys", "allow", "--key-env", "MY_KEY", "--host", "https://LLM.example/v1"]) == 0
    assert "MY_KEY may be sent to llm.example" in capsys.readouterr().out
    assert main(["keys", "list"]) == 0
    assert "MY_KEY -> llm.example" in capsys.readouterr().out
    assert main(["keys", "revoke", "--key-env", "MY_KEY", "--host", "llm.example"]) == 0
    assert read_approvals({"WIKIRAG_CONFIG_DIR": str(tmp_path)}) == []
    assert main(["keys", "allow", "--key-env", "NOT A NAME", "--host", "h"]) == 2
    assert "is not an environment variable name" in capsys.readouterr().err
