"""The bench's exactness checks: top-10 agreement of the vector channel with numpy
brute-force cosine over the stored vectors (and of LanceDB's flat scan), and of our BM25
with ``rank_bm25.BM25Okapi`` (on a fixed sample when the KB is big)."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path
from typing import Any

import numpy as np
from rank_bm25 import BM25Okapi

from engine.chapters import KnowledgeBase
from engine.config import EngineConfig
from engine.lexical import SparseBM25
from engine.manifest import read_manifest
from engine.search import Engine
from engine.store import PASSAGES, Location, Store, passages_of, vectors_of
from engine.tokenizer import tokenize
from engine.types import Embedder
from workbench.bench.measure import mean_of, overlap, top_ids

Passages = list[tuple[int, np.ndarray]]  # (row, unit passage vectors) of chapters with any


def exact_scores(unit: np.ndarray, passages: Passages, qv: np.ndarray) -> np.ndarray:
    """Each chapter's cosine to ``qv``: the best of its vector and its passages' vectors."""
    sims = unit @ qv
    for row, p in passages:
        sims[row] = max(sims[row], float((p @ qv).max()))
    return sims


def unit_rows(mat: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero)."""
    norms = np.linalg.norm(mat, axis=1, keepdims=True)
    return np.divide(mat, norms, out=np.zeros_like(mat), where=norms > 0)


def read_stored(idx: Path) -> tuple[list[str], np.ndarray, list[str], Passages]:
    """The current table's ids (sorted), chapter vectors, token strings and unit passages."""
    loc = Location(str(idx))
    manifest = read_manifest(loc)
    assert manifest is not None
    tbl = Store(str(idx)).open_table(manifest.table, manifest.version)
    with_passages = PASSAGES in tbl.schema.names
    data = Store.read(tbl, ["id", "vector", "tokens", *([PASSAGES] if with_passages else [])])
    raw_ids = data.column("id").to_pylist()
    order = sorted(range(len(raw_ids)), key=raw_ids.__getitem__)
    ids = [raw_ids[i] for i in order]
    mat = vectors_of(data)[np.array(order, dtype=np.int64)]
    tokens = [data.column("tokens")[i].as_py() or "" for i in order]
    # A chapter's exact score is the best of its own vector and its passages' (if any).
    raw_passages = passages_of(data) if with_passages else []
    passages = [
        (row, unit_rows(raw_passages[i]))
        for row, i in enumerate(order)
        if with_passages and len(raw_passages[i])
    ]
    return ids, mat, tokens, passages


def vector_agreement(
    engine: Engine,
    qs: list[str],
    qvecs: list[np.ndarray],
    unit: np.ndarray,
    passages: Passages,
    ids: list[str],
) -> float | None:
    """Mean top-10 overlap of the vector channel with the exact scores."""
    agree = []
    for q, qv in zip(qs, qvecs, strict=True):
        exact = top_ids(exact_scores(unit, passages, qv), ids, 10)
        got = [nid for nid, _ in engine.candidates(q, pool=10, mode="vector").vector]
        agree.append(overlap(got, exact))
    return mean_of(agree)


def lance_flat_agreement(
    kb: KnowledgeBase,
    idx: Path,
    cfg: EngineConfig,
    embedder: Embedder,
    qs: list[str],
    qvecs: list[np.ndarray],
    unit: np.ndarray,
    ids: list[str],
    n_queries: int,
) -> float | None:
    """Mean top-10 overlap of LanceDB's flat scan with the exact chapter-vector scores."""
    leng = Engine.from_kb(kb, str(idx), cfg, embedder=embedder, vector_backend="lance")
    agree = []
    for q, qv in list(zip(qs, qvecs, strict=True))[: max(1, n_queries)]:
        exact = top_ids(unit @ qv, ids, 10)  # LanceDB scans the chapter vectors only
        got = [nid for nid, _ in leng.candidates(q, pool=10, mode="vector").vector]
        agree.append(overlap(got, exact))
    return mean_of(agree)


def bm25_agreement(
    engine: Engine,
    cfg: EngineConfig,
    qs: list[str],
    ids: list[str],
    tokens: list[str],
    sample: int,
    seed: int,
) -> dict[str, Any]:
    """Top-10 agreement of our BM25 with rank_bm25's (the engine's own index when small)."""
    docs = [t.split() for t in tokens]
    if len(docs) > sample:
        rng = random.Random(seed)
        pick = sorted(rng.sample(range(len(docs)), sample))
        sample_docs = [docs[i] for i in pick]
        sample_ids = [ids[i] for i in pick]
        ours: Any = SparseBM25(sample_docs, k1=cfg.lexical.k1, b=cfg.lexical.b)
        reference = f"sample of {sample} (seed {seed})"
    else:
        sample_docs, sample_ids = docs, ids
        # rank_bm25 is plain BM25: compare with the title field weighted 0.
        plain = dataclasses.replace(cfg.lexical, title_weight=0.0)
        ours = engine._shared.current().snapshot.bm25(plain)
        reference = f"all {len(docs)} (the engine's own BM25 index)"
    ref = BM25Okapi(sample_docs, k1=cfg.lexical.k1, b=cfg.lexical.b)
    agree = []
    for q in qs:
        qt = tokenize(q, cfg.lexical.tokenizer_spec)
        if not qt:
            continue
        want = top_ids(np.asarray(ref.get_scores(qt)), sample_ids, 10, positive=True)
        got = [sample_ids[i] for i, _ in ours.top_n(qt, 10)]
        agree.append(overlap(got, want))
    return {"bm25_reference_docs": reference, "bm25_rank_bm25_agreement_top10": mean_of(agree)}
