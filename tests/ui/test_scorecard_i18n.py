"""The scorecard's core-made texts: Chinese through the UI's catalog, English without it."""

from __future__ import annotations

import json

from tests.ui.test_i18n import _LATIN, _app, _english_words, _kb_text, _no_crash_box
from tests.workbench.test_scorecard import _card
from workbench.tune.dimension import rendered
from workbench.ui import i18n

# The formulas name the evidence they read (long_share, error_share, ratio) and TV (total
# variation distance): names of values, shown as they are in both languages.
FORMULA_NAMES = {"long", "short", "no", "deep", "share", "error", "ratio", "tv"}


def _zh(key: str) -> str:
    return i18n.catalog("zh").get(key, key)


def test_a_scorecard_rule_renders_in_chinese_with_the_catalog_and_in_english_without():
    cov = _card().dimension("coverage")
    assert cov.rule.render() == (
        "5 queries, 2/2 categories with >= 2, mix distance 0.10, 1 bad labels -> 58.7"
    )
    assert cov.rule.render(_zh) == (
        "5 个查询，2/2 个类别至少有 2 个查询，难度分布距离 0.10，1 个问题标注 -> 58.7"
    )
    assert cov.to_dict()["rule"] == cov.rule.render()  # --json and Markdown stay English


def test_nested_scorecard_messages_are_translated_one_by_one():
    arch = _card().dimension("architecture")
    assert arch.rule.render() == (
        "hybrid: on, helps (+0.600 mrr, hybrid vs its best single channel); "
        "filters: on: documents have categories -> 100"
    )
    assert arch.rule.render(_zh) == (
        "混合检索：已开启，有提升（mrr +0.600，混合检索对比其最佳单通道）; "
        "类别过滤：已启用（文档带有类别） -> 100"
    )
    why = arch.to_dict()["evidence"]["rerank"]
    assert why == "off, effect not measured"
    assert rendered(arch.evidence, _zh)["rerank"] == "未开启，效果未测量"


def test_every_scorecard_text_reads_in_chinese():
    card = _card()
    for d in card.dimensions:
        texts = [d.rule.render(_zh), d.formula.render(_zh)]
        texts += [d.action.render(_zh)] if d.action else []
        for e in (d.next_experiment, *d.alternatives):
            texts += [str(rendered(e, _zh).get(k, "")) for k in ("why", "disabled")] if e else []
        texts += [str(v) for v in rendered(d.evidence, _zh).values() if isinstance(v, str)]
        assert _english_words(texts, FORMULA_NAMES) == set(), (d.key, texts)


def test_the_chinese_scorecard_page_shows_rules_formulas_and_verdicts_in_chinese(
    ui_copy, monkeypatch
):
    at = _app(monkeypatch, "zh")
    at.switch_page("views/scorecard.py").run()
    _no_crash_box(at)
    frame = at.dataframe[0].value
    cells = [str(v) for v in frame[frame.columns[-1]]]  # the rule ("evidence") column
    codes = [str(c.value) for c in at.code]
    verdicts = [str(v) for j in at.json for v in json.loads(j.value).values()]
    assert len(cells) == 9 and len(codes) == 9
    kb_words = {w.lower() for w in _LATIN.findall(" ".join(_kb_text(ui_copy)))}
    found = _english_words(cells + codes + verdicts, kb_words | FORMULA_NAMES)
    assert found == set(), found


def test_the_markdown_scorecard_reads_in_chinese_with_a_translator_and_english_without():
    from workbench.tune.scorecard_markdown import scorecard_markdown

    card = _card()
    assert card.to_markdown() == scorecard_markdown(card.to_dict())  # the CLI's text
    english = card.to_markdown()
    assert english.startswith("# Scorecard: ") and "## Top weaknesses" in english
    zh = card.to_markdown(_zh)
    assert zh.startswith(f"# 评分卡：{card.total:.1f} / 100 —— 等级 {card.grade}\n")
    assert "| 维度 | 权重 | 得分 | 加权得分 | 依据 |" in zh and "## 主要薄弱项" in zh
    # the raw evidence after "证据：" is data (key=value), as in the English card
    prose = [line.split("证据：")[0] for line in zh.splitlines()]
    assert _english_words(prose, FORMULA_NAMES) == set()
