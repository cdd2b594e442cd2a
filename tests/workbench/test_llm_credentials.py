"""A config from the repository cannot read any environment variable as the LLM key, a key
sent to an unfamiliar host is warned about, and URL credentials never reach a message.
Against the real local OpenAI-compatible server."""

from __future__ import annotations

import warnings

import pytest

from engine.config import LLMConfig
from engine.errors import ConfigError
from tests.workbench.openai_server import ChatServer, Say
from workbench.answer.llm import LLMClient, LLMError, LLMSettings, llm_settings, redact


def test_a_config_naming_a_non_key_variable_sends_nothing(monkeypatch):
    monkeypatch.setenv("SSH_PRIVATE", "-----BEGIN PRIVATE KEY-----abc")
    with ChatServer([Say("hi")]) as srv:
        cfg = LLMConfig(base_url=srv.base_url, model="m", api_key_env="SSH_PRIVATE")
        env = {"SSH_PRIVATE": "-----BEGIN PRIVATE KEY-----abc"}
        with pytest.raises(ConfigError, match=r"llm\.api_key_env = 'SSH_PRIVATE'"):
            LLMClient.from_config(cfg, env=env, dotenv_path=None)
        assert srv.payloads == []
        # The user's explicit confirmation lets it through, and the key is sent.
        env["WIKIRAG_ALLOW_KEY_ENV"] = "SSH_PRIVATE"
        client = LLMClient.from_config(cfg, env=env, dotenv_path=None)
        assert client is not None
        assert client.chat([{"role": "user", "content": "x"}]).content == "hi"
        sent = srv.requests[-1].headers
        auth = next(v for k, v in sent.items() if k.lower() == "authorization")
        assert auth == "Bearer -----BEGIN PRIVATE KEY-----abc"


def test_a_config_pointing_the_key_at_another_host_warns():
    with ChatServer([Say("hi")]) as srv:
        cfg = LLMConfig(base_url=srv.base_url, model="m")
        env = {"OPENAI_API_KEY": "sk-test-123456", "OPENAI_BASE_URL": "https://api.openai.com/v1"}
        with pytest.warns(UserWarning, match="sends the API key to 127.0.0.1, not to api.openai"):
            assert llm_settings(cfg, env=env, dotenv_path=None) is not None
        env["OPENAI_BASE_URL"] = srv.base_url  # the user's own endpoint: no warning
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert llm_settings(cfg, env=env, dotenv_path=None) is not None


def test_url_credentials_are_redacted_in_settings_errors_and_text():
    s = LLMSettings(base_url="http://bob:hunter2@127.0.0.1:9/v1", model="m", timeout_s=2)
    assert "hunter2" not in repr(s) and "hunter2" not in str(s.to_dict())
    with pytest.raises(LLMError) as exc:
        LLMClient(s).chat([{"role": "user", "content": "x"}])
    assert "hunter2" not in str(exc.value) and "http://***@127.0.0.1:9/v1" in str(exc.value)
    assert redact("see https://u:pw@x.example/v1") == "see https://***@x.example/v1"


def test_a_config_key_host_new_for_the_kb_warns_once(tmp_path):
    with ChatServer([Say("hi")]) as srv:
        cfg = LLMConfig(base_url=srv.base_url, model="m")
        env = {"OPENAI_API_KEY": "sk-test-123456", "WIKIRAG_CONFIG_DIR": str(tmp_path)}
        kb = tmp_path / "wiki"
        with pytest.warns(UserWarning, match="127.0.0.1, a host not used before"):
            assert llm_settings(cfg, env=env, dotenv_path=None, kb=kb) is not None
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # seen before: silent
            assert LLMClient.from_config(cfg, env=env, dotenv_path=None, kb=kb) is not None
            # no key, nothing sent: nothing to warn about nor to record
            assert llm_settings(
                cfg, env={"WIKIRAG_CONFIG_DIR": str(tmp_path)}, dotenv_path=None, kb=tmp_path
            )
