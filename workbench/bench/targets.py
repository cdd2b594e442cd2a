"""The issue targets a bench result is checked against (value, threshold, met)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def targets(r: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The issue targets, each with its value, threshold and whether it holds."""

    def check(value: Any, limit: Any, ok: Callable[[Any, Any], bool]) -> dict[str, Any]:
        if value is None or limit is None:
            return {"value": value, "target": limit, "met": None}
        return {"value": round(value, 4), "target": round(limit, 4), "met": bool(ok(value, limit))}

    le = lambda v, lim: v <= lim  # noqa: E731
    ge = lambda v, lim: v >= lim  # noqa: E731
    full, emb, inc = r.get("index_full_s"), r.get("embed_only_s"), r.get("index_incremental_s")
    h50, qe, peer = (
        r.get("hybrid_p50_ms"),
        r.get("query_embed_ms"),
        r.get("peer_lancedb_hybrid_p50_ms"),
    )
    return {
        "hybrid_p95_ms <= 100": check(r.get("hybrid_p95_ms"), 100.0, le),
        "vector agreement >= 0.99": check(r.get("vector_exact_agreement_top10"), 0.99, ge),
        "peak_rss_mb <= 2048": check(r.get("peak_rss_mb"), 2048.0, le),
        "index_full_s <= 1.3 x embed_only_s": check(
            full, 1.3 * emb if emb is not None else None, le
        ),
        "index_incremental_s <= 2% of index_full_s": check(
            inc, 0.02 * full if full is not None else None, le
        ),
        "hybrid_p50_ms <= query_embed_ms + 25": check(h50, qe + 25 if qe is not None else None, le),
        "hybrid_p50_ms <= peer_lancedb_hybrid_p50_ms": check(h50, peer, le),
        # Issue 15 (scale): per 1,000 chapters, seconds of build work besides embedding.
        "non_embedding_s_per_1k <= 0.5": check(_per_1k(full, emb, r.get("chapters")), 0.5, le),
        "index_incremental_with_parse_s <= 2": check(
            r.get("index_incremental_with_parse_s"), 2.0, le
        ),
        "build_rss_mb <= 1536": check((r.get("rss_mb_by_stage") or {}).get("indexed"), 1536.0, le),
        "serving_rss_mb <= 1024": check(r.get("serving_rss_mb"), 1024.0, le),
        "hybrid_p95_ms <= 30": check(r.get("hybrid_p95_ms"), 30.0, le),
    }


def _per_1k(full: float | None, emb: float | None, chapters: int | None) -> float | None:
    if full is None or emb is None or not chapters:
        return None
    return (full - emb) / chapters * 1000
