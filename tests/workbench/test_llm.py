"""LLMClient against a real OpenAI-compatible server on 127.0.0.1 (no mocks of the SDK)."""

from __future__ import annotations

import json
import socket
import time

import pytest

from engine.config import LLMConfig
from engine.errors import ProviderError
from tests.workbench.openai_server import (
    Call,
    CallTools,
    ChatServer,
    Fail,
    Hang,
    Malformed,
    Say,
    WrongShape,
    call_tool,
)
from workbench.answer.llm import LLMClient, LLMError, LLMSettings, llm_settings, read_dotenv, redact

KEY = "sk-test-SECRET-0123456789"
MSGS = [{"role": "user", "content": "hello"}]


def client_for(srv: ChatServer, timeout_s: float = 5.0, **kw: object) -> LLMClient:
    return LLMClient(
        LLMSettings(base_url=srv.base_url, model="test-model", api_key=KEY, timeout_s=timeout_s),
        **kw,  # type: ignore[arg-type]
    )


def header(srv: ChatServer, name: str) -> str | None:
    headers = {k.lower(): v for k, v in srv.requests[-1].headers.items()}
    return headers.get(name.lower())


def test_settings_from_config_win_over_env(tmp_path):
    cfg = LLMConfig(base_url="http://cfg/v1", model="cfg-model", timeout_s=7.0)
    env = {"OPENAI_BASE_URL": "http://env/v1", "WIKIRAG_LLM_MODEL": "env", "OPENAI_API_KEY": KEY}
    env["WIKIRAG_APPROVED_KEYS"] = "cfg"  # the user lets the key go to the config's host
    s = llm_settings(cfg, env=env, dotenv_path=tmp_path / "none.env")
    assert s is not None
    assert (s.base_url, s.model, s.api_key, s.timeout_s, s.source) == (
        "http://cfg/v1",
        "cfg-model",
        KEY,
        7.0,
        "config",
    )


def test_settings_from_env_then_dotenv(tmp_path):
    dotenv = tmp_path / ".env"
    dotenv.write_text(
        "# comment\nexport OPENAI_BASE_URL='http://dot/v1'\n"
        'WIKIRAG_LLM_MODEL="dot-model"  \nOPENAI_API_KEY=sk-dot # trailing\nnot a pair\n',
        encoding="utf-8",
    )
    s = llm_settings(LLMConfig(), env={}, dotenv_path=dotenv)
    assert s is not None
    assert (s.base_url, s.model, s.api_key, s.source) == (
        "http://dot/v1",
        "dot-model",
        "sk-dot",
        ".env",
    )
    s2 = llm_settings(LLMConfig(), env={"WIKIRAG_LLM_MODEL": "env-model"}, dotenv_path=dotenv)
    assert s2 is not None and s2.model == "env-model" and s2.base_url == "http://dot/v1"


def test_settings_none_without_base_url_or_model(tmp_path):
    missing = tmp_path / "absent.env"
    assert llm_settings(LLMConfig(), env={}, dotenv_path=missing) is None
    assert llm_settings(LLMConfig(base_url="http://x/v1"), env={}, dotenv_path=missing) is None
    assert llm_settings(LLMConfig(model="m"), env={}, dotenv_path=missing) is None
    assert LLMClient.from_config(LLMConfig(), env={}, dotenv_path=missing) is None


def test_settings_custom_key_env(tmp_path):
    cfg = LLMConfig(base_url="http://x/v1", model="m", api_key_env="MY_LLM_KEY")
    s = llm_settings(
        cfg,
        env={
            "MY_LLM_KEY": "sk-custom-1",
            "OPENAI_API_KEY": "other",
            "WIKIRAG_APPROVED_KEYS": "MY_LLM_KEY@x",
        },
        dotenv_path=None,
    )
    assert s is not None and s.api_key == "sk-custom-1"


def test_read_dotenv_absent_file(tmp_path):
    assert read_dotenv(tmp_path / "nope") == {}


def test_key_is_masked_everywhere():
    s = LLMSettings(base_url="http://x/v1", model="m", api_key=KEY)
    assert KEY not in repr(s) and KEY not in str(s) and "***" in repr(s)
    assert KEY not in json.dumps(s.to_dict())
    assert KEY not in repr(LLMClient(s))
    assert redact(f"Bearer {KEY} failed") == "Bearer *** failed"
    assert redact("token abcdef here", "abcdef") == "token *** here"
    assert redact("a b c", "b") == "a b c"  # too short to be a key: left alone


def test_plain_reply_and_auth_header():
    with ChatServer([Say("Hi there")]) as srv:
        reply = client_for(srv).chat(MSGS)
        assert reply.content == "Hi there" and reply.tool_calls == ()
        assert reply.finish_reason == "stop" and reply.ms > 0
        assert header(srv, "Authorization") == f"Bearer {KEY}"
        assert srv.payloads[0]["model"] == "test-model"
        assert "stream" not in srv.payloads[0]


def test_streaming_yields_deltas():
    text = "Chunked reply that spans several SSE events."
    with ChatServer([Say(text), Say(text)]) as srv:
        client = client_for(srv)
        deltas: list[str] = []
        reply = client.chat(MSGS, on_delta=deltas.append)
        assert reply.content == text
        assert len(deltas) > 3 and "".join(deltas) == text
        assert srv.payloads[0]["stream"] is True
        assert "".join(client.stream_text(MSGS)) == text


def test_tool_calls_plain_and_streamed():
    tools = [{"type": "function", "function": {"name": "knowledge_search", "parameters": {}}}]
    step = CallTools((Call("knowledge_search", '{"query": "切块"}', "c1"), Call("x", "{}", "c2")))
    with ChatServer([step, step]) as srv:
        client = client_for(srv)
        plain = client.chat(MSGS, tools=tools)
        streamed = client.chat(MSGS, tools=tools, on_delta=lambda _: None)
    for reply in (plain, streamed):
        assert [(t.id, t.name, t.arguments) for t in reply.tool_calls] == [
            ("c1", "knowledge_search", '{"query": "切块"}'),
            ("c2", "x", "{}"),
        ]
        assert reply.finish_reason == "tool_calls"
    msg = plain.assistant_message()
    assert msg["tool_calls"][0]["function"] == {
        "name": "knowledge_search",
        "arguments": '{"query": "切块"}',
    }
    assert srv.payloads[0]["tools"] == tools


@pytest.mark.parametrize(
    ("step", "reason", "words"),
    [
        (Fail(500), "HTTP 500", "answered HTTP 500"),
        (Fail(401), "HTTP 401", "check the API key"),
        (Malformed(), "malformed response", "malformed reply"),
        (WrongShape(), "malformed response", "has no choices"),
    ],
)
def test_failures_become_provider_errors(step, reason, words):
    for stream in (False, True):
        with ChatServer([step]) as srv, pytest.raises(LLMError) as info:
            client_for(srv).chat(MSGS, on_delta=(lambda _: None) if stream else None)
        assert isinstance(info.value, ProviderError)
        assert info.value.reason == reason
        assert srv.base_url in str(info.value)
        if not stream:  # a streamed wrong body reads as "no events" instead
            assert words in str(info.value)
        assert KEY not in str(info.value)


def test_timeout_is_a_provider_error_and_fast():
    with ChatServer([Hang(5.0)]) as srv:
        started = time.perf_counter()
        with pytest.raises(LLMError) as info:
            client_for(srv, timeout_s=0.3).chat(MSGS)
        assert time.perf_counter() - started < 2.0
    assert info.value.reason == "timeout after 0.3 s"
    assert "did not answer within 0.3 s" in str(info.value)


def test_connection_refused():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again before the call: nothing listens there
    client = LLMClient(LLMSettings(base_url=f"http://127.0.0.1:{port}/v1", model="m", api_key=KEY))
    with pytest.raises(LLMError) as info:
        client.chat(MSGS)
    assert info.value.reason == "unreachable" and "unreachable" in str(info.value)


def test_stream_text_maps_errors():
    with ChatServer([Fail(503)]) as srv, pytest.raises(LLMError) as info:
        list(client_for(srv).stream_text(MSGS))
    assert info.value.reason == "HTTP 503"


def test_one_retry_when_asked():
    with ChatServer([Fail(500), Say("second time lucky")]) as srv:
        assert client_for(srv, max_retries=1).chat(MSGS).content == "second time lucky"
        assert len(srv.payloads) == 2
    with ChatServer([Fail(500), Say("never reached")]) as srv:
        with pytest.raises(LLMError):
            client_for(srv).chat(MSGS)
        assert len(srv.payloads) == 1


def test_max_retries_is_bounded():
    with pytest.raises(ValueError, match="max_retries"):
        LLMClient(LLMSettings(base_url="http://x/v1", model="m"), max_retries=3)


def test_call_tool_helper_serialises_dicts():
    step = call_tool("knowledge_search", {"query": "q"})
    assert step.calls[0].arguments == '{"query": "q"}'
