"""Which characters are CJK ideographs: one definition for every part that asks.

Chinese text has no spaces between words, so code that matches terms, guesses a query's
language or splits sentences needs to know a Han character when it sees one.
"""

from __future__ import annotations

import re

# The Unicode blocks of Han ideographs: Extension A (U+3400), the Unified block (U+4E00),
# Compatibility Ideographs (U+F900), and the supplementary planes' Extensions B-H plus the
# Compatibility Supplement (U+20000..U+3134F). Kana and Hangul are not ideographs.
IDEOGRAPH_RANGES = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
IDEOGRAPH = re.compile(f"[{IDEOGRAPH_RANGES}]")


def has_cjk(text: str) -> bool:
    """Whether ``text`` contains at least one CJK ideograph."""
    return IDEOGRAPH.search(text) is not None


def cjk_count(text: str) -> int:
    """How many CJK ideographs ``text`` contains."""
    return len(IDEOGRAPH.findall(text))
