"""The UI in Chinese and English: catalog complete, language chosen as documented."""

from __future__ import annotations

import argparse

import pytest
from streamlit.testing.v1 import AppTest

from tests.ui.conftest import APP
from workbench.ui import i18n
from workbench.ui.i18n_check import missing, ui_strings

PAGES = ("overview", "knowledge_base", "golden_set", "evaluate", "compare", "experiments",
         "scorecard", "chat", "reports")  # fmt: skip


def test_every_ui_string_has_a_chinese_translation():
    assert len(ui_strings()) > 50  # the scan finds the t("...") calls
    assert missing("zh") == {}


@pytest.mark.parametrize(
    ("value", "expected"),
    [("zh_CN.UTF-8", "zh"), ("zh-Hans", "zh"), ("EN", "en"), ("fr_FR", None), ("", None)],
)
def test_language_codes_are_normalized(value, expected):
    assert i18n.normalize(value) == expected


def test_language_comes_from_launch_then_env_then_system_locale(monkeypatch):
    for var in ("WIKIRAG_LANG", "LC_ALL", "LC_MESSAGES", "LANG"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    assert i18n.default_lang() == "zh"
    monkeypatch.setenv("WIKIRAG_LANG", "en")
    assert i18n.default_lang() == "en"
    assert i18n.default_lang("zh") == "zh"


def test_ui_command_passes_the_language():
    from workbench.commands.ui_cmd import streamlit_argv

    args = argparse.Namespace(kb="wiki", port=8501, lang="zh")
    argv = streamlit_argv(args)
    assert argv[argv.index("--lang") + 1] == "zh"


def _app(monkeypatch, lang: str) -> AppTest:
    monkeypatch.setenv("WIKIRAG_LANG", lang)
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.run()
    return at


def test_chinese_ui_shows_chinese_titles_on_every_page(ui_env, monkeypatch):
    at = _app(monkeypatch, "zh")
    assert not at.exception
    assert at.title[0].value == "概览"
    zh = i18n.catalog("zh")
    for page in PAGES:
        at.switch_page(f"views/{page}.py").run()
        assert not at.exception, page
        assert at.title[0].value in zh.values(), (page, at.title[0].value)


def test_sidebar_switch_changes_the_language(ui_env, monkeypatch):
    at = _app(monkeypatch, "en")
    assert at.title[0].value == "Overview"
    at.session_state[i18n.SESSION_KEY] = "zh"
    at.run()
    assert not at.exception
    assert at.title[0].value == "概览"
