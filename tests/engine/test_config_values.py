"""Config values that would poison every score or crash the CLI are refused in one line."""

from __future__ import annotations

import pytest

from engine.config import EngineConfig, all_keys, field_spec, parse_override
from engine.errors import ConfigError

NUMERIC_KEYS = [k for k in all_keys() if field_spec(k)["type"] in (int, float)]


@pytest.mark.parametrize("key", NUMERIC_KEYS)
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_every_numeric_field_refuses_nan_and_inf(key: str, bad: float) -> None:
    with pytest.raises(ConfigError, match="finite"):
        EngineConfig().with_overrides({key: bad})


@pytest.mark.parametrize("text", ["fusion.k=.nan", "search.top_k=.inf", "fusion.k=-.inf"])
def test_cli_style_overrides_of_nan_and_inf_are_config_errors(text: str) -> None:
    key, value = parse_override(text)
    with pytest.raises(ConfigError, match=f"{key} must be a finite number"):
        EngineConfig().with_overrides({key: value})


def test_nan_in_a_config_file_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"fusion\.k must be a finite number"):
        EngineConfig.from_yaml("fusion:\n  k: .nan\n")


def test_long_values_are_cut_in_error_messages() -> None:
    with pytest.raises(ConfigError) as err:
        EngineConfig().with_overrides({"search.mode": "x" * 1_000_000})
    msg = str(err.value)
    assert len(msg) < 400 and msg.endswith("…") and "search.mode must be one of" in msg


def test_long_unknown_key_is_cut_in_error_messages() -> None:
    with pytest.raises(ConfigError) as err:
        EngineConfig().with_overrides({"fusion." + "k" * 100_000: 1})
    assert "…" in str(err.value) and len(str(err.value)) < 2000  # the list of known keys stays


def test_finite_numbers_still_accepted() -> None:
    cfg = EngineConfig().with_overrides({"fusion.k": 30, "search.top_k": 5.0})
    assert (cfg.fusion.k, cfg.search.top_k) == (30.0, 5)


def test_a_config_saved_before_new_keys_existed_keeps_its_meaning():
    import yaml

    from engine.config import EngineConfig
    from engine.config_legacy import LEGACY_VALUES

    old = EngineConfig().to_dict()
    for dotted in LEGACY_VALUES:  # what a first-release baseline.yaml looked like
        section, key = dotted.split(".")
        del old[section][key]
    cfg = EngineConfig.from_yaml(yaml.safe_dump(old))
    assert cfg.fusion.method == "rrf" and cfg.lexical.title_weight == 0.0
    assert cfg.lexical.stem is False and EngineConfig().lexical.stem is True
    # a hand-written partial config gets today's defaults
    partial = EngineConfig.from_yaml("fusion:\n  k: 30\n")
    assert partial.fusion.method == EngineConfig().fusion.method == "dbsf"
    # and a config saved today round-trips exactly
    assert EngineConfig.from_yaml(EngineConfig().to_yaml()) == EngineConfig()
