"""The architecture dimension: what each capability (hybrid, rerank, expansion, filters,
injection, summaries) is measured to contribute, read from ablation runs and the log."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine.config import EngineConfig
from workbench.eval.evaluate import EvalRun
from workbench.tune.dimension import NAMES, WEIGHTS, Change, Dimension, first_change, valid_changes
from workbench.tune.retrieval_dimensions import RERANK_OFF_SCORE
from workbench.tune.suggestions import ABLATION_MEASURE, enabled, log_delta

ARCH_POINTS = {
    "hybrid": 25,
    "rerank": 25,
    "expansion": 15,
    "filters": 15,
    "injection": 10,
    "summaries": 10,
}


def kb_has_categories(kb: Any) -> bool:
    if kb is None:
        return False
    return any(str((d.frontmatter or {}).get("category") or "") for d in kb.documents) or any(
        n.category for n in kb.nodes.values()
    )


# A capability's measured effect within this much of the primary measure is "no effect":
# the tuning rule treats smaller mean differences as noise on golden sets of this size.
ABLATION_TOLERANCE = 0.005


def _ablation_effect(
    run: EvalRun, mode: str, other: EvalRun | None, other_mode: str | None = None
) -> float | None:
    """Mean ``ABLATION_MEASURE`` of ``run`` minus that of ``other`` (None when unmeasured)."""
    if other is None:
        return None
    other_mode = other_mode or mode
    if not other.for_mode(other_mode) or not run.for_mode(mode):
        return None
    a = run.means(mode).get(ABLATION_MEASURE, 0.0)
    return a - other.means(other_mode).get(ABLATION_MEASURE, 0.0)


# The change that follows when a capability is measured to hurt (on) or help (off).
_SWITCH_OFF: dict[str, Change] = {
    "hybrid": ({"search.mode": "keyword"}, "hybrid loses to its best channel"),
    "expansion": ({"expansion.enabled": False}, "query expansion costs MRR here"),
    "rerank": ({"rerank.provider": "none"}, "the reranker costs MRR here"),
    "injection": ({"injection.enabled": False}, "injection costs MRR here"),
    "summaries": ({"index.use_summaries": False}, "summaries cost MRR here"),
}
_SWITCH_ON: dict[str, Change] = {
    "hybrid": ({"search.mode": "hybrid"}, "hybrid beats the current mode"),
    "expansion": ({"expansion.enabled": True}, "query expansion measured to help"),
    "injection": ({"injection.enabled": True}, "injection measured to help"),
}

LOG_KEYS = {
    "rerank": "rerank.provider",
    "summaries": "index.use_summaries",
    "expansion": "expansion.enabled",
    "injection": "injection.enabled",
}


def architecture_dimension(
    cfg: EngineConfig,
    kb: Any,
    run: EvalRun | None = None,
    extra: Mapping[str, EvalRun] | None = None,
    history: Sequence[Mapping[str, Any]] = (),
) -> Dimension:
    """Score what each capability is measured to contribute, not whether it is switched on.

    A capability earns its points when it is on and helps (switching it off costs more
    than ABLATION_TOLERANCE of MRR), or off because switching it on would not help; it
    earns none when it is on and hurts or off and would help. Effects come from ablation
    runs on the cached evaluation, else from the experiment log; a capability that cannot
    be measured (a reranker never tried, summaries without an LLM) is left out of the
    score and said so in the evidence.
    """
    extra = dict(extra or {})
    mode = run.modes[0] if run is not None and run.modes else cfg.search.mode
    rerank_on = cfg.rerank.provider != "none"
    on = {
        "hybrid": cfg.search.mode == "hybrid",
        "rerank": rerank_on,
        "expansion": cfg.expansion.enabled and cfg.search.mode != "vector",
        "injection": cfg.injection.enabled and rerank_on,
        "summaries": cfg.index.use_summaries,
    }
    # effect = (metric with the capability) - (metric without it); None: not measured
    effect: dict[str, float | None] = dict.fromkeys(on)
    source: dict[str, str] = dict.fromkeys(on, "not measured")
    if run is not None:
        if on["hybrid"]:
            singles = [_ablation_effect(run, mode, extra.get(m), m) for m in ("keyword", "vector")]
            known = [d for d in singles if d is not None]
            if known:
                effect["hybrid"] = min(known)  # vs the best single channel
                source["hybrid"] = "hybrid vs its best single channel"
        elif extra.get("hybrid") is not None:
            d = _ablation_effect(extra["hybrid"], "hybrid", run, mode)
            effect["hybrid"] = d
            source["hybrid"] = f"hybrid vs {mode}"
        if extra.get("ablate_expansion") is not None:
            d = _ablation_effect(run, mode, extra["ablate_expansion"])
            effect["expansion"] = d if on["expansion"] else (None if d is None else -d)
            source["expansion"] = "expansion on vs off"
        if rerank_on and extra.get("no_rerank") is not None:
            effect["rerank"] = _ablation_effect(run, mode, extra["no_rerank"])
            source["rerank"] = "rerank on vs off"
        if rerank_on and extra.get("ablate_injection") is not None:
            d = _ablation_effect(run, mode, extra["ablate_injection"])
            effect["injection"] = d if on["injection"] else (None if d is None else -d)
            source["injection"] = "injection on vs off"
    # What ablation cannot measure, an earlier experiment that switched it may have.
    for cap, key in LOG_KEYS.items():
        if effect[cap] is not None:
            continue
        for rec in reversed(list(history)):
            changes = rec.get("changes") or {}
            if set(changes) != {key}:
                continue
            old, new = changes[key]
            if enabled(key, new) == enabled(key, old):
                continue
            d = log_delta(rec)
            effect[cap] = d if enabled(key, new) else -d
            source[cap] = f"experiment #{rec.get('number')}, {rec.get('decision', '?')}"
            break

    earned = 0.0
    possible = 0.0
    verdict: dict[str, str] = {}
    for cap, pts in ARCH_POINTS.items():
        if cap == "filters":
            has = kb_has_categories(kb)
            possible += pts
            earned += pts if has else 0
            verdict[cap] = "on: documents have categories" if has else "no categories to filter on"
            continue
        d = effect.get(cap)
        if d is None:
            verdict[cap] = ("on" if on[cap] else "off") + ", effect not measured"
            continue
        possible += pts
        helps = d > ABLATION_TOLERANCE
        hurts = d < -ABLATION_TOLERANCE
        if on[cap]:
            ok = not hurts
            word = "helps" if helps else "hurts" if hurts else "no effect"
        else:
            ok = not helps  # off: fine unless switching it on would help
            word = "would help" if helps else "would hurt" if hurts else "would not help"
        earned += pts if ok else 0
        verdict[cap] = (
            f"{'on' if on[cap] else 'off'}, {word} ({d:+.3f} {ABLATION_MEASURE}, {source[cap]})"
        )
    score = 100.0 * earned / possible if possible else RERANK_OFF_SCORE
    formula = (
        f"points of capabilities that earn them / points of measured capabilities x 100; "
        f"points: {', '.join(f'{c} {p}' for c, p in ARCH_POINTS.items())}; a capability earns "
        f"its points when on and not hurting, or off and not helping ({ABLATION_MEASURE} "
        f"tolerance {ABLATION_TOLERANCE})"
    )
    cands: list[Change] = []
    for cap, d in effect.items():
        if d is None:
            continue
        if on[cap] and d < -ABLATION_TOLERANCE:
            cands.append(_SWITCH_OFF[cap])
        elif not on[cap] and d > ABLATION_TOLERANCE and cap in _SWITCH_ON:
            cands.append(_SWITCH_ON[cap])
    unmeasured = [c for c in on if effect.get(c) is None and c != "filters"]
    return Dimension(
        "architecture",
        NAMES["architecture"],
        WEIGHTS["architecture"],
        round(score, 1),
        {
            **{c: verdict[c] for c in ARCH_POINTS},
            "mode": cfg.search.mode,
            "measure": ABLATION_MEASURE,
        },
        formula,
        "; ".join(f"{c}: {verdict[c]}" for c in ARCH_POINTS if c not in unmeasured)
        + f" -> {score:.0f}",
        first_change(cfg, cands) if score < 100 else None,
        "add `category:` to document front matter so filters can narrow searches"
        if not kb_has_categories(kb)
        else "",
        tuple(valid_changes(cfg, cands)[1:]) if score < 100 else (),
    )
