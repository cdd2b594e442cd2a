"""Property tests from the OpenAPI schema: whatever the body, the server never answers 5xx.

Schemathesis generates request bodies from the app's own /openapi.json (valid ones, and
invalid ones in negative mode); a plain Hypothesis test adds arbitrary JSON values.
"""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from starlette.testclient import TestClient

from tests.serve.conftest import TestKB
from workbench.serve.app import create_app

PROPS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,  # same examples every run: a failure here is reproducible
)


@pytest.fixture(scope="module")
def app(test_kb: TestKB) -> Any:
    # TestClient and schemathesis send `Host: testserver`.
    return create_app(test_kb.ws, test_kb.cfg, llm=None, admin_token="", allowed=["testserver"])


@pytest.fixture(scope="module")
def schema(app: Any) -> Any:
    return schemathesis.openapi.from_asgi("/openapi.json", app)


def _check(response: Any, config_hash: str) -> None:
    assert response.status_code < 500, response.text[:500]
    header = response.headers["x-config-hash"]
    # schemathesis responses hold a list per header name, Starlette's a string
    assert (header[0] if isinstance(header, list) else header) == config_hash
    body = response.json()
    assert body["config_hash"] == config_hash
    if response.status_code >= 400:
        assert body["error"] and body["detail"]


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_search_never_5xx_on_schema_generated_bodies(schema, test_kb, mode):
    operation = schema["/search"]["POST"]
    seen: set[int] = set()

    @PROPS
    @given(case=operation.as_strategy(generation_mode=mode))
    def run(case: Any) -> None:
        response = case.call()
        seen.add(response.status_code)
        _check(response, test_kb.cfg.hash)
        if mode is GenerationMode.POSITIVE and response.status_code == 200:
            case.validate_response(response)  # the body matches the documented model

    run()
    # Positive bodies are mostly served; negative ones are mostly rejected by validation.
    assert (200 if mode is GenerationMode.POSITIVE else 422) in seen, seen


def test_chapter_routes_never_5xx_on_generated_ids(schema, test_kb):
    for path in (
        "/chapter/{node_id}",
        "/chapter/{node_id}/children",
        "/chapter/{node_id}/siblings",
    ):
        operation = schema[path]["GET"]

        @PROPS
        @given(case=operation.as_strategy())
        def run(case: Any) -> None:
            response = case.call()
            _check(response, test_kb.cfg.hash)
            assert response.status_code in (200, 404), response.text[:300]

        run()


def test_ask_never_5xx_on_schema_generated_bodies(schema, test_kb):
    operation = schema["/ask"]["POST"]

    @settings(PROPS, max_examples=25)
    @given(case=operation.as_strategy(generation_mode=GenerationMode.POSITIVE))
    def run(case: Any) -> None:
        _check(case.call(), test_kb.cfg.hash)

    run()


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
search_like = st.fixed_dictionaries(
    {},
    optional={
        "query": st.text(max_size=60) | json_values,
        "top_k": st.integers(-5, 2000) | json_values,
        "search_mode": st.sampled_from(["hybrid", "vector", "keyword", "x"]) | json_values,
        "rerank": st.booleans() | st.none() | json_values,
        "expand": st.sampled_from(["none", "children", "siblings", "parent"]) | json_values,
        "filters": st.fixed_dictionaries(
            {},
            optional={
                k: st.text(max_size=10) | st.lists(st.text(max_size=10), max_size=3) | json_values
                for k in ("category", "priority", "doc_type", "keywords")
            },
        )
        | json_values,
    },
)


def test_search_never_5xx_on_arbitrary_json(app, test_kb):
    client = TestClient(app, raise_server_exceptions=False)

    @PROPS
    @given(body=search_like | json_values)
    def run(body: Any) -> None:
        _check(client.post("/search", json=body), test_kb.cfg.hash)

    run()
