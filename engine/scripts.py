"""Which scripts a query uses, and what share of an index's chapters is written in them.

The keyword channel can match a query's words only in chapters written in the query's
script: an English question over a mostly Chinese wiki finds the few English chapters
(API pages, FAQs) and none of the Chinese ones it is about, while the multilingual
embedder reaches across. ``fusion.cross_lingual_bm25`` weights the keyword channel down
for such a query; this module says when a query is one (``query_script_share``).

A chapter's script is read off its BM25 term counts (each token's Latin letters and CJK
characters times its count, the ``tokenizer.script_of`` rule), so it needs no chapter text
and costs one sparse product per index version. jieba's search mode also emits a Chinese
word's sub-words, which counts CJK a little high; the share is only compared with one
half, and a chapter is mixed-script when the two are close.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import scipy.sparse as sp

from engine.tokenizer import CJK, LATIN, LATIN_LETTERS_PER_CJK, script_letters

# A query is cross-lingual when fewer than this share of the index's chapters (those with
# any letters) are written in the scripts it uses.
MINORITY_SHARE = 0.5
# Past this many chapters the shares are read off this many evenly spaced ones (1M chapters
# hold ~2M distinct terms, each a regex pass; 20,000 chapters put a share within ~1%).
SAMPLE_CHAPTERS = 20_000


def chapter_script_shares(counts: sp.csr_matrix, terms: Sequence[str]) -> dict[str, float]:
    """Share of chapters written in each script: ``{LATIN: .., CJK: ..}``, over the
    chapters that have Latin letters or CJK characters at all (empty index: ``{}``)."""
    if counts.shape[0] == 0 or not terms:
        return {}
    if counts.shape[0] > SAMPLE_CHAPTERS:  # evenly spaced rows: a share, not a census
        counts = counts[np.linspace(0, counts.shape[0] - 1, SAMPLE_CHAPTERS).astype(np.int64)]
    used = np.unique(counts.indices)  # letters of the terms the rows hold, no others
    letters = np.zeros((len(terms), 2))
    letters[used] = [script_letters(terms[i]) for i in used]
    per_doc = np.asarray(counts @ letters)  # (docs, 2): Latin letters, CJK characters
    latin, cjk = per_doc[:, 0], per_doc[:, 1]
    # script_of's rule over every row at once (its rule, vectorised: 1M chapters in ms)
    is_latin = (latin > 0) & (latin > LATIN_LETTERS_PER_CJK * cjk)
    is_cjk = ~is_latin & (cjk > 0)
    written = int(is_latin.sum() + is_cjk.sum())
    if written == 0:
        return {}
    return {LATIN: int(is_latin.sum()) / written, CJK: int(is_cjk.sum()) / written}


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
