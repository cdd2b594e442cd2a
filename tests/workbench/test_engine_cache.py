"""workbench.eval.engines.EngineCache: one engine per (KB, index, config), one eval cache per index."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.indexer import build_index
from engine.tree import parse_kb
from tests.engine.engine_kit import HASH_CFG, write_kb
from workbench.eval.engines import EngineCache
from workbench.workspace import resolve


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    kb = write_kb(tmp_path / "kb")
    build_index(parse_kb(kb), HASH_CFG, str(tmp_path / ".wikirag" / "kb"))
    (tmp_path / "experiments" / "kb").mkdir(parents=True)
    HASH_CFG.save(tmp_path / "experiments" / "kb" / "baseline.yaml")
    return resolve("kb")


def test_one_engine_per_config_sharing_the_index_snapshot(ws) -> None:
    cache = EngineCache()
    assert not cache.is_open(ws, HASH_CFG)
    eng = cache.engine(ws, HASH_CFG)
    assert cache.is_open(ws, HASH_CFG)
    assert cache.engine(ws, HASH_CFG) is eng
    other_cfg = HASH_CFG.with_overrides({"fusion.k": 5.0})
    other = cache.engine(ws, other_cfg)
    assert other is not eng and other.config == other_cfg
    assert other.kb is eng.kb  # derived with with_config: no second parse or load


def test_evaluators_share_the_index_eval_cache(ws) -> None:
    cache = EngineCache()
    a = cache.evaluator(ws, HASH_CFG)
    b = cache.evaluator(ws, HASH_CFG.with_overrides({"fusion.k": 5.0}))
    assert a.cache is b.cache
    assert a.engine is cache.engine(ws, HASH_CFG, side_index=True)


def test_forget_reopens_engines_and_caches_are_independent(ws) -> None:
    cache, other = EngineCache(), EngineCache()
    eng = cache.engine(ws, HASH_CFG)
    assert not other.is_open(ws, HASH_CFG)
    cache.forget()
    assert not cache.is_open(ws, HASH_CFG)
    assert cache.engine(ws, HASH_CFG) is not eng
