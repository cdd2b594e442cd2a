from __future__ import annotations

from pathlib import Path

import pytest

from engine.config import EngineConfig
from engine.errors import ConfigError
from engine.indexer import build_index
from engine.search import Engine
from engine.tokenizer import mostly_latin, parse_tokenizer_spec, tokenize, tokenizer_spec
from engine.tree import parse_kb
from tests.engine.engine_kit import HASH_CFG, write_kb

AUTO = "jieba-search+stem-auto"


def test_auto_stems_an_english_text_and_adds_stems_to_a_chinese_one() -> None:
    assert tokenize("Installing the databases", AUTO) == ["instal", "databas"]
    # A Chinese text keeps its English words as written (they match its own kind) and adds
    # their stems (they match English chapters and queries); its Chinese words are as cut.
    zh = "如何配置 databases 的备份策略和恢复流程"
    plain = tokenize(zh, "jieba-search")
    got = tokenize(zh, AUTO)
    assert [t for t in got if t != "databas"] == plain
    assert got[got.index("databases") + 1] == "databas"
    assert tokenize("配置 data 镜像", AUTO).count("data") == 1  # a word that is its stem


def test_mostly_latin_weighs_a_cjk_character_as_several_letters() -> None:
    assert mostly_latin("Backups run nightly")
    assert not mostly_latin("数据库每晚备份")
    assert not mostly_latin("配置 docker 镜像")  # 6 letters against 4 characters
    assert mostly_latin("Configure the docker image 镜像")
    assert not mostly_latin("12345 ---")  # no letters at all: nothing to stem


def test_auto_spec_parses_back_and_bool_values_keep_their_specs() -> None:
    assert tokenizer_spec("jieba", "auto") == "jieba+stem-auto"
    assert parse_tokenizer_spec("jieba+stem-auto") == ("jieba", "auto")
    assert parse_tokenizer_spec("jieba-search+stem") == ("jieba-search", True)
    for value, spec in ((False, "jieba-search"), (True, "jieba-search+stem"), ("auto", AUTO)):
        cfg = EngineConfig().with_overrides({"lexical.stem": value})
        assert cfg.lexical.stem == value and cfg.lexical.tokenizer_spec == spec


def test_stem_accepts_saved_bools_and_auto_but_nothing_else() -> None:
    for saved in ("stem: true", "stem: false", "stem: auto"):
        EngineConfig.from_yaml(f"lexical:\n  {saved}\n")
    with pytest.raises(ConfigError, match="must be one of false, true, auto"):
        EngineConfig().with_overrides({"lexical.stem": "yes"})
    with pytest.raises(ConfigError, match=r"lexical\.stem must be true or false"):
        EngineConfig().with_overrides({"lexical.stem": 1})


def test_auto_is_its_own_index_and_true_keeps_the_key_it_had() -> None:
    off = EngineConfig().with_overrides({"lexical.stem": False})
    on = EngineConfig().with_overrides({"lexical.stem": True})
    auto = EngineConfig().with_overrides({"lexical.stem": "auto"})
    assert len({off.index_key, on.index_key, auto.index_key}) == 3
    assert EngineConfig().index_key == on.index_key  # stemming is the default
    # Named before "auto" existed: {"lexical": {"stem": true}} hashed as it always was.
    assert on.index_identity()["lexical"] == {"stem": True}


MIXED_KB = {
    "ops.md": "# Operations\n\n## Backups\n\nEach database is backed up nightly.\n",
    "zh.md": "# 运维\n\n## 备份\n\n每晚备份 databases 一次。\n",
}


def test_an_auto_index_stems_only_its_english_chapters(tmp_path: Path) -> None:
    kb_dir = write_kb(tmp_path / "kb", MIXED_KB)
    cfg = HASH_CFG.with_overrides({"lexical.stem": "auto"})
    build_index(parse_kb(kb_dir), cfg, str(tmp_path / "idx"))
    eng = Engine.open(kb_dir, tmp_path / "idx", cfg)
    assert eng._shared.current().snapshot.manifest.tokenizer == AUTO
    # An English query is stemmed and finds the English chapter by its inflection ...
    hits = eng.candidates("databases backup", pool=5, mode="keyword").bm25
    assert hits[0][0] == "ops#operations/backups"
    # ... a Chinese one is not, and finds the Chinese chapter by its English word as written.
    hits = eng.candidates("备份 databases", pool=5, mode="keyword").bm25
    assert hits[0][0] == "zh#运维/备份"
    with pytest.raises(ConfigError, match=r"lexical.stem=true"):
        eng.with_config(HASH_CFG.with_overrides({"lexical.stem": True}))
