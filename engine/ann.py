"""The approximate vector index: its shape (IVF partitions, PQ sub-vectors) chosen from the
table's size, the search budget (partitions probed, candidates re-ranked exactly) read back from
its description, and the search through it.

The shape and the budget are measured choices (the comment below); the description an index
is built with (kept in the manifest) is what a later search reads its budget from, so an
index built under older choices keeps the budget it was measured at.
"""

from __future__ import annotations

import math

import numpy as np

from engine.store import ChapterTable

# Approximate vector index (IVF_PQ, cosine) for big tables; chosen and tuned by measurement
# (docs/benchmarks.md, "Scale"). A query probes ANN_PROBE_SHARE of the partitions (at least
# ANN_MIN_NPROBES), then LanceDB re-reads the candidates' stored vectors and re-ranks them by
# exact distance. That re-read, not the probing, is what a query costs: at 1M rows it took
# ~60 of ~95 ms for 1,020 candidates (nprobes 213 of 250: 36 ms with no re-rank, 90 ms with).
# So the PQ codes are made precise enough to need few candidates: 4 dims per sub-vector
# (recall@10 from the codes alone, top 30: 0.613 at 8 dims, 0.894 at 4), and partitions of
# ~4 sqrt(rows) rows (sqrt(rows) / 4 of them; at most rows / 256, LanceDB's training limit).
# At 1M hash-embedder vectors (no cluster structure: the worst case for IVF; 200 title
# queries, hybrid's pool of 30; benchmarks/results/ann_shape_1m_session6.json):
#   1,000 partitions, 8 dims, 850 probed, 1,020 re-ranked: recall@10 0.973, p50 137-153 ms
#     250 partitions, 4 dims, 213 probed,   150 re-ranked: recall@10 0.991, p50 65 ms
# (150 probed: 0.969 at 55 ms; 300 re-ranked: 0.996 at 81-85 ms). A real embedder's vectors
# (USE, 14k rows) reached 0.9975 with the coarser codes at 32 of 54 partitions.
# Indexes built before (8 dims per sub-vector, no dims= in their description) keep the
# budget they were measured at: ANN_REFINE_CANDIDATES_COARSE.
ANN_INDEX_TYPE = "IVF_PQ"
ANN_PROBE_SHARE = 0.85
ANN_MIN_NPROBES = 32
ANN_PARTITION_SQRT_DIVISOR = 4
ANN_SUB_VECTOR_DIMS = 4
ANN_REFINE_CANDIDATES = 150
ANN_REFINE_CANDIDATES_COARSE = 1000


def _description_fields(description: str) -> dict[str, int]:
    out = {}
    for part in description.split("/"):
        key, sep, value = part.partition("=")
        if sep and value.isdigit():
            out[key] = int(value)
    return out


def ann_nprobes(description: str) -> int:
    """Partitions a query probes, for an index described as ``create_vector_index`` does."""
    parts = _description_fields(description).get("partitions", 0)
    return max(ANN_MIN_NPROBES, math.ceil(parts * ANN_PROBE_SHARE))


def ann_refine_candidates(description: str) -> int:
    """Candidates re-ranked exactly per query: few for fine PQ codes, many for coarse ones."""
    f = _description_fields(description)
    if (
        f.get("dims")
        and f.get("sub_vectors")
        and f["dims"] <= f["sub_vectors"] * ANN_SUB_VECTOR_DIMS
    ):
        return ANN_REFINE_CANDIDATES
    return ANN_REFINE_CANDIDATES_COARSE


def ann_refine_factor(k: int, candidates: int = ANN_REFINE_CANDIDATES) -> int:
    """Refine factor for a top-``k`` query: at least ``candidates`` re-ranked."""
    return max(1, math.ceil(candidates / max(1, k)))


def ann_sub_vectors(dims: int) -> int:
    """PQ sub-vectors for ``dims``: ANN_SUB_VECTOR_DIMS dims each where they divide evenly."""
    return next(
        s
        for s in (dims // ANN_SUB_VECTOR_DIMS, dims // 8, dims // 2, 1)
        if s >= 1 and dims % s == 0
    )


def ann_partitions(rows: int) -> int:
    """IVF partitions for ``rows``: sqrt(rows) / 4, at most rows / 256, at least 1."""
    return max(1, min(int(rows**0.5) // ANN_PARTITION_SQRT_DIVISOR, rows // 256))


def create_vector_index(tbl: ChapterTable, rows: int, dims: int) -> str:
    """Build the approximate vector index on ``tbl``; returns its description."""
    partitions = ann_partitions(rows)
    sub = ann_sub_vectors(dims)
    from lancedb.index import IvfPq

    config = IvfPq(distance_type="cosine", num_partitions=partitions, num_sub_vectors=sub)
    tbl.create_index("vector", config=config, replace=True)
    return f"{ANN_INDEX_TYPE}/cosine/partitions={partitions}/sub_vectors={sub}/dims={dims}"


def ann_search(
    tbl: ChapterTable,
    vector: np.ndarray,
    k: int,
    nprobes: int = ANN_MIN_NPROBES,
    refine_factor: int | None = None,
    refine_candidates: int = ANN_REFINE_CANDIDATES,
) -> list[tuple[str, float]]:
    """Approximate cosine top-``k`` through the table's vector index: (id, similarity);
    ``refine_factor`` None re-ranks at least ``refine_candidates`` candidates exactly."""
    if k <= 0:
        return []
    if refine_factor is None:
        refine_factor = ann_refine_factor(k, refine_candidates)
    q = (
        tbl.search(np.asarray(vector, dtype=np.float32), vector_column_name="vector")
        .distance_type("cosine")
        .nprobes(nprobes)
        .refine_factor(refine_factor)
        .select(["id", "_distance"])
        .limit(k)
    )
    res = q.to_arrow()
    pairs = [
        (i, 1.0 - float(d))
        for i, d in zip(
            res.column("id").to_pylist(), res.column("_distance").to_numpy(), strict=True
        )
    ]
    pairs.sort(key=lambda p: (-p[1], p[0]))
    return pairs
