from __future__ import annotations

import random

import numpy as np
import pytest
import scipy.sparse as sp

from engine.rows import build_rows
from engine.sparse_counts import count_matrix
from engine.term_counts import lexical_of
from engine.tree import parse_kb
from tests.engine.engine_kit import HASH_CFG, TINY_KB, write_kb

_WORDS = ["检索", "切块", "rerank", "bm25", "向量", "融合", "标题", "章节", "wiki", "索引"]


def _reference(
    batches: list[tuple[list[str], list[list[str]]]],
) -> tuple[list[str], sp.csr_matrix, list[str]]:
    """The counts the way they were assembled before: every batch over one shared term list
    (first-seen order), stacked, then permuted into sorted id order."""
    index: dict[str, int] = {}
    mats, ids = [], []
    for batch_ids, docs in batches:
        c, terms = count_matrix(docs)
        col = np.array([index.setdefault(t, len(index)) for t in terms], dtype=np.int64)
        mats.append(sp.csr_matrix((c.data, col[c.indices], c.indptr), shape=(c.shape[0], 0)))
        ids += batch_ids
    width = len(index)
    mats = [sp.csr_matrix((m.data, m.indices, m.indptr), shape=(m.shape[0], width)) for m in mats]
    order = sorted(range(len(ids)), key=ids.__getitem__)
    out = sp.vstack(mats, format="csr")[np.array(order)]
    out.sort_indices()
    return [ids[i] for i in order], out, list(index)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_counts_from_shuffled_batches_are_the_stacked_and_permuted_counts(seed: int) -> None:
    rng = random.Random(seed)
    batches = []
    ids = [f"n{i:04d}" for i in range(300)]
    rng.shuffle(ids)
    for start in range(0, len(ids), rng.randint(7, 60)):
        batch_ids = ids[start : start + 60]
        docs = [[rng.choice(_WORDS) for _ in range(rng.randint(0, 12))] for _ in batch_ids]
        batches.append((batch_ids, docs))
    ref_ids, ref, ref_terms = _reference(batches)

    class _Batch:  # the three fields CountsBuilder.add reads besides the crumbs
        def __init__(self, batch_ids: list[str], docs: list[list[str]]) -> None:
            self.ids = batch_ids
            self.counts, self.terms = count_matrix(docs)
            self.crumb_counts, self.crumb_terms = count_matrix(docs[::-1])
            self.title_terms: dict[str, int] = {}

    got = lexical_of([_Batch(i, d) for i, d in batches])  # type: ignore[misc]
    assert got.ids == ref_ids
    assert got.terms == ref_terms
    # Byte for byte what the saved cache held before: same arrays, same dtypes.
    for name in ("data", "indices", "indptr"):
        a, b = getattr(got.counts, name), getattr(ref, name)
        assert a.dtype == b.dtype, name
        assert np.array_equal(a, b), name
    assert got.counts.shape == ref.shape
    assert got.crumb_counts.shape[0] == len(ref_ids)


def test_counts_of_a_kb_do_not_depend_on_how_its_rows_were_batched(tmp_path) -> None:
    kb = parse_kb(write_kb(tmp_path, TINY_KB))
    nodes = list(kb.nodes.values())
    whole = lexical_of([build_rows(nodes, HASH_CFG)])
    split = lexical_of(
        [build_rows(nodes[i : i + 2], HASH_CFG) for i in range(0, len(nodes), 2)][::-1]
    )

    def cells(lc, counts, terms) -> dict[tuple[str, str], float]:
        c = counts.tocoo()
        return {
            (lc.ids[r], terms[t]): float(v) for r, t, v in zip(c.row, c.col, c.data, strict=True)
        }

    assert split.ids == whole.ids == sorted(kb.nodes)
    assert cells(split, split.counts, split.terms) == cells(whole, whole.counts, whole.terms)
    assert cells(split, split.crumb_counts, split.crumb_terms) == cells(
        whole, whole.crumb_counts, whole.crumb_terms
    )
    assert split.title_terms == whole.title_terms
