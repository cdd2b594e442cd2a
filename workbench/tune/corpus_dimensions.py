"""The dimensions read from the corpus and the golden set: chunking (chapter lengths and
heading structure) and evaluation coverage (queries, categories, difficulty mix, labels)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from engine.config import EngineConfig
from workbench.eval import golden, golden_drift
from workbench.eval.messages import Message
from workbench.tune.dimension import NAMES, WEIGHTS, Dimension, first_change

LONG_CHAPTER = 2000  # chars of a chapter's own text (heading line included)
SHORT_CHAPTER = 80
DEEP_LEVEL = 5  # H5/H6 chapters are usually too fine-grained to retrieve on their own


def chunking_evidence(kb: Any) -> dict[str, Any]:
    """Chapter-length distribution and heading structure of a KnowledgeBase."""
    chapters = [n for n in kb.nodes.values() if n.level > 0]
    leaves = [n for n in chapters if not n.children_ids]
    lengths = sorted(len(n.content) for n in chapters)
    docs = list(kb.documents)
    no_h2 = [d.doc_id for d in docs if not any(n.level == 2 for n in d.nodes)]
    n_ch = len(chapters)
    return {
        "documents": len(docs),
        "chapters": n_ch,
        "median_chars": lengths[len(lengths) // 2] if lengths else 0,
        "long_share": round(sum(x > LONG_CHAPTER for x in lengths) / n_ch, 4) if n_ch else 0.0,
        # A chapter whose text lives in its sub-chapters is not "too short"; only leaves count.
        "short_share": (
            round(sum(len(n.content) < SHORT_CHAPTER for n in leaves) / len(leaves), 4)
            if leaves
            else 0.0
        ),
        "no_h2_share": round(len(no_h2) / len(docs), 4) if docs else 0.0,
        "deep_share": round(sum(n.level >= DEEP_LEVEL for n in chapters) / n_ch, 4)
        if n_ch
        else 0.0,
        "max_depth": max((n.level for n in chapters), default=0),
    }


def chunking_dimension(kb: Any, cfg: EngineConfig) -> Dimension:
    formula = Message(
        "100 - 100*long_share (chapters > {long} chars) - 100*short_share "
        "(leaf chapters < {short} chars) - 50*no_h2_share (documents without an H2) "
        "- 20*deep_share (chapters at H{deep}+), clamped to [0, 100]",
        {"long": LONG_CHAPTER, "short": SHORT_CHAPTER, "deep": DEEP_LEVEL},
    )
    if kb is None:
        return Dimension(
            "chunking",
            NAMES["chunking"],
            WEIGHTS["chunking"],
            0.0,
            {"measured": False},
            formula,
            Message("no knowledge base given -> 0"),
        )
    ev = chunking_evidence(kb)
    if not ev["chapters"]:
        return Dimension(
            "chunking",
            NAMES["chunking"],
            WEIGHTS["chunking"],
            0.0,
            ev,
            formula,
            Message("the KB has no chapters -> 0"),
            None,
            Message("add Markdown headings (## ...) so each chapter can be found on its own"),
        )
    raw = (
        100
        - 100 * ev["long_share"]
        - 100 * ev["short_share"]
        - 50 * ev["no_h2_share"]
        - 20 * ev["deep_share"]
    )
    score = round(min(100.0, max(0.0, raw)), 2)
    parts = {
        "long": 100 * ev["long_share"],
        "short": 100 * ev["short_share"],
        "no_h2": 50 * ev["no_h2_share"],
        "deep": 20 * ev["deep_share"],
    }
    worst = max(parts, key=lambda k: parts[k])
    actions = {
        "long": Message("split chapters over {n} chars with ### sub-headings", {"n": LONG_CHAPTER}),
        "short": Message(
            "merge leaf chapters under {n} chars into their parent", {"n": SHORT_CHAPTER}
        ),
        "no_h2": Message("give documents without an H2 a ## structure"),
        "deep": Message("flatten H{level}/H6 chapters into their parents", {"level": DEEP_LEVEL}),
    }
    fix = None
    if worst == "long" and parts["long"] > 0:
        fix = first_change(
            cfg,
            [
                (
                    {"index.content_chars": min(100000, max(3000, cfg.index.content_chars * 2))},
                    Message(
                        "long chapters are embedded from their first {n} chars only; "
                        "embed more (needs a re-index)",
                        {"n": cfg.index.content_chars},
                    ),
                )
            ],
        )
    return Dimension(
        "chunking",
        NAMES["chunking"],
        WEIGHTS["chunking"],
        score,
        ev,
        formula,
        Message(
            "long {long}, short {short}, no H2 {no_h2}, deep {deep} -> {score}",
            {
                "long": f"{ev['long_share']:.1%}",
                "short": f"{ev['short_share']:.1%}",
                "no_h2": f"{ev['no_h2_share']:.1%}",
                "deep": f"{ev['deep_share']:.1%}",
                "score": f"{score:.1f}",
            },
        ),
        fix if score < 100 else None,
        actions[worst] if score < 100 else None,
    )


def coverage_evidence(gs: golden.GoldenSet, kb: Any) -> dict[str, Any]:
    items = gs.answerable()
    n = len(items)
    cats = Counter(i.category or "(none)" for i in items)
    mix = Counter(i.difficulty for i in items)
    tv = 0.5 * sum(abs(mix.get(d, 0) / n - t) for d, t in golden.TARGET_MIX.items()) if n else 1.0
    bad: set[str] = set()
    if kb is not None:
        bad |= {
            i.item_id
            for i in golden.validate(gs, kb)
            if i.level == "error" and i.item_id is not None
        }
        bad |= {d.item_id for d in golden_drift.drift_report(gs, kb)}
    answerable_ids = {i.id for i in items}
    bad &= answerable_ids
    return {
        "queries": n,
        "categories": len(cats),
        "categories_with_2": sum(1 for c in cats.values() if c >= 2),
        "difficulty_mix": {d: mix.get(d, 0) for d in golden.DIFFICULTIES},
        "mix_distance": round(tv, 4),
        "bad_labels": len(bad),
        "labels_checked": kb is not None,
    }


def coverage_dimension(gs: golden.GoldenSet | None, kb: Any) -> Dimension:
    formula = Message(
        "40*min(1, queries/30) + 20*(categories with >= 2 queries / categories) "
        "+ 20*max(0, 1 - 2*TV(difficulty mix, 30/50/20)) "
        "+ 20*(1 - items with stale or invalid labels / queries)"
    )
    if gs is None:
        return Dimension(
            "coverage",
            NAMES["coverage"],
            WEIGHTS["coverage"],
            0.0,
            {"measured": False},
            formula,
            Message("no golden set -> 0"),
        )
    ev = coverage_evidence(gs, kb)
    n = ev["queries"]
    size = 40.0 * min(1.0, n / 30)
    cat = 20.0 * (ev["categories_with_2"] / ev["categories"]) if ev["categories"] else 0.0
    mix = 20.0 * max(0.0, 1.0 - 2.0 * ev["mix_distance"])
    labels = 20.0 * (1.0 - ev["bad_labels"] / n) if n else 0.0
    score = round(size + cat + mix + labels, 2)
    # (what would raise it, the points it would win), the first of equal gaps first
    parts = [
        (Message("add queries (have {n}, aim for >= 30)", {"n": n}), 40.0 - size),
        (Message("give every category at least 2 queries"), 20.0 - cat),
        (Message("move the difficulty mix toward 30/50/20 easy/medium/hard"), 20.0 - mix),
        (
            Message("remap stale labels (`wikirag golden drift`) and fix invalid ones"),
            20.0 - labels,
        ),
    ]
    worst = max(parts, key=lambda p: p[1])[0]
    return Dimension(
        "coverage",
        NAMES["coverage"],
        WEIGHTS["coverage"],
        score,
        ev,
        formula,
        Message(
            "{n} queries, {with_2}/{categories} categories with >= 2, "
            "mix distance {mix}, {bad} bad labels -> {score}",
            {
                "n": n,
                "with_2": ev["categories_with_2"],
                "categories": ev["categories"],
                "mix": f"{ev['mix_distance']:.2f}",
                "bad": ev["bad_labels"],
                "score": f"{score:.1f}",
            },
        ),
        None,
        worst if score < 100 else None,
    )
