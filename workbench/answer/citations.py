"""Citations in a model's answer: normalised to [n], and removed when they point at no
source given.

Read as citations: ``[1]``, ``[1][2]``, ``[1, 2]``, ``[1-3]``, ``[1]-[3]``, ``【1】``,
``[^2]``, ``[source 3]``, ``[来源 2]``, ``[9†source]`` and ``(source 9)``. A number that is
not among the sources is removed, never renumbered; a range counts only when every number in
it is a source (``[1-9]`` over five sources cites nothing: a model that cites a span it was
not given has not read what it cites).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from workbench.answer.sources import Source

_KW = r"(?:sources?|src|refs?|来源|出处|参考)"
_BODY = rf"\d+(?:\s*(?:[,，、]|[-–~～])\s*(?:\^|{_KW}\s*)?\d+)*"
# One citation, as written. The joined range ("[1]-[3]") comes first so that its two halves
# are not read as two single citations.
CITATION = (
    r"\[\d+\]\s*[-–~～]\s*\[\d+\]"
    rf"|[\[【]\s*(?:\^|{_KW}\s*[:：#]?\s*)?{_BODY}\s*(?:†[^\]】\n]{{0,40}})?[\]】]"
    rf"|[(（]\s*{_KW}\s*[:：#]?\s*{_BODY}\s*[)）]"
)
_CITE = re.compile(
    r"\s?(?:\[(?P<lo>\d+)\]\s*[-–~～]\s*\[(?P<hi>\d+)\]"
    rf"|[\[【]\s*(?P<pre>\^|{_KW}\s*[:：#]?\s*)?(?P<body>{_BODY})\s*(?P<dag>†[^\]】\n]{{0,40}})?[\]】]"
    rf"|[(（]\s*(?P<kw>{_KW}\s*[:：#]?\s*)(?P<pbody>{_BODY})\s*[)）])",
    re.IGNORECASE,
)
_CITE_RANGE = re.compile(r"[-–~～]")
_MAX_RANGE = 20  # [1-99999] is not a citation; expand only short ranges


def _cited_numbers(body: str, known: set[int]) -> tuple[list[int], list[int], bool]:
    """(numbers a citation body names, numbers it names but cannot mean, non-canonical?).

    A range cites its numbers only when all of them are sources; otherwise (reversed, huge,
    or reaching past the sources) it cites nothing and what it named goes to the second list.
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
            span = range(lo, hi + 1)
            if 0 <= hi - lo < _MAX_RANGE and all(n in known for n in span):
                nums.extend(span)
            elif 0 <= hi - lo < _MAX_RANGE:
                bad.extend(n for n in span if n not in known)
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
        if m.group("lo"):
            body, odd = f"{m.group('lo')}-{m.group('hi')}", True
        else:
            body = m.group("body") or m.group("pbody")
            odd = bool(m.group("pre") or m.group("dag") or m.group("kw"))
        nums, bad, odd_body = _cited_numbers(body, known)
        # anything but "[n]" is rewritten to "[n]…", the one form the UI links
        odd = odd or odd_body or bool(bad) or not body.isdigit() or m.group(0).lstrip()[0] != "["
        good = [n for n in nums if n in known]
        removed.extend([*(n for n in nums if n not in known), *bad])
        valid.extend(n for n in good if n not in valid)
        if len(good) == len(nums) and not odd:
            return m.group(0)
        ws = m.group(0)[0] if m.group(0)[0].isspace() else ""
        # a citation removed whole takes its space along, but never a line break
        lead = ws if good or ws == "\n" else ""
        return lead + "".join(f"[{n}]" for n in dict.fromkeys(good))

    cleaned = _CITE.sub(fix, text)
    return cleaned, valid, removed


def has_content(text: str) -> bool:
    """Whether an answer says anything once its citations are taken out."""
    return bool(re.search(r"\w", _CITE.sub("", text)))


def citations_of(numbers: Iterable[int], sources: Sequence[Source]) -> list[dict[str, Any]]:
    by_n = {s.n: s for s in sources}
    return [by_n[n].citation() for n in sorted(set(numbers)) if n in by_n]
