"""YAML aliases are refused before expansion, so an alias bomb costs nothing."""

from __future__ import annotations

import time

import pytest

from engine.config import EngineConfig, parse_override
from engine.errors import ConfigError
from engine.yaml_safe import safe_load, short

BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)
)


def test_alias_bomb_config_is_refused_quickly() -> None:
    start = time.perf_counter()
    with pytest.raises(ConfigError, match=r"line 2: YAML aliases \(\*a\) are not allowed"):
        EngineConfig.from_yaml(BOMB)
    assert time.perf_counter() - start < 1.0


def test_merge_key_alias_is_refused() -> None:
    with pytest.raises(ConfigError, match="aliases"):
        safe_load("base: &b {k: 1}\nfusion:\n  <<: *b\n")


def test_alias_in_a_cli_override_is_refused() -> None:
    with pytest.raises(ConfigError, match="aliases"):
        parse_override("fusion.k=*a")


def test_plain_yaml_still_loads() -> None:
    assert safe_load("a: [1, 2]\nb: {c: d}\n") == {"a": [1, 2], "b": {"c": "d"}}


def test_short_cuts_long_values_with_an_ellipsis() -> None:
    assert short("abc") == "'abc'"
    cut = short("y" * 1000)
    assert len(cut) == 200 and cut.endswith("…")
