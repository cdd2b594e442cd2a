"""LanceDB's own hybrid search over the same rows, the peer the engine is timed against."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np


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
