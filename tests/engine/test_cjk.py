"""engine.cjk: the one definition of a CJK ideograph."""

from __future__ import annotations

import pytest

from engine.cjk import cjk_count, has_cjk


@pytest.mark.parametrize(
    "ch",
    [
        "\u4e00",  # 一, first of the Unified Ideographs
        "\u9fa5",  # 龥, last of the original Unified block
        "\u3400",  # 㐀, Extension A
        "\u4db5",  # 䶵, Extension A
        "\uf900",  # 豈, Compatibility Ideographs
        "\ufa6d",  # Compatibility Ideographs
        "\U00020000",  # 𠀀, Extension B (supplementary plane)
        "\U0002f800",  # Compatibility Ideographs Supplement
        "\U00030000",  # Extension G
    ],
)
def test_every_han_block_is_cjk(ch: str) -> None:
    assert has_cjk(f"a{ch}b")
    assert cjk_count(ch * 3) == 3


@pytest.mark.parametrize(
    "text",
    [
        "hello",
        "ひらがな",  # kana is Japanese script, not an ideograph
        "한국어",  # Hangul
        "，。！？",  # CJK punctuation
        "\u4dc0",  # Yijing hexagram symbol, between Extension A and the Unified block
        "１２３",  # fullwidth digits
    ],
)
def test_other_scripts_and_punctuation_are_not(text: str) -> None:
    assert not has_cjk(text)
    assert cjk_count(text) == 0


def test_count_in_mixed_text() -> None:
    assert cjk_count("BM25 与向量检索 hybrid") == 5
