"""The UI in Chinese and English: catalog complete, language chosen as documented."""

from __future__ import annotations

import argparse
import os
import re
import string

import pytest
from streamlit.testing.v1 import AppTest

from tests.ui.conftest import APP
from workbench.ui import i18n, state
from workbench.ui.i18n_check import missing, ui_strings

PAGES = ("overview", "knowledge_base", "golden_set", "evaluate", "compare", "experiments",
         "scorecard", "chat", "reports")  # fmt: skip


def test_every_ui_string_has_a_chinese_translation():
    assert len(ui_strings()) > 50  # the scan finds the t("...") calls
    assert missing("zh") == {}


def _fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}


def test_every_translation_keeps_the_placeholders_of_its_english_string():
    # t() fills {name} fields with str.format: a dropped or renamed field is a KeyError
    # on the page (often one only reached after a click, so the page tests miss it).
    wrong = {
        msgid: text for msgid, text in i18n.catalog("zh").items() if _fields(msgid) != _fields(text)
    }
    assert wrong == {}


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
        _no_crash_box(at)
        assert at.title[0].value in zh.values(), (page, at.title[0].value)


def test_sidebar_switch_changes_the_language(ui_env, monkeypatch):
    at = _app(monkeypatch, "en")
    assert at.title[0].value == "Overview"
    at.session_state[i18n.SESSION_KEY] = "zh"
    at.run()
    assert not at.exception
    assert at.title[0].value == "概览"


def test_write_catalog_adds_and_replaces_translations(tmp_path, monkeypatch):
    from babel.messages.pofile import read_po

    from workbench.ui import i18n_catalog

    monkeypatch.setattr(i18n_catalog, "LOCALE_DIR", tmp_path)
    i18n_catalog.write_catalog("zh", {"Run": "运行", "Seed": "种子"})
    assert i18n_catalog.write_catalog("zh", {"Seed": "随机种子"}) == 2
    with (tmp_path / "zh" / "LC_MESSAGES" / "messages.po").open("rb") as fh:
        cat = read_po(fh, locale="zh")
    assert {m.id: m.string for m in cat if m.id} == {"Run": "运行", "Seed": "随机种子"}


def _no_crash_box(at: AppTest) -> None:
    """ui.guarded turns a crash into an error plus a "Technical details" expander."""
    assert not at.exception
    assert not [e for e in at.expander if e.label in ("技术细节", "Technical details")], [
        e.value for e in at.error
    ]


def test_experiments_chat_and_reports_pages_in_chinese(ui_copy, monkeypatch):
    at = _app(monkeypatch, "zh")
    at.switch_page("views/experiments.py").run()
    _no_crash_box(at)
    subheaders = {s.value for s in at.subheader}
    assert {"单项改动", "优化（搜索）", "遍历策略目录", "优化日志"} <= subheaders, subheaders
    assert at.selectbox(key=state.EXPERIMENT_RULE).label == "接受规则"
    assert at.button(key=state.EXPERIMENT_RUN).label == "运行实验"
    assert at.number_input(key=state.OPTIMIZE_TRIALS).label == "试验"
    assert any(c.value.startswith("基线 `") for c in at.caption)

    at.switch_page("views/chat.py").run()
    _no_crash_box(at)
    assert at.title[0].value == "对话"
    assert at.button(key=state.CHAT_CLEAR).label == "新对话"
    assert at.selectbox(key=state.CHAT_MODE).label == "智能体模式"
    assert any("未配置 LLM" in i.value for i in at.info)

    at.switch_page("views/reports.py").run()
    _no_crash_box(at)
    assert any("尚无可生成报告的评测运行" in i.value for i in at.info)
    at.switch_page("views/evaluate.py").run()
    next(b for b in at.button if b.label == "运行评测").click().run()
    at.switch_page("views/reports.py").run()
    _no_crash_box(at)
    assert at.radio(key=state.REPORT_VIEW).label == "预览"
    labels = {b.label for b in at.get("download_button")}
    assert {"HTML", "Markdown", "TREC 运行文件"} <= labels, labels


# Words the Chinese UI may show in Latin letters: names of things (ids, config keys, metric
# and stage names, file formats, products), not English prose.
ALLOWED = {
    "wikirag", "wiki", "kb", "mcp", "rag", "bm25", "mrr", "ndcg", "recall", "precision", "hit",
    "latency", "p50", "p95", "map", "llm", "api", "html", "markdown", "trec", "json", "yaml", "jsonl",
    "csv", "url", "id", "ids", "baseline", "defaults", "hybrid", "keyword", "vector", "fusion",
    "rerank", "tune", "holdout", "all", "ms", "use", "hash", "onnx", "rrf", "faq", "top",
    "ui", "k", "vs", "ci", "sd", "mde", "optuna", "tpe", "cjk", "jieba", "streamlit",
    "english", "ok", "en", "zh", "none", "true", "false", "deploy", "loop", "tools", "single",
    "tv",  # total variation distance, a function name in a scorecard formula, like min and max
}  # fmt: skip
_LATIN = re.compile(r"[A-Za-z][A-Za-z0-9]*[A-Za-z0-9]")
_CODE = re.compile(r"`[^`]*`")


def _visible_text(at: AppTest) -> list[str]:
    """What a user reads on the page: prose, labels, options and table headers."""
    out: list[str] = []
    for kind in ("title", "header", "subheader", "markdown", "caption", "info", "warning",
                 "error", "success"):  # fmt: skip
        out += [str(e.value) for e in getattr(at, kind)]
    for kind in ("button", "selectbox", "text_input", "number_input", "radio", "checkbox",
                 "multiselect", "toggle", "text_area", "expander", "tabs"):  # fmt: skip
        for e in at.get(kind):
            out.append(str(getattr(e, "label", "")))
            out += [str(o) for o in (getattr(e, "options", None) or [])]
    for frame in at.dataframe:
        out += [str(c) for c in frame.value.columns]
    return out


def _english_words(texts: list[str], extra: set[str]) -> set[str]:
    from engine.config import all_keys
    from workbench.eval.metrics import DEFAULT_FAMILIES

    keys = {p for k in all_keys() for p in k.lower().replace("_", ".").split(".")}
    keys |= {f.lower() for f in DEFAULT_FAMILIES}  # metric names (hrecall, hndcg, ...)
    words = set()
    for text in texts:
        text = _CODE.sub(" ", text)
        text = re.sub(r":material/\w+:|:[a-z]+(?:-badge)?\[", " ", text)  # Streamlit directives
        text = re.sub(r"https?://\S+|\S+\.(?:md|yaml|json|jsonl|py)\b|[\w/.-]*/[\w/.-]+", " ", text)
        text = re.sub(r"\b[a-z]+\.[a-z_]+(?:=\S+)?", " ", text)  # config keys, key=value
        text = re.sub(r"\b[qv]\d+\b|\b[0-9a-f]{6,}\b", " ", text)  # query ids, hashes
        text = re.sub(r"\b\w+_\w+\b", " ", text)  # snake_case: a formula's variables, keys
        for w in _LATIN.findall(text):
            if any(ch.isdigit() for ch in w):  # T05, H5, q012: times, levels and ids
                continue
            if w.lower() not in ALLOWED | keys | extra:
                if os.environ.get("I18N_DEBUG") and w.lower() == os.environ["I18N_DEBUG"]:
                    print("UNTRANSLATED", repr(text[:200]))
                words.add(w)
    return words


def test_every_page_in_chinese_shows_no_english_words(ui_copy, monkeypatch):
    """The Chinese UI, every page after a run, a comparison and an experiment: no English
    word outside the allow-list (ids, config keys, metric names, units)."""
    at = _app(monkeypatch, "zh")
    at.switch_page("views/evaluate.py").run()
    next(b for b in at.button if b.label == "运行评测").click().run()
    at.switch_page("views/tune.py").run()
    at.text_input(key=state.item_key(state.TUNE_EDIT, 0)).input("fusion.bm25_weight=3").run()
    at.button(key=state.TUNE_RUN).click().run()
    at.button(key=state.item_key(state.TUNE_EXPERIMENT, 1)).click().run()
    kb_titles = {w.lower() for w in _LATIN.findall(" ".join(_kb_text(ui_copy)))}
    found = {}
    for page in (*PAGES, "tune"):
        at.switch_page(f"views/{page}.py").run()
        _no_crash_box(at)
        if words := _english_words(_visible_text(at), kb_titles):
            found[page] = sorted(words)
    # The report of the run the scorecard was computed for carries the scorecard section;
    # which run the page picks first depends on save times, so pick that run by name.
    at.switch_page("views/scorecard.py").run()
    at.switch_page("views/reports.py").run()
    runs = at.selectbox(key=state.REPORT_RUN)
    runs.select_index(next(i for i, o in enumerate(runs.options) if o.startswith("baseline"))).run()
    _no_crash_box(at)
    assert any("## 评分卡" in str(m.value) for m in at.markdown), "no scorecard section"
    if words := _english_words(_visible_text(at), kb_titles):
        found["reports with scorecard"] = sorted(words)
    assert found == {}, "\n".join(f"{p}: {w}" for p, w in found.items())


def _kb_text(ws) -> list[str]:
    """The wiki's own words (chapter titles and text, golden queries) are content, not UI."""
    texts = [p.read_text(encoding="utf-8") for p in ws["kb"].rglob("*.md")]
    return [*texts, ws["dataset"].read_text(encoding="utf-8")]


def test_the_english_ui_shows_no_chinese_in_its_chrome(ui_copy, monkeypatch):
    at = _app(monkeypatch, "en")
    for page in (*PAGES, "tune"):
        at.switch_page(f"views/{page}.py").run()
        _no_crash_box(at)
        chrome = [
            str(getattr(e, "label", ""))
            for kind in ("button", "selectbox", "text_input", "radio", "expander", "tabs")
            for e in at.get(kind)
        ] + [str(e.value) for e in [*at.title, *at.header, *at.subheader]]
        cjk = [c for c in chrome if re.search(r"[\u4e00-\u9fff]", c) and "语言" not in c]
        assert cjk == [], (page, cjk)
