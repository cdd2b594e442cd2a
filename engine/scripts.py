"""Which scripts a query uses, and what share of an index's chapters is written in them.

The keyword channel can match a query's words only in chapters written in the query's
script: an English question over a mostly Chinese wiki finds the few English chapters
(API pages, FAQs) and none of the Chinese ones it is about, while the multilingual
embedder reaches across. ``fusion.cross_lingual_bm25`` weights the keyword channel down
for such a query; this module says when a query is one (``query_script_share``).

A chapter's script is read off its BM25 term counts (each token's Latin letters and CJK
characters times its count, the ``tokenizer.script_of`` rule), so it needs no chapter text
and costs one sparse product per index version; the letters of every term are counted at
once over their code points. jieba's search mode also emits a Chinese word's sub-words,
which counts CJK a little high; the share is only compared with one half.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import scipy.sparse as sp

from engine.tokenizer import (
    CJK,
    CJK_RANGES,
    LATIN,
    LATIN_LETTERS_PER_CJK,
    LATIN_RANGES,
    script_letters,
)

# A query is cross-lingual when fewer than this share of the index's chapters (those with
# any letters) are written in the scripts it uses.
MINORITY_SHARE = 0.5
# Per chapter: no letters, mostly Latin, CJK (``chapter_scripts``).
NO_SCRIPT, LATIN_CODE, CJK_CODE = 0, 1, 2


def term_letters(terms: Sequence[str]) -> np.ndarray:
    """(Latin letters, CJK characters) of each term, ``script_letters`` for all at once:
    float64 (n, 2). Two million terms take well under a second."""
    if not terms:
        return np.zeros((0, 2))
    points = np.frombuffer("".join(terms).encode("utf-32-le"), dtype=np.uint32)
    lengths = np.fromiter(map(len, terms), dtype=np.int64, count=len(terms))
    starts = np.concatenate(([0], np.cumsum(lengths[:-1])))
    out = np.zeros((len(terms), 2))
    for col, ranges in enumerate((LATIN_RANGES, CJK_RANGES)):
        hit = np.zeros(len(points), dtype=np.float64)
        for lo, hi in ranges:
            hit += (points >= lo) & (points <= hi)
        # reduceat sums each term's span; an empty term's span is its successor's first
        # point, so those rows are zeroed after
        out[:, col] = np.add.reduceat(np.append(hit, 0.0), starts)
    out[lengths == 0] = 0.0
    return out


def chapter_scripts(counts: sp.csr_matrix, terms: Sequence[str]) -> np.ndarray:
    """Each chapter's script code (``NO_SCRIPT``, ``LATIN_CODE``, ``CJK_CODE``; int8), by
    ``script_of``'s rule over its tokens' letters times their counts."""
    if counts.shape[0] == 0 or not terms:
        return np.zeros(counts.shape[0], dtype=np.int8)
    per_doc = np.asarray(counts @ term_letters(terms))  # (docs, 2)
    latin, cjk = per_doc[:, 0], per_doc[:, 1]
    is_latin = (latin > 0) & (latin > LATIN_LETTERS_PER_CJK * cjk)
    codes = np.where(is_latin, LATIN_CODE, np.where(cjk > 0, CJK_CODE, NO_SCRIPT))
    return codes.astype(np.int8)


def script_shares(codes: np.ndarray, mask: np.ndarray | None = None) -> dict[str, float]:
    """Share of the chapters (those ``mask`` keeps) written in each script:
    ``{LATIN: .., CJK: ..}`` over the chapters with letters at all; ``{}`` when none."""
    picked = codes if mask is None else codes[mask]
    latin = int(np.count_nonzero(picked == LATIN_CODE))
    cjk = int(np.count_nonzero(picked == CJK_CODE))
    if latin + cjk == 0:
        return {}
    return {LATIN: latin / (latin + cjk), CJK: cjk / (latin + cjk)}


def query_script_share(query: str, shares: Mapping[str, float]) -> float:
    """Share of the index's chapters written in a script ``query`` uses at all; 1.0 when the
    query has no letters or the index's mix is unknown (nothing to weigh down).

    "Uses at all", not "mostly": "br log resume 报 ErrBackupGCSafepointExceeded" is mostly
    Latin by letters, yet a Chinese question whose identifiers BM25 matches best.
    """
    latin, cjk = script_letters(query)
    used = [s for s, n in ((LATIN, latin), (CJK, cjk)) if n > 0]
    if not used or not shares:
        return 1.0
    return min(1.0, sum(float(shares.get(s, 0.0)) for s in used))


def is_cross_lingual(share: float) -> bool:
    """Whether a query with this ``query_script_share`` is in the index's minority script."""
    return share < MINORITY_SHARE
