"""The files saved beside each table version: BM25 counts and the expansion vocabulary.

Names carry the build id (``lexical_<build>.npz``, ``vocab_<build>.json`` ...), so a build
writes its caches beside the current ones and the manifest switch makes them current
together; ``drop_stale_files`` then removes what no manifest names.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import orjson
import scipy.sparse as sp

from engine.expansion import Vocabulary, embed_vocabulary, vocabulary_from_counts
from engine.lexical import count_matrix, title_tokens
from engine.manifest import MANIFEST, Manifest
from engine.rows import title_terms_of
from engine.sparse_counts import counts_payload, read_counts_payload
from engine.store import Location, Store, sql_str
from engine.term_counts import LexicalCounts, aligned
from engine.types import Embedder, ProgressFn

CacheFiles = tuple[str, str, str, str]  # lexical, crumbs, vocab terms, vocab vectors


def stored_title_terms(tbl: Any, ids: Sequence[str]) -> Counter[str]:
    """Title/keyword term row counts of the stored rows ``ids`` (before they change)."""
    out: Counter[str] = Counter()
    memo: dict[str, list[str]] = {}
    for start in range(0, len(ids), 500):
        where = f"id IN ({', '.join(sql_str(i) for i in ids[start : start + 500])})"
        got = Store.read(tbl, ["title", "keywords"], where)
        for title, kws in zip(
            got.column("title").to_pylist(), got.column("keywords").to_pylist(), strict=True
        ):
            out.update(title_terms_of(title, kws, memo))
    return out


def load_counts(loc: Location, old: Manifest) -> LexicalCounts | None:
    """The counts ``old``'s build saved (None when its caches cannot serve an update)."""
    payload = loc.read_bytes(old.lexical_file) if old.lexical_file else None
    crumbs = _load_crumbs(loc.read_bytes(old.crumbs_file)) if old.crumbs_file else None
    if payload is None or old.title_terms is None or crumbs is None:
        return None
    ids, start = split_lexical_payload(payload)
    counts, terms, _ = read_counts_payload(payload, start)  # the title field is rebuilt from crumbs
    if counts.shape[0] != len(ids) or len(ids) != len(old.nodes) or crumbs[0].shape[0] != len(ids):
        return None
    return LexicalCounts(ids, counts, terms, old.title_terms, crumbs[0], crumbs[1])


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
    prev_vocab: Vocabulary | None,
    progress: ProgressFn | None,
) -> CacheFiles:
    """Save the BM25 counts and the expansion vocabulary (df from the counts) for a build."""
    title = aligned(lexical.crumb_counts, lexical.crumb_terms, lexical.terms)
    lexical_file = f"lexical_{build_id}.npz"
    payload = counts_payload(lexical.counts, lexical.terms, title)
    loc.write_bytes(lexical_file, _with_ids(payload, lexical.ids))
    crumbs_file = f"lexical_{build_id}.crumbs.npz"
    loc.write_bytes(crumbs_file, counts_payload(lexical.crumb_counts, lexical.crumb_terms))
    if progress:
        progress(1, 1, "lexical")
    df = np.bincount(lexical.counts.indices, minlength=len(lexical.terms))
    vocab_terms = vocabulary_from_counts(lexical.terms, df, lexical.title_terms)
    vocab = embed_vocabulary(
        vocab_terms,
        embedder,
        reuse=prev_vocab,
        progress=(lambda d, t: progress(d, t, "vocab")) if progress else None,
    )
    terms_file = f"vocab_{build_id}.json"
    vectors_file = f"vocab_{build_id}.npy"
    loc.write_text(terms_file, vocab.terms_json())
    loc.write_bytes(vectors_file, vocab.vectors_npy())
    return lexical_file, crumbs_file, terms_file, vectors_file


def caches_present(loc: Location, m: Manifest) -> bool:
    """Whether every cache file ``m`` names is still there."""
    have = set(loc.names())  # a listing, not a read of files that grow with the corpus
    names = (m.lexical_file, m.vocab_terms_file, m.vocab_vectors_file)
    return all(name in have for name in names if name)


def _with_ids(npz_payload: bytes, ids: list[str]) -> bytes:
    """Prefix the BM25 payload with the row ids it is aligned to (one JSON line)."""
    return orjson.dumps(ids) + b"\n" + npz_payload


def split_lexical_payload(payload: bytes) -> tuple[list[str], int]:
    """(row ids, offset where the BM25 .npz payload starts) of a ``lexical_<build>.npz``
    file: an offset, not a copy of the rest (~56 MB at 100k chapters, held beside the file's
    bytes while a serving process loaded them)."""
    end = payload.index(b"\n")
    ids: list[str] = orjson.loads(payload[:end])
    return ids, end + 1


def drop_stale_files(loc: Location, m: Manifest) -> None:
    """Delete every cache file the manifest ``m`` does not name."""
    keep = {MANIFEST, m.lexical_file, m.crumbs_file, m.vocab_terms_file, m.vocab_vectors_file}
    for name in loc.names():
        if name.startswith(("lexical_", "vocab_")) and name not in keep:
            loc.delete(name)
