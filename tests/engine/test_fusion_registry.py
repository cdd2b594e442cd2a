"""A fusion method or normalisation is one registry entry: once registered it is a valid
config value, the pipeline runs it, and the optimizer searches it, with no other change."""

from __future__ import annotations

import pytest

from engine.config import EngineConfig, field_spec
from engine.errors import ConfigError
from engine.fusion import FUSIONS, NORMALIZATIONS, FusionMethod, MethodsReading
from engine.pipeline import Candidates, fuse
from workbench.tune.search_space import SEARCH_SPACE, available

CANDS = Candidates("q", vector=(("a", 0.9), ("b", 0.5)), bm25=(("b", 7.0), ("c", 3.0)))


def _last_first(channels, weights, params):
    """A toy method: the bm25 channel reversed (so its output cannot come from another)."""
    return [(nid, float(i)) for i, (nid, _) in enumerate(channels["bm25"])]


@pytest.fixture
def toy_method(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setitem(FUSIONS, "toy", FusionMethod("toy", _last_first, reads=("k",)))
    return "toy"


def test_an_unregistered_method_is_refused_with_the_registered_ones_named() -> None:
    with pytest.raises(ConfigError, match="rrf, convex, dbsf"):
        EngineConfig().with_overrides({"fusion.method": "toy"})


def test_a_registered_method_is_a_config_value_and_the_pipeline_runs_it(toy_method: str) -> None:
    cfg = EngineConfig().with_overrides({"fusion.method": toy_method, "search.mode": "hybrid"})
    assert toy_method in field_spec("fusion.method")["choices"]
    assert fuse(CANDS, cfg, "hybrid", 10) == [("b", 0.0), ("c", 1.0)]


def test_a_registered_method_is_searched_by_the_optimizer(toy_method: str) -> None:
    space = {s.key: s for s in available(SEARCH_SPACE)}
    assert toy_method in space["fusion.method"].choices
    # it reads k, so k is searched when it is picked; convex alone reads the normalisation
    assert toy_method in space["fusion.k"].when[-1][1]
    assert list(MethodsReading("normalization")) == ["convex"]


def test_a_registered_normalisation_is_a_config_value_and_searched(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(NORMALIZATIONS, "unit", lambda xs, lb: [1.0 for _ in xs])
    cfg = EngineConfig().with_overrides({"fusion.method": "convex", "fusion.normalization": "unit"})
    # each document scores the weights of the channels it is in: b both, c bm25 (0.7), a 0.3
    assert [nid for nid, _ in fuse(CANDS, cfg, "hybrid", 10)] == ["b", "c", "a"]
    assert "unit" in {s.key: s for s in available(SEARCH_SPACE)}["fusion.normalization"].choices
