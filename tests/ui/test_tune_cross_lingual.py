"""The Tune page says when the opened question is cross-lingual, and what each config does
to the keyword channel for it."""

from __future__ import annotations

from engine.config import EngineConfig
from workbench.ui.tune_results import cross_lingual_line

OLD = EngineConfig().with_overrides({"fusion.cross_lingual_bm25": 1.0})
NEW = EngineConfig()  # 0.2


def test_each_hybrid_config_shows_its_weight_for_a_cross_lingual_question() -> None:
    line = cross_lingual_line(["baseline", "defaults"], [OLD, NEW], 0.26)
    assert line is not None and "26%" in line
    assert "`baseline` × 1 · `defaults` × 0.2" in line


def test_configs_that_never_weigh_bm25_get_the_change_to_compare() -> None:
    line = cross_lingual_line(["baseline", "b+k"], [OLD, OLD], 0.26)
    assert line is not None and "compare `fusion.cross_lingual_bm25=0.2`" in line


def test_nothing_is_said_for_a_question_in_the_indexs_main_script_or_without_fusion() -> None:
    assert cross_lingual_line(["baseline", "defaults"], [OLD, NEW], 0.74) is None
    keyword = NEW.with_overrides({"search.mode": "keyword"})
    assert cross_lingual_line(["kw"], [keyword], 0.1) is None
