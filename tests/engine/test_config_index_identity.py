"""EngineConfig decides once what a config change does to the index and the candidates."""

from __future__ import annotations

from typing import Any

import pytest

from engine.config import EngineConfig, affects_index, all_keys, field_spec

BASE = EngineConfig()


def _other_value(key: str) -> Any:
    """A valid value for ``key`` that differs from the default."""
    spec = field_spec(key)
    default, choices = spec["default"], spec["choices"]
    if choices:
        return next(c for c in choices if c != default)
    if spec["type"] is bool:
        return not default
    if spec["type"] is str:
        return default + "x" if key != "embedding.api_key_env" else "OTHER_API_KEY"
    _lo, hi = spec["range"]
    step = 1 if spec["type"] is int else 0.25
    value = default + step
    return value if hi is None or value <= hi else default - step


@pytest.mark.parametrize("key", all_keys())
def test_the_index_key_changes_exactly_for_keys_that_affect_the_index(key: str) -> None:
    changed = BASE.with_overrides({key: _other_value(key)})
    assert (changed.index_key != BASE.index_key) == affects_index(key)


def test_what_affects_the_index() -> None:
    affected = {k for k in all_keys() if affects_index(k)}
    assert affected == {
        "embedding.provider",
        "embedding.model",
        "embedding.dims",
        "embedding.base_url",
        "index.use_summaries",
        "index.content_chars",
        "index.passage_chars",
        "index.passage_overlap",
        "lexical.stem",
    }
    # How vectors are fetched is not what they are: no re-index for a batch size.
    assert not affects_index("embedding.batch_size")


def test_candidates_depend_on_the_index_and_query_time_retrieval_not_on_fusion() -> None:
    def ident(overrides: dict[str, Any]) -> dict[str, Any]:
        return BASE.with_overrides(overrides).retrieval_identity()

    assert ident({"fusion.k": 30.0}) == BASE.retrieval_identity()
    assert ident({"rerank.max_candidates": 10}) == BASE.retrieval_identity()
    assert ident({"lexical.k1": 1.7}) != BASE.retrieval_identity()
    assert ident({"expansion.enabled": True}) != BASE.retrieval_identity()
    assert ident({"embedding.model": "other"}) != BASE.retrieval_identity()
    # Which vectors are scored exactly changes the vector channel's candidates.
    assert ident({"search.exact_vector_rows": 0}) != BASE.retrieval_identity()
    assert ident({"search.top_k": 5}) == BASE.retrieval_identity()


def test_unstemmed_index_key_is_the_one_side_indexes_were_named_with() -> None:
    # Side indexes on disk are named <index>@<key>: the key of a default config must not move.
    # 78b34c5e83 is what workbench.eval.engines.index_key gave before the move, for the
    # defaults of then: the numpy USE, one vector per chapter, no stemming.
    before = BASE.with_overrides(
        {"embedding.provider": "use", "index.passage_chars": 0, "lexical.stem": False}
    )
    assert before.index_key == "78b34c5e83"
    # With passages off, their other key does not name a different index.
    assert before.with_overrides({"index.passage_overlap": 7}).index_key == "78b34c5e83"
