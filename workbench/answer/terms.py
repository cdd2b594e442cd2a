"""The question's key terms and whether a text contains them: what the evidence judge,
the follow-up resolver, the extractive answer and the refusal model all count with."""

from __future__ import annotations

import re
from collections.abc import Sequence

from engine.cjk import has_cjk
from engine.tokenizer import tokenize

_STOP_WORDS = """
    的 了 是 在 和 与 及 或 吗 呢 吧 啊 呀 么 着 过 也 都 就 还 又 把 被 让 给 对 从 向 于 为 以
    什么 怎么 怎样 怎么样 如何 哪些 哪里 哪个 哪儿 为什么 为何 是否 是不是 有没有 有 没有 可以 能
    能否 能不能 会 要 需要 应该 这个 那个 这些 那些 这样 那样 这种 那种 它 它们 我 我们 你 你们 他
    她 他们 其 该 此 一个 一些 还有 那么 以及 请问 请 介绍 一下 关于 吗 呢 多少 几 哪 谁 时候 什么样
    a an the is are was were be been being of to in on for and or with what which how why
    when where who whom whose does do did can could should would will shall may might must
    it its this that these those there their them they i we you your me my our about from
    by as at into than then also vs versus between any some have has had not no yes please
    tell explain describe give me much many more most other such so if but
    work works use uses used using mean means get gets make makes way ways need needs
    happen happens
"""
_STOP = frozenset(_STOP_WORDS.split())
_PUNCT = re.compile(r"^[\W_]+$")


def key_terms(text: str) -> list[str]:
    """Distinct content terms of ``text`` (jieba search-mode tokens, lower-cased), in order.

    Stopwords, punctuation, single CJK characters and single letters are dropped.
    """
    out: list[str] = []
    seen: set[str] = set()
    for tok in tokenize(text):
        t = tok.strip().lower()
        if not t or t in seen or t in _STOP or _PUNCT.match(t):
            continue
        if len(t) == 1:
            continue
        seen.add(t)
        out.append(t)
    return out


_SUFFIX = re.compile(r"(?:ing|ed|es|s)$")


def _stem(term: str) -> str:
    """A light English stem ("calling" -> "call"), so "calls" and "called" match too."""
    stem = _SUFFIX.sub("", term) if term.isascii() and len(term) >= 5 else term
    return stem if len(stem) >= 3 else term


def term_in(term: str, text_lower: str) -> bool:
    if has_cjk(term):
        return term in text_lower
    stem = _stem(term)
    tail = "[a-z]*" if stem != term else ""
    pattern = rf"(?<![a-z0-9]){re.escape(stem)}{tail}(?![a-z0-9])"
    return re.search(pattern, text_lower) is not None


def term_overlap(terms: Sequence[str], text: str) -> int:
    """How many of ``terms`` occur in ``text`` (substring for CJK, whole word otherwise)."""
    low = text.lower()
    return sum(1 for t in terms if term_in(t, low))
