"""Provider errors never show an API key, even when a server echoes it back."""

import httpx
import pytest

from engine.errors import ProviderError
from engine.http_json import post_json
from tests.engine.http_servers import LocalServer, Reply, Request

KEY = "sk-test-very-secret-123"


def _echo_auth(req: Request) -> Reply:
    return Reply(status=500, body=f"bad key {req.headers.get('Authorization')}".encode())


def test_key_echoed_in_error_body_is_scrubbed():
    with (
        LocalServer({"/v1/x": _echo_auth}) as srv,
        httpx.Client() as client,
        pytest.raises(ProviderError) as err,
    ):
        post_json(
            client,
            srv.url("/v1/x"),
            {},
            what="reranker",
            timeout_s=5,
            headers={"Authorization": f"Bearer {KEY}"},
        )
    msg = str(err.value)
    assert "HTTP 500" in msg and "***" in msg
    assert KEY not in msg


def test_password_in_url_is_never_shown():
    with httpx.Client() as client, pytest.raises(ProviderError) as err:
        post_json(client, f"http://user:{KEY}@127.0.0.1:9/v1/x", {}, what="embedder", timeout_s=2)
    assert KEY not in str(err.value)
    assert "127.0.0.1:9" in str(err.value)
