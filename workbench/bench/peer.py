"""LanceDB's own hybrid search over the same rows, the peer the engine is timed against."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from engine.tokenizer import tokenize
from engine.types import Embedder
from workbench.bench.measure import ProgressFactory, mean_of, overlap, percentiles


class LanceHybridPeer:
    """LanceDB's own hybrid search over the same rows: vector + FTS + RRFReranker.

    The FTS column is our jieba-segmented ``tokens`` column (``" ".join(tokenize(text))``)
    indexed with ``FTS(base_tokenizer="whitespace")`` (the way that works on
    Chinese in LanceDB 0.40: its default tokenizer finds nothing in unsegmented Chinese); the query is segmented the same way.
    """

    def __init__(self, folder: str | Path, ids: list[str], vectors: np.ndarray, tokens: list[str]):
        import lancedb
        import pyarrow as pa
        from lancedb.index import FTS
        from lancedb.rerankers import RRFReranker

        db = lancedb.connect(str(folder))
        dims = int(vectors.shape[1])
        table = pa.table(
            {
                "id": pa.array(ids, pa.string()),
                "vector": pa.FixedSizeListArray.from_arrays(
                    pa.array(np.asarray(vectors, np.float32).ravel(), pa.float32()), dims
                ),
                "tokens": pa.array(tokens, pa.string()),
            }
        )
        self.table: Any = db.create_table("peer", data=table, mode="overwrite")
        self.table.create_index(
            "tokens",
            config=FTS(
                base_tokenizer="whitespace",
                lower_case=False,
                stem=False,
                remove_stop_words=False,
                ascii_folding=False,
            ),
        )
        self.reranker = RRFReranker()

    def search(self, qvec: np.ndarray, query_tokens: Sequence[str], k: int = 10) -> list[str]:
        text = " ".join(query_tokens)
        if not text.strip():  # FTS needs a term; fall back to the vector side alone
            res = (
                self.table.search(np.asarray(qvec, np.float32))
                .distance_type("cosine")
                .select(["id"])
                .limit(k)
                .to_arrow()
            )
            return res.column("id").to_pylist()
        q = (
            self.table.search(
                query_type="hybrid", vector_column_name="vector", fts_columns="tokens"
            )
            .vector(np.asarray(qvec, np.float32))
            .text(text)
            .distance_type("cosine")
            .rerank(self.reranker)
            .select(["id"])
            .limit(k)
        )
        return q.to_arrow().column("id").to_pylist()


def peer_latencies(
    peer: LanceHybridPeer,
    qs: list[str],
    embedder: Embedder,
    tokenizer_spec: str,
    bar: ProgressFactory,
    hybrid_ranked: list[list[str]],
) -> dict[str, Any]:
    """The peer's p50/p95 per query (embedding and segmenting included, as ours are), its
    search alone, and its top-10 overlap with our hybrid's ``hybrid_ranked``."""
    for q in qs[:3]:  # warm-up
        peer.search(embedder.embed_query(q), tokenize(q, tokenizer_spec))
    lat, peer_ranked, search_only = [], [], []
    pbar = bar("peer_lancedb_hybrid", len(qs))
    for q in qs:
        t = time.perf_counter()
        qv = embedder.embed_query(q)
        qt = tokenize(q, tokenizer_spec)
        t2 = time.perf_counter()
        peer_ranked.append(peer.search(qv, qt))
        t3 = time.perf_counter()
        lat.append((t3 - t) * 1000)
        search_only.append((t3 - t2) * 1000)
        pbar.update(1)
    pbar.close()
    pc = percentiles(lat)
    return {
        "peer_lancedb_hybrid_p50_ms": pc["p50"],
        "peer_lancedb_hybrid_p95_ms": pc["p95"],
        "peer_lancedb_search_only_p50_ms": percentiles(search_only)["p50"],
        "peer_overlap_hybrid_top10": mean_of(
            [overlap(a, b) for a, b in zip(hybrid_ranked, peer_ranked, strict=True)]
        ),
    }
