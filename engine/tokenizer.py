"""jieba tokenizer: text -> lowercased tokens without stop words, optionally stemmed.

A tokenizer spec is a mode (``jieba-search`` | ``jieba``), plus ``+stem`` when Latin-script
words are stemmed; the index's manifest records it, so queries and chapters are always
segmented alike.
"""

from __future__ import annotations

import functools
import re
import threading
from typing import Any

TOKENIZER_MODES = ("jieba-search", "jieba")
# A tokenizer spec is a mode, plus this suffix when Latin-script words are stemmed (English
# Snowball / Porter2). The index's manifest records the spec, so a query is never tokenized
# differently from the chapters it is matched against.
STEM_SUFFIX = "+stem"
# ... and this one when only mostly-Latin texts are (``lexical.stem: auto``).
AUTO_STEM_SUFFIX = "+stem-auto"

# Function words that carry no topic: dropped from documents and queries alike so a question
# like "如何…？" does not rank chapters by how often they say "如何".
_STOP_TEXT = """
    的 了 是 在 和 与 及 或 也 就 都 而 把 被 对 为 从 以 之 其 这 那 有 吗 呢 吧 啊 呀 么
    我 你 他 她 它 我们 你们 他们 什么 怎么 怎样 如何 哪些 哪个 为什么 是否 可以 一个 一些
    很多 一下 哪里 多少 还是 还有 应该 需要 时候 这个 那个 这些 那些 所以 但是 因为 如果
    a an the of to in on at by for with and or is are was were be been it this that these
    those as from what which how why do does can
    i me my we us our you your he she his her they them their its not no yes will would
    should could may might must shall has have had did so if then than there here when
    where who whom whose into about over under up down out just only also very more most
    many much few some any all each every other such own same too both between after
    before while because through during without within per via etc
"""
STOP_WORDS = frozenset(_STOP_TEXT.split())

_PUNCT_ONLY = re.compile(r"^[\W_]+$")
_jieba_lock = threading.Lock()
_jieba_ready = False


def _jieba() -> Any:
    """Import and initialise jieba once, without its "Building prefix dict" chatter."""
    global _jieba_ready
    import jieba

    if not _jieba_ready:
        with _jieba_lock:
            if not _jieba_ready:
                jieba.setLogLevel(60)
                jieba.initialize()
                _jieba_ready = True
    return jieba


def warm_up() -> None:
    """Load jieba's dictionary now (about 0.5 s) instead of during the first query."""
    _jieba()


def tokenizer_spec(mode: str, stem: bool | str) -> str:
    """The spec ``tokenize`` takes (and a manifest records) for a mode and stemming choice
    (False, True, or "auto": stem the mostly-Latin texts only)."""
    if stem == "auto":
        return f"{mode}{AUTO_STEM_SUFFIX}"
    return f"{mode}{STEM_SUFFIX}" if stem else mode


def parse_tokenizer_spec(spec: str) -> tuple[str, bool | str]:
    """``"jieba-search+stem"`` -> ``("jieba-search", True)``, ``"jieba+stem-auto"`` ->
    ``("jieba", "auto")``; ValueError for an unknown spec."""
    stem: bool | str = False
    mode = spec
    for suffix, choice in ((AUTO_STEM_SUFFIX, "auto"), (STEM_SUFFIX, True)):
        if spec.endswith(suffix):
            mode, stem = spec[: -len(suffix)], choice
            break
    if mode not in TOKENIZER_MODES:
        modes = ", ".join(TOKENIZER_MODES)
        raise ValueError(
            f"tokenizer must be one of {modes} (optionally +stem or +stem-auto); got {spec!r}"
        )
    return mode, stem


# Code point ranges (inclusive) of the letters ``script_of`` counts: Latin letters (ASCII,
# Latin-1, Extended-A/B) and CJK characters (kana, ideographs, Hangul syllables). One
# definition for the regexes below and engine/scripts.py's vectorised count.
LATIN_RANGES = ((0x41, 0x5A), (0x61, 0x7A), (0xC0, 0xD6), (0xD8, 0xF6), (0xF8, 0x24F))
CJK_RANGES = ((0x3040, 0x30FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xAC00, 0xD7AF),
              (0xF900, 0xFAFF))  # fmt: skip


def _char_class(ranges: tuple[tuple[int, int], ...]) -> re.Pattern[str]:
    return re.compile("[" + "".join(f"{chr(a)}-{chr(b)}" for a, b in ranges) + "]")


_LATIN_LETTER = _char_class(LATIN_RANGES)
_CJK_CHAR = _char_class(CJK_RANGES)
# A CJK character carries about what three Latin letters do (an English rendering of a
# Chinese text runs about three letters per character), so a text is "mostly Latin" when
# its Latin letters outnumber three times its CJK characters.
LATIN_LETTERS_PER_CJK = 3


def mostly_latin(text: str) -> bool:
    """Whether ``text`` is mostly Latin-script by content (what ``stem: auto`` stems)."""
    return script_of(text) == LATIN


LATIN, CJK = "latin", "cjk"  # the scripts ``script_of`` tells apart


def script_of(text: str) -> str:
    """``LATIN`` when ``text``'s Latin letters outnumber three times its CJK characters,
    else ``CJK`` when it has any, else "" (digits and punctuation only)."""
    latin, cjk = script_letters(text)
    if latin > 0 and latin > LATIN_LETTERS_PER_CJK * cjk:
        return LATIN
    return CJK if cjk > 0 else ""


def script_letters(text: str) -> tuple[int, int]:
    """(Latin letters, CJK characters) in ``text``."""
    return len(_LATIN_LETTER.findall(text)), len(_CJK_CHAR.findall(text))


# Lowercased Latin-script words (ASCII and Latin-1/Extended-A/B letters) are stemmed; CJK,
# digits and mixed tokens such as "sha256" or "k8s" are left as jieba cut them.
_LATIN_WORD = re.compile(r"^[a-z\u00df-\u00f6\u00f8-\u00ff\u0100-\u024f]+$")
_stem_lock = threading.Lock()
_stemmer: Any = None


@functools.lru_cache(maxsize=262_144)
def stem_word(word: str) -> str:
    """English Snowball (Porter2) stem of a lowercased Latin-script word; any other token
    (Chinese, digits, "sha256") unchanged. Cached: a corpus repeats its tokens, so indexing
    pays the regex and the stemmer once per distinct token, then one dict lookup each."""
    global _stemmer
    if not _LATIN_WORD.match(word):
        return word
    # PyStemmer (libstemmer in C): 1.9 us a word on the handbook's 9,404 distinct words,
    # where pure-Python snowballstemmer took 49 us. A stemmer object is not to be shared
    # between threads unguarded: one at a time (a miss is microseconds, the lock is cheap).
    with _stem_lock:
        if _stemmer is None:
            import Stemmer

            _stemmer = Stemmer.Stemmer("english")
        return str(_stemmer.stemWord(word))


def tokenize(text: str, mode: str = "jieba-search") -> list[str]:
    """Segment ``text`` with jieba; lowercase; drop whitespace, punctuation and stop words.

    ``mode`` is a tokenizer spec: with the ``+stem`` suffix Latin-script words are then
    reduced to their English stem ("databases" and "database" both give "databas"); with
    ``+stem-auto`` only when the whole ``text`` is mostly Latin (``mostly_latin``), and
    otherwise each such word is followed by its stem where that differs.
    """
    mode, choice = parse_tokenizer_spec(mode)
    stem = mostly_latin(text) if choice == "auto" else bool(choice)
    # "auto" on a text that is not mostly Latin: its Latin words as written and their stems
    # too, so they match the stemmed English chapters and queries as well as their own kind.
    both = choice == "auto" and not stem
    jieba = _jieba()
    lowered = text.lower()
    raw = jieba.cut_for_search(lowered) if mode == "jieba-search" else jieba.cut(lowered)
    out = []
    for tok in raw:
        tok = tok.strip()
        if not tok or tok in STOP_WORDS or _PUNCT_ONLY.match(tok):
            continue
        if stem:
            tok = stem_word(tok)
        out.append(tok)
        if both and (root := stem_word(tok)) != tok:
            out.append(root)
    return out


__all__ = [
    "AUTO_STEM_SUFFIX",
    "CJK",
    "CJK_RANGES",
    "LATIN",
    "LATIN_LETTERS_PER_CJK",
    "LATIN_RANGES",
    "STEM_SUFFIX",
    "STOP_WORDS",
    "TOKENIZER_MODES",
    "mostly_latin",
    "parse_tokenizer_spec",
    "script_letters",
    "script_of",
    "stem_word",
    "tokenize",
    "tokenizer_spec",
    "warm_up",
]
