"""The optimization catalog: the seed's four strategy tiers as data.

Each strategy is a set of candidate config changes (one experiment each) with its risk.
Auto-optimize walks them from the lowest tier, one change at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Strategy:
    tier: int
    name: str
    risk: str  # low | medium | high
    why: str
    candidates: tuple[dict[str, Any], ...]  # each: config overrides for one experiment


TIER_NAMES = {
    1: "Tier 1 (quick wins)",
    2: "Tier 2 (retrieval tuning)",
    3: "Tier 3 (models and structure)",
    4: "Tier 4 (experimental)",
}

CATALOG: tuple[Strategy, ...] = (
    Strategy(
        1,
        "Rebalance fusion weights",
        "low",
        "With the offline embedder BM25 alone often beats the seeds' 2:1 vector mix "
        "(measured in docs/benchmarks.md); the best mix is a measurement, not a guess.",
        (
            {"fusion.bm25_weight": 2.0},
            {"fusion.vector_weight": 0.5},
            {"fusion.bm25_weight": 3.0},
            {"fusion.vector_weight": 2.0},
            {"fusion.vector_weight": 0.25},
        ),
    ),
    Strategy(
        1,
        "Tune the RRF constant",
        "low",
        "A smaller k lets the top ranks of each channel dominate; a larger k flattens them.",
        ({"fusion.k": 20.0}, {"fusion.k": 10.0}, {"fusion.k": 100.0}),
    ),
    Strategy(
        1,
        "Widen the candidate pool",
        "low",
        "Relevant chapters that neither channel ranks in top_k x 3 can never be fused in.",
        ({"fusion.multiplier": 5}, {"fusion.multiplier": 8}),
    ),
    Strategy(
        2,
        "BM25 parameters",
        "low",
        "Chapters vary a lot in length; b controls length normalisation, k1 saturation; "
        "title_weight is how much a match in the chapter's heading path counts (BM25F).",
        (
            {"lexical.b": 0.5},
            {"lexical.b": 0.9},
            {"lexical.k1": 1.2},
            {"lexical.k1": 2.0},
            {"lexical.title_weight": 0.0},
            {"lexical.title_weight": 4.0},
        ),
    ),
    Strategy(
        2,
        "Query expansion",
        "medium",
        "Expansion adds KB terms similar to the query's (off by default: it cost MRR on every "
        "set measured); a strict threshold adds less noise.",
        (
            {"expansion.enabled": True, "expansion.threshold": 0.85},
            {"expansion.enabled": True},
            {"expansion.enabled": True, "expansion.max_terms": 3},
            {"expansion.enabled": False},
        ),
    ),
    Strategy(
        2,
        "Search mode",
        "medium",
        "If one channel is much weaker, hybrid fusion can cost more than it adds.",
        ({"search.mode": "keyword"}, {"search.mode": "vector"}),
    ),
    Strategy(
        3,
        "Cross-encoder rerank",
        "medium",
        "A cross-encoder reads query and chapter together; the shipped one is English-only.",
        (
            {"rerank.provider": "onnx-cross-encoder"},
            {"rerank.provider": "onnx-cross-encoder", "rerank.weight": 0.5},
        ),
    ),
    Strategy(
        3,
        "Embedded text length",
        "medium",
        "How much chapter text goes into the vector changes what the vector means "
        "(needs a re-index).",
        ({"index.content_chars": 600}, {"index.content_chars": 3000}),
    ),
    Strategy(
        4,
        "Parent-child injection",
        "high",
        "Adds children of strongly reranked chapters; only acts when rerank is on.",
        ({"injection.enabled": True}, {"injection.enabled": True, "injection.min_score": 0.6}),
    ),
    Strategy(
        4,
        "Rerank cut-off",
        "high",
        "Fewer reranked candidates is faster; more can rescue deep relevant chapters.",
        ({"rerank.max_candidates": 20}, {"rerank.max_candidates": 50}),
    ),
)


def strategies(tiers: set[int] | None = None) -> list[Strategy]:
    return [s for s in CATALOG if tiers is None or s.tier in tiers]
