"""BM25 counts kept as a base plus a delta, so an update writes only the rows it changed.

A full build (or a compaction) saves the whole count matrices: the *base*, with its
document frequencies and title/keyword term counts beside it (``BaseStats``). Each update
after it saves only the *delta* against that base: which base rows are gone, the rows
added or rewritten since, the document frequency the gone base rows gave each term and
the net change of the title/keyword term counts. That is enough to recompute the
expansion vocabulary (``current_df``, ``current_titles``) without reading the base, and
readers get the same matrices a full count gives with ``merged``. The indexer compacts the
two into a new base once the delta passes a share of the rows (``needs_compaction``).
All pure, in memory; engine/index_caches.py reads and writes the files.
"""

from __future__ import annotations

import bisect
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
import scipy.sparse as sp

from engine.rows import RowBatch
from engine.sparse_counts import replace_rows
from engine.term_counts import LexicalCounts

# Compact when the delta holds more than this share of the rows (and more than
# COMPACT_MIN_ROWS): an update then rewrites the base once instead of a growing delta each
# time, and a reader's merge stays a small part of loading the base.
COMPACT_FRACTION = 0.05
COMPACT_MIN_ROWS = 500


@dataclass(frozen=True)
class BaseStats:
    """What the vocabulary needs of the base: its terms, their df, the title terms."""

    terms: list[str]  # every term of the base, sorted (found by bisection, not a dict)
    df: np.ndarray  # int64, documents of the base holding each term
    title_terms: dict[str, int]  # term -> base rows whose title/keywords give it


@dataclass(frozen=True)
class CountsDelta:
    """The rows changed since the base, as count matrices over their own term lists."""

    removed: list[str]  # base row ids no longer current (deleted or rewritten), sorted
    ids: list[str]  # rows added or rewritten since the base, sorted
    counts: sp.csr_matrix
    terms: list[str]
    crumb_counts: sp.csr_matrix
    crumb_terms: list[str]
    gone_df: dict[str, int]  # term -> removed base rows holding it
    titles: dict[str, int]  # net change of the title/keyword term counts (may be < 0)

    @property
    def size(self) -> int:
        return len(self.removed) + len(self.ids)


def stats_of(lexical: LexicalCounts) -> BaseStats:
    """The base statistics of full counts."""
    df = np.bincount(lexical.counts.indices, minlength=len(lexical.terms)).astype(np.int64)
    order = sorted(range(len(lexical.terms)), key=lexical.terms.__getitem__)
    terms = [lexical.terms[i] for i in order]
    return BaseStats(terms, df[np.array(order, dtype=np.int64)], dict(lexical.title_terms))


def empty_delta() -> CountsDelta:
    """No change since the base."""
    none = sp.csr_matrix((0, 0), dtype=np.float64)
    return CountsDelta([], [], none, [], none, [], {}, {})


def needs_compaction(delta: CountsDelta, rows: int) -> bool:
    """Whether the delta has grown enough to be folded into a new base."""
    return delta.size > max(COMPACT_MIN_ROWS, COMPACT_FRACTION * rows)


def extended(
    delta: CountsDelta,
    stale: Sequence[str],
    stale_base_df: Mapping[str, int],
    stale_titles: Mapping[str, int],
    rows: RowBatch,
) -> CountsDelta:
    """``delta`` after an update that replaced the current rows ``stale`` by ``rows``.

    ``stale_base_df``: the document frequency of the stale rows that come from the base
    (``base_rows_of(delta, stale)``); ``stale_titles``: the title/keyword term counts of
    every stale row, both read from the stored rows before the update.
    """
    in_delta = set(delta.ids)
    base_stale = [s for s in stale if s not in in_delta]
    gone = set(delta.removed)
    if any(s in gone for s in base_stale):
        raise ValueError("a stale row is neither in the base nor in the delta")
    removed = sorted(gone.union(base_stale)) if base_stale else delta.removed
    drop = [s for s in stale if s in in_delta]
    ids, counts, terms = replace_rows(
        delta.ids, delta.counts, delta.terms, drop, rows.ids, rows.counts, rows.terms
    )
    _, crumbs, crumb_terms = replace_rows(
        delta.ids,
        delta.crumb_counts,
        delta.crumb_terms,
        drop,
        rows.ids,
        rows.crumb_counts,
        rows.crumb_terms,
    )
    gone_df = _added(delta.gone_df, stale_base_df, 1)
    titles = _added(_added(delta.titles, stale_titles, -1), rows.title_terms, 1)
    return CountsDelta(removed, ids, counts, terms, crumbs, crumb_terms, gone_df, titles)


def base_rows_of(delta: CountsDelta, ids: Sequence[str]) -> list[str]:
    """Those of the current rows ``ids`` that come from the base (not from the delta)."""
    in_delta = set(delta.ids)
    return [i for i in ids if i not in in_delta]


def _added(a: Mapping[str, int], b: Mapping[str, int], sign: int) -> dict[str, int]:
    out = dict(a)
    for t, n in b.items():
        v = out.get(t, 0) + sign * n
        if v:
            out[t] = v
        else:
            out.pop(t, None)
    return out


def current_df(stats: BaseStats, delta: CountsDelta) -> tuple[list[str], np.ndarray]:
    """(terms, document frequencies) of base + delta; terms no row holds have df 0."""
    base = stats.terms
    index: dict[str, int] = {}
    for t in set(delta.gone_df).union(delta.terms):  # the few terms the delta touches
        at = bisect.bisect_left(base, t)
        if at < len(base) and base[at] == t:
            index[t] = at
    terms = list(base)
    df = stats.df.astype(np.int64, copy=True)
    for t, n in delta.gone_df.items():
        i = index.get(t)
        if i is None:
            raise ValueError(f"the delta removes term {t!r}, which the base does not hold")
        df[i] -= n
    added = np.bincount(delta.counts.indices, minlength=len(delta.terms)).tolist()
    extra: list[int] = []
    for t, n in zip(delta.terms, added, strict=True):
        i = index.get(t)
        if i is None:
            terms.append(t)
            extra.append(n)
        else:
            df[i] += n
    return terms, np.concatenate([df, np.array(extra, dtype=np.int64)])


def current_titles(stats: BaseStats, delta: CountsDelta) -> dict[str, int]:
    """The title/keyword term row counts of base + delta (terms at 0 left out)."""
    out = _added(stats.title_terms, delta.titles, 1)
    for t in [t for t in delta.titles if out.get(t, 0) < 0]:
        raise ValueError(f"title term {t!r} counted below zero")
    return out


def merged(base: LexicalCounts, stats: BaseStats, delta: CountsDelta) -> LexicalCounts:
    """The full counts base + delta: equal to counting the current rows from scratch."""
    ids, counts, terms = replace_rows(
        base.ids, base.counts, base.terms, delta.removed, delta.ids, delta.counts, delta.terms
    )
    _, crumbs, crumb_terms = replace_rows(
        base.ids,
        base.crumb_counts,
        base.crumb_terms,
        delta.removed,
        delta.ids,
        delta.crumb_counts,
        delta.crumb_terms,
    )
    return LexicalCounts(ids, counts, terms, current_titles(stats, delta), crumbs, crumb_terms)


def stats_payload(stats: BaseStats) -> bytes:
    return _npz(
        terms=_json(stats.terms),
        sorted=np.ones(1, dtype=np.int8),
        df=np.asarray(stats.df, dtype=np.int64),
        title_terms=_json(stats.title_terms),
    )


def read_stats_payload(payload: bytes) -> BaseStats:
    z = np.load(io.BytesIO(payload))
    terms: list[str] = _unjson(z["terms"])
    df = z["df"].astype(np.int64)
    if "sorted" not in z.files:  # written before the terms were kept sorted
        order = sorted(range(len(terms)), key=terms.__getitem__)
        terms, df = [terms[i] for i in order], df[np.array(order, dtype=np.int64)]
    return BaseStats(terms, df, _unjson(z["title_terms"]))


def delta_payload(delta: CountsDelta) -> bytes:
    c, k = delta.counts, delta.crumb_counts
    return _npz(
        removed=_json(delta.removed),
        ids=_json(delta.ids),
        data=c.data,
        indices=c.indices,
        indptr=c.indptr,
        shape=np.array(c.shape, dtype=np.int64),
        terms=_json(delta.terms),
        crumb_data=k.data,
        crumb_indices=k.indices,
        crumb_indptr=k.indptr,
        crumb_shape=np.array(k.shape, dtype=np.int64),
        crumb_terms=_json(delta.crumb_terms),
        gone_df=_json(delta.gone_df),
        titles=_json(delta.titles),
    )


def read_delta_payload(payload: bytes) -> CountsDelta:
    z = np.load(io.BytesIO(payload))
    counts = sp.csr_matrix(
        (z["data"], z["indices"], z["indptr"]), shape=tuple(int(x) for x in z["shape"])
    )
    crumbs = sp.csr_matrix(
        (z["crumb_data"], z["crumb_indices"], z["crumb_indptr"]),
        shape=tuple(int(x) for x in z["crumb_shape"]),
    )
    return CountsDelta(
        removed=_unjson(z["removed"]),
        ids=_unjson(z["ids"]),
        counts=counts,
        terms=_unjson(z["terms"]),
        crumb_counts=crumbs,
        crumb_terms=_unjson(z["crumb_terms"]),
        gone_df=_unjson(z["gone_df"]),
        titles=_unjson(z["titles"]),
    )


def _json(value: object) -> np.ndarray:
    return np.frombuffer(orjson.dumps(value), np.uint8)


def _unjson(arr: np.ndarray) -> Any:
    return orjson.loads(arr.tobytes())


def _npz(**arrays: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)  # type: ignore[arg-type]
    return buf.getvalue()
