"""The files saved beside each table version: BM25 counts and the expansion vocabulary.

Names carry the build id (``lexical_<build>.npz``, ``vocab_<build>.json`` ...), so a build
writes its caches beside the current ones and the manifest switch makes them current
together; ``drop_stale_files`` then removes what no manifest names.

The counts are a base (``lexical_<build>.npz``, its ``.crumbs.npz`` and ``.stats.npz``),
written by a full build or a compaction, plus a delta (``lexical_<build>.delta.npz``) that
each update rewrites with only the rows changed since the base (engine/lexical_delta.py).
The vocabulary files are kept as they are when an update leaves its term list unchanged.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import orjson
import scipy.sparse as sp

from engine.expansion import Vocabulary, embed_vocabulary, vocabulary_from_counts
from engine.lexical import title_tokens
from engine.lexical_delta import (
    BaseStats,
    CountsDelta,
    current_df,
    current_titles,
    delta_payload,
    empty_delta,
    merged,
    read_delta_payload,
    read_stats_payload,
    stats_of,
    stats_payload,
)
from engine.manifest import MANIFEST, Manifest
from engine.rows import title_terms_of
from engine.sparse_counts import (
    count_matrix,
    counts_payload,
    read_counts_payload,
    write_counts_payload,
)
from engine.store import ChapterTable, Location, Store, sql_str
from engine.term_counts import LexicalCounts, aligned
from engine.types import Embedder, ProgressFn


@dataclass(frozen=True)
class CacheFiles:
    """The cache files of one build, as the manifest names them."""

    lexical: str
    crumbs: str
    stats: str
    delta: str  # "" when the counts are the base alone
    vocab_terms: str
    vocab_vectors: str


@dataclass(frozen=True)
class DeltaCounts:
    """An update's counts when the base stays: the base's statistics and the new delta."""

    stats: BaseStats
    delta: CountsDelta


def stored_title_terms(tbl: ChapterTable, ids: Sequence[str]) -> Counter[str]:
    """Title/keyword term row counts of the stored rows ``ids`` (before they change)."""
    return stored_terms(tbl, ids, ())[0]


def stored_terms(
    tbl: ChapterTable, ids: Sequence[str], df_ids: Sequence[str]
) -> tuple[Counter[str], Counter[str]]:
    """(title/keyword term row counts of the stored rows ``ids``, document frequency of the
    terms of those of them in ``df_ids``), read before the rows change."""
    titles: Counter[str] = Counter()
    df: Counter[str] = Counter()
    want_df = set(df_ids)
    memo: dict[str, list[str]] = {}
    cols = ["id", "title", "keywords"] + (["tokens"] if want_df else [])
    for start in range(0, len(ids), 500):
        where = f"id IN ({', '.join(sql_str(i) for i in ids[start : start + 500])})"
        got = Store.read(tbl, cols, where)
        for title, kws in zip(
            got.column("title").to_pylist(), got.column("keywords").to_pylist(), strict=True
        ):
            titles.update(title_terms_of(title, kws, memo))
        if want_df:
            for nid, toks in zip(
                got.column("id").to_pylist(), got.column("tokens").to_pylist(), strict=True
            ):
                if nid in want_df:
                    df.update(set((toks or "").split()))
    return titles, df


def load_counts(loc: Location, old: Manifest) -> LexicalCounts | None:
    """The counts ``old``'s build saved, base and delta merged (None when its caches
    cannot serve an update)."""
    out = current_counts(loc, old)
    return out if out is not None and len(out.ids) == len(old.nodes) else None


def current_counts(loc: Location, m: Manifest) -> LexicalCounts | None:
    """The counts ``m`` names, base and delta merged (None when missing or unreadable).
    Needs no node hashes: a serving snapshot's header-only manifest will do."""
    state = load_delta_state(loc, m) if m.lexical_stats_file else None
    if state is None and (m.lexical_stats_file or m.title_terms is None):
        return None
    base = load_base(loc, m)
    if base is None:
        return None
    if state is None:
        assert m.title_terms is not None  # checked above; for the type checker
        return LexicalCounts(
            base.ids, base.counts, base.terms, m.title_terms, base.crumb_counts, base.crumb_terms
        )
    try:
        return merged(base, *state)
    except ValueError:
        return None


def load_base(loc: Location, m: Manifest) -> LexicalCounts | None:
    """The base counts ``m`` names, without the delta (title terms left empty)."""
    payload = loc.read_bytes(m.lexical_file) if m.lexical_file else None
    crumbs = _load_crumbs(loc.read_bytes(m.crumbs_file)) if m.crumbs_file else None
    if payload is None or crumbs is None:
        return None
    ids, start = split_lexical_payload(payload)
    counts, terms, _ = read_counts_payload(payload, start)  # title field rebuilt from crumbs
    if counts.shape[0] != len(ids) or crumbs[0].shape[0] != len(ids):
        return None
    return LexicalCounts(ids, counts, terms, {}, crumbs[0], crumbs[1])


def load_delta_state(loc: Location, m: Manifest) -> tuple[BaseStats, CountsDelta] | None:
    """The base statistics and the delta ``m`` names, without the base matrices (None for
    an index written before them, or when they are unreadable)."""
    if not m.lexical_stats_file:
        return None
    raw_stats = loc.read_bytes(m.lexical_stats_file)
    raw_delta = loc.read_bytes(m.lexical_delta_file) if m.lexical_delta_file else b""
    if raw_stats is None or raw_delta is None:
        return None
    try:
        stats = read_stats_payload(raw_stats)
        delta = read_delta_payload(raw_delta) if raw_delta else empty_delta()
    except (ValueError, KeyError, OSError, TypeError):
        return None
    return stats, delta


def current_title_terms(loc: Location, m: Manifest) -> dict[str, int] | None:
    """How many rows give each title/keyword term in the index ``m`` describes."""
    state = load_delta_state(loc, m)
    return m.title_terms if state is None else current_titles(*state)


def lexical_from_table(store: Store, table_name: str, tokenizer: str) -> LexicalCounts:
    """Count everything again from the table's rows (an index written before the caches
    recorded what an update needs)."""
    tbl = store.open_table(table_name)
    data = Store.read(tbl, ["id", "tokens", "title", "keywords", "breadcrumb"])
    raw = data.column("id").to_pylist()
    order = sorted(range(len(raw)), key=raw.__getitem__)
    tokens = data.column("tokens").to_pylist()
    counts, terms = count_matrix((tokens[i] or "").split() for i in order)
    titles: Counter[str] = Counter()
    memo: dict[str, list[str]] = {}
    for title, kws in zip(
        data.column("title").to_pylist(), data.column("keywords").to_pylist(), strict=True
    ):
        titles.update(title_terms_of(title, kws, memo))
    crumbs_col = data.column("breadcrumb").to_pylist()
    crumb_counts, crumb_terms = count_matrix(
        title_tokens([json.loads(crumbs_col[i] or "[]") for i in order], tokenizer)
    )
    return LexicalCounts(
        [raw[i] for i in order],
        counts,
        terms,
        dict(sorted(titles.items())),
        crumb_counts,
        crumb_terms,
    )


def _load_crumbs(payload: bytes | None) -> tuple[sp.csr_matrix, list[str]] | None:
    if payload is None:
        return None
    try:
        counts, terms, _ = read_counts_payload(payload)
        return counts, terms
    except (ValueError, KeyError, OSError):
        return None


def load_vocab(loc: Location, m: Manifest) -> Vocabulary | None:
    """The expansion vocabulary ``m``'s build saved (None when missing or unreadable)."""
    if not (m.vocab_terms_file and m.vocab_vectors_file):
        return None
    terms = loc.read_text(m.vocab_terms_file)
    vecs = loc.read_bytes(m.vocab_vectors_file)
    if terms is None or vecs is None:
        return None
    try:
        return Vocabulary.from_files(terms, vecs)
    except (ValueError, KeyError, OSError):
        return None


def write_caches(
    loc: Location,
    build_id: str,
    lexical: LexicalCounts,
    embedder: Embedder,
    prev: Manifest | None,
    progress: ProgressFn | None,
) -> CacheFiles:
    """Save the full BM25 counts as a new base and the expansion vocabulary (df from the
    counts; ``prev``'s vocabulary vectors are reused where its terms are)."""
    title = aligned(lexical.crumb_counts, lexical.crumb_terms, lexical.terms)
    lexical_file = f"lexical_{build_id}.npz"
    with loc.writer(lexical_file) as fh:  # streamed: the payload is ~0.5 GB at 1M chapters
        fh.write(ids_line(lexical.ids))
        write_counts_payload(fh, lexical.counts, lexical.terms, title)
    crumbs_file = f"lexical_{build_id}.crumbs.npz"
    loc.write_bytes(crumbs_file, counts_payload(lexical.crumb_counts, lexical.crumb_terms))
    stats = stats_of(lexical)
    stats_file = f"lexical_{build_id}.stats.npz"
    loc.write_bytes(stats_file, stats_payload(stats))
    if progress:
        progress(1, 1, "lexical")
    terms_file, vectors_file = _write_vocab(
        loc, build_id, stats.terms, stats.df, stats.title_terms, embedder, prev, progress
    )
    return CacheFiles(lexical_file, crumbs_file, stats_file, "", terms_file, vectors_file)


def write_delta_caches(
    loc: Location,
    build_id: str,
    old: Manifest,
    counts: DeltaCounts,
    embedder: Embedder,
    progress: ProgressFn | None,
) -> CacheFiles:
    """Save an update's delta beside ``old``'s base (kept as it is) and the vocabulary."""
    delta_file = f"lexical_{build_id}.delta.npz"
    loc.write_bytes(delta_file, delta_payload(counts.delta))
    if progress:
        progress(1, 1, "lexical")
    terms, df = current_df(counts.stats, counts.delta)
    titles = current_titles(counts.stats, counts.delta)
    terms_file, vectors_file = _write_vocab(
        loc, build_id, terms, df, titles, embedder, old, progress
    )
    return CacheFiles(
        old.lexical_file,
        old.crumbs_file,
        old.lexical_stats_file,
        delta_file,
        terms_file,
        vectors_file,
    )


def _write_vocab(
    loc: Location,
    build_id: str,
    terms: Sequence[str],
    df: np.ndarray,
    title_terms: dict[str, int],
    embedder: Embedder,
    prev: Manifest | None,
    progress: ProgressFn | None,
) -> tuple[str, str]:
    """The vocabulary files of these counts: ``prev``'s own when its term list and
    embedder are the same (nothing written or embedded), else new ones."""
    vocab_terms = vocabulary_from_counts(terms, df, title_terms)
    sig = embedder.signature
    sig_text = f"{sig.provider}/{sig.model}/{sig.dims}"
    reuse = None
    if prev is not None and prev.vocab_terms_file and prev.vocab_vectors_file:
        text = loc.read_text(prev.vocab_terms_file)
        meta = json.loads(text) if text is not None else {}
        if (
            meta.get("signature") == sig_text
            and meta.get("terms") == vocab_terms
            and prev.vocab_vectors_file in set(loc.names())
        ):
            return prev.vocab_terms_file, prev.vocab_vectors_file
        reuse = load_vocab(loc, prev) if text is not None else None
    vocab = embed_vocabulary(
        vocab_terms,
        embedder,
        reuse=reuse,
        progress=(lambda d, t: progress(d, t, "vocab")) if progress else None,
    )
    terms_file = f"vocab_{build_id}.json"
    vectors_file = f"vocab_{build_id}.npy"
    loc.write_text(terms_file, vocab.terms_json())
    loc.write_bytes(vectors_file, vocab.vectors_npy())
    return terms_file, vectors_file


def caches_present(loc: Location, m: Manifest) -> bool:
    """Whether every cache file ``m`` names is still there."""
    have = set(loc.names())  # a listing, not a read of files that grow with the corpus
    names = (
        m.hashes_file,
        m.lexical_file,
        m.lexical_stats_file,
        m.lexical_delta_file,
        m.vocab_terms_file,
        m.vocab_vectors_file,
    )
    return all(name in have for name in names if name)


def ids_line(ids: list[str]) -> bytes:
    """The first line of a ``lexical_<build>.npz`` file: the row ids its counts are aligned
    to (JSON); the .npz payload follows."""
    return orjson.dumps(ids) + b"\n"


def split_lexical_payload(payload: bytes) -> tuple[list[str], int]:
    """(row ids, offset where the BM25 .npz payload starts) of a ``lexical_<build>.npz``
    file: an offset, not a copy of the rest (~56 MB at 100k chapters, held beside the file's
    bytes while a serving process loaded them)."""
    end = payload.index(b"\n")
    ids: list[str] = orjson.loads(payload[:end])
    return ids, end + 1


def drop_stale_files(loc: Location, m: Manifest) -> None:
    """Delete every cache file the manifest ``m`` does not name."""
    keep = {
        MANIFEST,
        m.hashes_file,
        m.lexical_file,
        m.crumbs_file,
        m.lexical_stats_file,
        m.lexical_delta_file,
        m.vocab_terms_file,
        m.vocab_vectors_file,
    }
    for name in loc.names():
        if name.startswith(("lexical_", "vocab_", "hashes_")) and name not in keep:
            loc.delete(name)
