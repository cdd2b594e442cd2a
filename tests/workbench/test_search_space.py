from __future__ import annotations

import optuna
import pytest

from engine.config import EngineConfig, all_keys
from workbench.tune.search_space import (
    SEARCH_SPACE,
    ParamSpec,
    available,
    baseline_point,
    suggest,
)


def test_available_keys_exist_in_the_config_and_fit_its_ranges() -> None:
    specs = available()  # raises if a spec leaves the config's range or choices
    assert specs, "the search space is empty"
    assert {s.key for s in specs} <= set(all_keys())
    assert specs[0].key == "search.mode"  # every other key is conditional on it


def test_a_key_the_config_lacks_is_left_out() -> None:
    space = (*SEARCH_SPACE, ParamSpec("fusion.no_such_knob", "float", 0.0, 1.0))
    assert "fusion.no_such_knob" not in {s.key for s in available(space)}


def test_spec_outside_the_config_range_is_refused() -> None:
    with pytest.raises(ValueError, match=r"lexical\.b"):
        available((ParamSpec("lexical.b", "float", 0.0, 2.0),))


def _values(fixed: dict) -> dict:
    trial = optuna.trial.FixedTrial(fixed)
    return suggest(trial, available(), EngineConfig())


def test_fusion_keys_only_under_hybrid_and_lexical_keys_not_under_vector() -> None:
    vec = _values({"search.mode": "vector"})
    assert vec == {"search.mode": "vector"}
    kw = _values(
        {"search.mode": "keyword", "lexical.k1": 1.2, "lexical.b": 0.5}
        | {"expansion.enabled": False, "lexical.title_weight": 0.0, "lexical.prf_docs": 0}
    )
    assert not any(k.startswith("fusion.") for k in kw)
    assert kw["lexical.k1"] == 1.2 and kw["expansion.enabled"] is False


def test_normalization_only_for_convex_fusion() -> None:
    if "fusion.method" not in all_keys():
        pytest.skip("this EngineConfig has no fusion.method yet")
    common = {"search.mode": "hybrid", "fusion.bm25_weight": 1.0, "fusion.multiplier": 3}
    common |= {"fusion.cross_lingual_bm25": 0.2}
    common |= {"lexical.k1": 1.2, "lexical.b": 0.5, "expansion.enabled": True}
    common |= {"lexical.title_weight": 0.0, "lexical.prf_docs": 0}
    rrf = _values(common | {"fusion.method": "rrf", "fusion.k": 60.0})
    assert "fusion.normalization" not in rrf and rrf["fusion.k"] == 60.0
    convex = _values(common | {"fusion.method": "convex", "fusion.normalization": "zscore"})
    assert convex["fusion.normalization"] == "zscore" and "fusion.k" not in convex


def test_baseline_point_is_the_default_config_on_the_active_keys() -> None:
    base = EngineConfig()
    point = baseline_point(available(), base)
    assert point["search.mode"] == "hybrid"
    for key, value in point.items():
        assert base.get(key) == value
    assert EngineConfig().with_overrides(point) == base


def test_stepped_floats_come_back_on_the_grid() -> None:
    spec = ParamSpec("lexical.k1", "float", 0.2, 3.0, step=0.1)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=3))
    for _ in range(20):
        v = spec.suggest(study.ask())
        assert v == round(v, 6) and spec.contains(v)


def test_feedback_weight_is_searched_only_when_feedback_is_on() -> None:
    fixed = {"search.mode": "keyword", "lexical.k1": 1.2, "lexical.b": 0.5}
    fixed |= {"expansion.enabled": False, "lexical.title_weight": 0.0}
    off = _values(fixed | {"lexical.prf_docs": 0})
    assert "lexical.prf_weight" not in off
    on = _values(fixed | {"lexical.prf_docs": 5, "lexical.prf_weight": 0.2})
    assert on["lexical.prf_weight"] == 0.2
