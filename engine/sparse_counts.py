"""Term-count matrices as data: count, align, patch rows, save and load (scipy only).

The BM25 channel (engine/lexical.py) scores from these matrices; the indexer patches and
saves them (engine/term_counts.py, engine/index_caches.py). Nothing here tokenizes.
"""

from __future__ import annotations

import bisect
import io
import itertools
import json
from collections.abc import Iterable, Sequence
from typing import Any, BinaryIO

import numpy as np
import scipy.sparse as sp


def aligned_counts(docs_tokens: Sequence[Sequence[str]], terms: Sequence[str]) -> sp.csr_matrix:
    """Doc x term counts over an existing term list; tokens outside it are dropped.

    The title field is counted over the body's terms: the body text holds the titles too, so
    a title token missing from the body vocabulary only arises from segmenting a title in
    context differently, and dropping it keeps idf (computed on the body) unchanged.
    """
    index = {t: i for i, t in enumerate(terms)}
    rows: list[int] = []
    cols: list[int] = []
    for i, doc in enumerate(docs_tokens):
        for tok in doc:
            j = index.get(tok)
            if j is not None:
                rows.append(i)
                cols.append(j)
    data = np.ones(len(rows), dtype=np.float64)
    shape = (len(docs_tokens), len(terms))
    counts = sp.coo_matrix((data, (rows, cols)), shape=shape).tocsr()
    counts.sum_duplicates()
    counts.sort_indices()
    return counts


def count_matrix(docs_tokens: Iterable[Sequence[str]]) -> tuple[sp.csr_matrix, list[str]]:
    """Documents -> (doc x term CSR matrix of term counts, term list)."""
    vocab: dict[str, int] = {}
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    n_docs = 0
    for i, doc in enumerate(docs_tokens):
        n_docs = i + 1
        if not doc:
            continue
        ids = np.fromiter((vocab.setdefault(t, len(vocab)) for t in doc), dtype=np.int64)
        cols.append(ids)
        rows.append(np.full(len(ids), i, dtype=np.int64))
    r = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
    c = np.concatenate(cols) if cols else np.zeros(0, dtype=np.int64)
    data = np.ones(len(r), dtype=np.float64)
    # coo -> csr sums duplicate (doc, term) pairs into counts.
    counts = sp.coo_matrix((data, (r, c)), shape=(n_docs, len(vocab))).tocsr()
    counts.sum_duplicates()
    counts.sort_indices()
    return counts, list(vocab)


def replace_rows(
    ids: Sequence[str],
    counts: sp.csr_matrix,
    terms: Sequence[str],
    drop: Iterable[str],
    new_ids: Sequence[str],
    new_counts: sp.csr_matrix,
    new_terms: Sequence[str],
) -> tuple[list[str], sp.csr_matrix, list[str]]:
    """Update a count matrix whose rows are sorted ``ids``: rows in ``drop`` go, new rows come.

    Returns (ids, counts, terms) with rows in id order and every term that no row uses any
    more dropped, so the BM25 statistics (N, df, avgdl, mean idf) equal those of a matrix
    counted from scratch over the same documents; only the column order may differ.
    Costs one copy of the matrix (the kept rows move as runs between the changed ones),
    not a re-tokenization of the corpus.
    """
    gone = set(drop)
    if new_counts.shape[0] != len(new_ids):
        raise ValueError(f"{new_counts.shape[0]} count rows for {len(new_ids)} new ids")
    keep = np.fromiter((i not in gone for i in ids), dtype=bool, count=len(ids))
    kept_ids = [i for i, k in zip(ids, keep, strict=True) if k] if gone else list(ids)
    kept = set(kept_ids)
    if len(set(new_ids)) != len(new_ids) or any(i in kept for i in new_ids):
        raise ValueError("a new row's id is already in the matrix; drop it first")
    all_terms = list(terms)
    wanted = set(new_terms)  # a dict over every term of the corpus cost more than the rest
    index = {t: i for i, t in enumerate(all_terms) if t in wanted}
    for t in new_terms:
        if t not in index:
            index[t] = len(all_terms)
            all_terms.append(t)
    width = len(all_terms)
    col = np.array([index[t] for t in new_terms], dtype=np.int64)
    nc = new_counts.tocsr()
    # Copies: sort_indices below reorders in place, and the caller's matrix stays as it was.
    new = sp.csr_matrix(
        (nc.data.copy(), col[nc.indices] if len(col) else nc.indices.copy(), nc.indptr.copy()),
        shape=(nc.shape[0], width),
    )
    new.sort_indices()
    if all(a < b for a, b in itertools.pairwise(kept_ids)):
        out_ids, out = _merged_rows(kept_ids, counts, np.flatnonzero(keep), new_ids, new, width)
    else:  # not in id order (never written so by the indexer): sort everything
        old = counts if keep.all() else counts[np.flatnonzero(keep)]
        old = sp.csr_matrix((old.data, old.indices, old.indptr), shape=(old.shape[0], width))
        merged = kept_ids + list(new_ids)
        order = sorted(range(len(merged)), key=merged.__getitem__)
        out = sp.vstack([old, new], format="csr")[np.array(order, dtype=np.int64)]
        out_ids = [merged[i] for i in order]
    df = np.bincount(out.indices, minlength=width)
    if (df == 0).any():
        used = df > 0
        new_col = np.cumsum(used) - 1
        out = sp.csr_matrix(
            (out.data, new_col[out.indices], out.indptr), shape=(out.shape[0], int(used.sum()))
        )
        all_terms = [t for t, u in zip(all_terms, used, strict=True) if u]
    out.sort_indices()
    return out_ids, out, all_terms


def _merged_rows(
    kept_ids: list[str],
    counts: sp.csr_matrix,
    kept_rows: np.ndarray,
    new_ids: Sequence[str],
    new: sp.csr_matrix,
    width: int,
) -> tuple[list[str], sp.csr_matrix]:
    """Rows ``kept_rows`` of ``counts`` (ids ``kept_ids``, sorted) with ``new``'s rows
    inserted where their ids sort, as one CSR matrix ``width`` columns wide."""
    at_of = [
        (at, j)
        for at, _, j in sorted(
            (bisect.bisect_left(kept_ids, nid), nid, j) for j, nid in enumerate(new_ids)
        )
    ]
    # Cut the kept rows where ``counts`` skips a dropped row and where a new row goes in:
    # between cuts they are consecutive rows of ``counts``, copied as one slice.
    skips = (np.flatnonzero(np.diff(kept_rows) != 1) + 1).tolist()
    cuts = sorted({0, len(kept_ids), *skips, *(at for at, _ in at_of)})
    pieces: list[tuple[sp.csr_matrix, int, int]] = []  # (matrix, first row, end row)
    out_ids: list[str] = []
    k = 0
    for a, b in itertools.pairwise(cuts):
        while k < len(at_of) and at_of[k][0] == a:
            j = at_of[k][1]
            pieces.append((new, j, j + 1))
            out_ids.append(new_ids[j])
            k += 1
        first = int(kept_rows[a])
        pieces.append((counts, first, first + b - a))
        out_ids.extend(kept_ids[a:b])
    for _, j in at_of[k:]:  # after the last kept row (or into an empty matrix)
        pieces.append((new, j, j + 1))
        out_ids.append(new_ids[j])
    nnz = sum(int(m.indptr[b] - m.indptr[a]) for m, a, b in pieces)
    idx = np.int32 if max(nnz, width) < 2**31 else np.int64
    dtype = np.result_type(counts.data, new.data)
    data = np.empty(nnz, dtype=dtype)
    indices = np.empty(nnz, dtype=idx)
    indptr = np.empty(len(out_ids) + 1, dtype=idx)
    indptr[0] = row = pos = 0
    for m, a, b in pieces:
        s, e = int(m.indptr[a]), int(m.indptr[b])
        data[pos : pos + e - s] = m.data[s:e]
        indices[pos : pos + e - s] = m.indices[s:e]
        indptr[row + 1 : row + 1 + b - a] = m.indptr[a + 1 : b + 1] - s + pos
        pos, row = pos + e - s, row + b - a
    return out_ids, sp.csr_matrix((data, indices, indptr), shape=(len(out_ids), width))


def row_term_lists(
    counts: sp.csr_matrix, terms: Sequence[str]
) -> tuple[list[list[str]], list[Any]]:
    """Each CSR row as (its terms, their counts): plain lists that cross processes (the Ray
    build's row stage) and stack back exactly."""
    out_terms: list[list[str]] = []
    out_tf: list[Any] = []
    for i in range(counts.shape[0]):
        lo, hi = counts.indptr[i], counts.indptr[i + 1]
        out_terms.append([terms[j] for j in counts.indices[lo:hi]])
        out_tf.append(counts.data[lo:hi].tolist())
    return out_terms, out_tf


def from_row_term_lists(
    term_lists: Sequence[Sequence[str]], tf_lists: Sequence[Any]
) -> tuple[sp.csr_matrix, list[str]]:
    """``row_term_lists`` back into a CSR matrix over a term list of its own."""
    index: dict[str, int] = {}
    cols: list[int] = []
    data: list[float] = []
    indptr = [0]
    for terms, tf in zip(term_lists, tf_lists, strict=True):
        cols.extend(index.setdefault(t, len(index)) for t in terms)
        data.extend(tf)
        indptr.append(len(cols))
    mat = sp.csr_matrix(
        (np.asarray(data, np.float64), np.asarray(cols, np.int64), np.asarray(indptr, np.int64)),
        shape=(len(indptr) - 1, len(index)),
    )
    mat.sort_indices()
    return mat, list(index)


def counts_payload(
    counts: sp.csr_matrix, terms: Sequence[str], title_counts: sp.csr_matrix | None = None
) -> bytes:
    """``SparseBM25.to_bytes`` without building the scorer (an index build only saves it)."""
    buf = io.BytesIO()
    write_counts_payload(buf, counts, terms, title_counts)
    return buf.getvalue()


def write_counts_payload(
    fh: BinaryIO,
    counts: sp.csr_matrix,
    terms: Sequence[str],
    title_counts: sp.csr_matrix | None = None,
) -> None:
    """``counts_payload`` written to ``fh`` as it is made (the arrays are not copied into
    one bytes object first: at 1M chapters that was ~0.5 GB, held two or three times)."""
    arrays: dict[str, np.ndarray] = {
        "data": counts.data,
        "indices": counts.indices,
        "indptr": counts.indptr,
        "shape": np.array(counts.shape, dtype=np.int64),
        "terms": np.frombuffer(json.dumps(list(terms), ensure_ascii=False).encode(), np.uint8),
    }
    if title_counts is not None:
        t = title_counts
        arrays |= {"title_data": t.data, "title_indices": t.indices, "title_indptr": t.indptr}
    np.savez(fh, **arrays)  # type: ignore[arg-type]


def read_counts_payload(
    payload: bytes, start: int = 0
) -> tuple[sp.csr_matrix, list[str], sp.csr_matrix | None]:
    """(counts, terms, title counts or None) saved by ``counts_payload``, read from byte
    ``start`` of ``payload`` without copying it (zip finds its members past a prefix)."""
    fh = io.BytesIO(payload)  # shares the bytes object's buffer
    fh.seek(start)
    z = np.load(fh)
    shape = tuple(int(x) for x in z["shape"])
    counts = sp.csr_matrix((z["data"], z["indices"], z["indptr"]), shape=shape)
    title = None
    if "title_data" in z.files:
        title = sp.csr_matrix((z["title_data"], z["title_indices"], z["title_indptr"]), shape=shape)
    terms: list[str] = json.loads(z["terms"].tobytes().decode())
    return counts, terms, title
