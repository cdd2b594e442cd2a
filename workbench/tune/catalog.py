"""The optimization catalog: the seed's four strategy tiers as data.

Each strategy is a set of candidate config changes (one experiment each) with its risk.
Auto-optimize walks them from the lowest tier, one change at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workbench.eval.messages import Message


@dataclass(frozen=True)
class Strategy:
    tier: int
    name: str
    risk: str  # low | medium | high
    why: str
    candidates: tuple[dict[str, Any], ...]  # each: config overrides for one experiment


RISKS = ("low", "medium", "high")
# How the catalog walk titles and annotates the experiments it logs (English in the log;
# the UI finds these shapes again to show them translated).
WALK_TITLE = Message("{strategy}: {change}")
WALK_NOTES = Message("auto-optimize; risk {risk}. {why}")
MANUAL_TIER = "manual"  # the tier of a change typed by hand (experiment try's default)
# The tiers the workbench's own pages and the optimizer write (a person's --strategy text
# is theirs and stays as typed).
OPTIMIZER_TIER = "optimize (Optuna TPE, cross-validated)"
SOURCE_TIERS = (MANUAL_TIER, "tune page", "sweep", "scorecard", OPTIMIZER_TIER, "restore")

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
        1,
        "Weigh BM25 for cross-lingual questions",
        "low",
        "BM25 matches a question's words only in chapters of its language: an English "
        "question over a mostly Chinese wiki needs the vector channel (0.2 measured best).",
        (
            {"fusion.cross_lingual_bm25": 0.2},
            {"fusion.cross_lingual_bm25": 0.0},
            {"fusion.cross_lingual_bm25": 1.0},
        ),
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


def texts() -> list[str]:
    """The catalog's words a person reads: the UI's catalog needs a translation of each."""
    named = [w for s in CATALOG for w in (s.name, s.why)]
    return [*TIER_NAMES.values(), *RISKS, *SOURCE_TIERS, *dict.fromkeys(named)]


def change_text(change: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in change.items())


def walk_title(s: Strategy, change: dict[str, Any]) -> str:
    return WALK_TITLE.key.format(strategy=s.name, change=change_text(change))


def walk_notes(s: Strategy) -> str:
    return WALK_NOTES.key.format(risk=s.risk, why=s.why)


def title_message(title: str) -> Message:
    """A logged title as a message: a catalog walk's ``<strategy>: <change>`` translates
    its strategy name; any other title (typed by a person) stays as it is."""
    for s in CATALOG:
        if title.startswith(s.name + ": "):
            change = title.removeprefix(s.name + ": ")
            return Message(WALK_TITLE.key, {"strategy": Message(s.name), "change": change})
    return Message("{text}", {"text": title})


def tier_message(tier: str) -> Message:
    """A logged tier: a catalog tier's name or one the workbench writes translates; a free
    text stays."""
    known = tier in TIER_NAMES.values() or tier in SOURCE_TIERS
    return Message(tier) if known else Message("{text}", {"text": tier})


def notes_message(notes: str) -> Message:
    """Logged notes: the catalog walk's own notes translate; a person's notes stay."""
    for s in CATALOG:
        if notes == walk_notes(s):
            return Message(WALK_NOTES.key, {"risk": Message(s.risk), "why": Message(s.why)})
    return Message("{text}", {"text": notes})
