"""The engineering dimension: latency, errors and index health from the run and the engine."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workbench.eval.messages import Message
from workbench.eval.run_record import RunRecord
from workbench.tune.dimension import NAMES, WEIGHTS, Dimension

# How a yes / no / not-reported evidence value reads in the rule (Python's words in English).
_STATE_WORDS = {True: Message("True"), False: Message("False"), None: Message("None")}


def engineering_evidence(engine_stats: Mapping[str, Any]) -> dict[str, Any]:
    """Freshness and embedder-signature match from ``engine.stats()``.

    Reads ``freshness`` (engine.index_plan.freshness: new/changed/deleted/fresh; or a
    top-level ``fresh``), the indexed row count (``index.rows``, else ``rows``/``nodes``)
    and ``signature_match`` (True/False; absent = not reported).
    """
    fr = engine_stats.get("freshness")
    fr = fr if isinstance(fr, Mapping) else engine_stats
    fresh = fr.get("fresh")
    stale = sum(int(fr.get(k, 0) or 0) for k in ("new", "changed", "deleted"))
    index = engine_stats.get("index")
    rows = index.get("rows") if isinstance(index, Mapping) else None
    if not isinstance(rows, int | float):
        rows = next(
            (engine_stats[k] for k in ("rows", "nodes") if isinstance(engine_stats.get(k), int)),
            0,
        )
    sig = engine_stats.get("signature_match")
    return {
        "fresh": None if fresh is None else bool(fresh),
        "stale_nodes": stale,
        "indexed_nodes": int(rows),
        "signature_match": None if sig is None else bool(sig),
    }


def engineering_dimension(run: RunRecord, engine_stats: Mapping[str, Any]) -> Dimension:
    ev = engineering_evidence(engine_stats or {})
    n = len(run.queries)
    ev["errors"] = run.errors
    ev["queries"] = n
    err_share = run.errors / n if n else 0.0
    if ev["fresh"] is None:
        fresh_pts = 0.0
    elif ev["fresh"]:
        fresh_pts = 50.0
    else:
        share = ev["stale_nodes"] / ev["indexed_nodes"] if ev["indexed_nodes"] else 1.0
        fresh_pts = 50.0 * max(0.0, 1.0 - 10.0 * share)
    sig_pts = 30.0 if ev["signature_match"] else 0.0
    err_pts = 20.0 * max(0.0, 1.0 - 10.0 * err_share)
    score = round(fresh_pts + sig_pts + err_pts, 2)
    formula = Message(
        "50 if the index is fresh (else 50*max(0, 1 - 10*stale/indexed), 0 when unreported) "
        "+ 30 if the index's embedder signature matches the config "
        "+ 20*max(0, 1 - 10*error_share) of the run's queries"
    )
    action = None
    if ev["fresh"] is not True or not ev["signature_match"]:
        action = Message(
            "run `wikirag index` so the index matches the KB and the configured embedder"
        )
    elif run.errors:
        action = Message("fix the {n} query errors recorded in the run", {"n": run.errors})
    return Dimension(
        "engineering",
        NAMES["engineering"],
        WEIGHTS["engineering"],
        score,
        ev,
        formula,
        Message(
            "fresh {fresh} ({stale} stale), signature match {signature}, "
            "{errors}/{n} errors -> {score}",
            {
                "fresh": _STATE_WORDS[ev["fresh"]],
                "stale": ev["stale_nodes"],
                "signature": _STATE_WORDS[ev["signature_match"]],
                "errors": run.errors,
                "n": n,
                "score": f"{score:.1f}",
            },
        ),
        None,
        action,
    )
