"""Citations in a model's answer: normalised to [n], and removed when they point at no
source given."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from workbench.answer.sources import Source

_CITE = re.compile(
    r"\s?[\[【]\s*(\^|(?:sources?|src|来源|出处)\s*[:：#]?\s*)?"
    r"(\d+(?:\s*(?:[,，、]|[-–~～])\s*(?:\^|(?:sources?|src|来源|出处)\s*)?\d+)*)\s*[\]】]",
    re.IGNORECASE,
)
_CITE_RANGE = re.compile(r"[-–~～]")
_MAX_RANGE = 20  # [1-99999] is not a citation; expand only short ranges


def _cited_numbers(body: str) -> tuple[list[int], list[int], bool]:
    """(numbers a citation body names, numbers it names but cannot mean, non-canonical?).

    A reversed or huge range ([3-1], [1-99999]) cites nothing: its ends go to the second list.
    """
    nums: list[int] = []
    bad: list[int] = []
    odd = False
    for part in re.split(r"\s*[,，、]\s*", body):
        digits = [int(x) for x in re.findall(r"\d+", part)]
        if re.search(r"[^\d\s]", _CITE_RANGE.sub("", part)):
            odd = True  # "^" or "source" inside a list
        if _CITE_RANGE.search(part) and len(digits) == 2:
            odd = True
            lo, hi = digits
            if 0 <= hi - lo < _MAX_RANGE:
                nums.extend(range(lo, hi + 1))
            else:
                bad.extend(digits)
        else:
            nums.extend(digits)
    return nums, bad, odd


def check_citations(text: str, sources: Sequence[Source]) -> tuple[str, list[int], list[int]]:
    """Normalise citations to [n] and remove those that point at no source.

    Returns (text, valid numbers, removed numbers).
    """
    known = {s.n for s in sources}
    valid: list[int] = []
    removed: list[int] = []

    def fix(m: re.Match[str]) -> str:
        nums, bad, odd = _cited_numbers(m.group(2))
        odd = odd or bool(m.group(1)) or bool(bad)
        good = [n for n in nums if n in known]
        removed.extend([*(n for n in nums if n not in known), *bad])
        valid.extend(n for n in good if n not in valid)
        if len(good) == len(nums) and not odd:
            return m.group(0)
        lead = " " if m.group(0).startswith(" ") and good else ""
        return lead + "".join(f"[{n}]" for n in dict.fromkeys(good))

    cleaned = _CITE.sub(fix, text)
    return cleaned, valid, removed


def has_content(text: str) -> bool:
    """Whether an answer says anything once its citations are taken out."""
    return bool(re.search(r"\w", _CITE.sub("", text)))


def citations_of(numbers: Iterable[int], sources: Sequence[Source]) -> list[dict[str, Any]]:
    by_n = {s.n: s for s in sources}
    return [by_n[n].citation() for n in sorted(set(numbers)) if n in by_n]
