"""The architecture dimension: what each capability (hybrid, rerank, expansion, filters,
injection, summaries) is measured to contribute, read from ablation runs and the log."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine.config import EngineConfig
from workbench.eval.messages import Message, join
from workbench.eval.run_record import RunRecord
from workbench.tune.dimension import NAMES, WEIGHTS, Change, Dimension, first_change, valid_changes
from workbench.tune.retrieval_dimensions import RERANK_OFF_SCORE
from workbench.tune.suggestions import ABLATION_MEASURE, enabled, log_delta
from workbench.tune.verdict import OUTCOME_WORDS

ARCH_POINTS = {
    "hybrid": 25,
    "rerank": 25,
    "expansion": 15,
    "filters": 15,
    "injection": 10,
    "summaries": 10,
}
# How the capabilities read in the rule and the formula (their ids are the evidence keys).
CAPABILITY_NAMES = {
    "hybrid": Message("hybrid"),
    "rerank": Message("rerank"),
    "expansion": Message("expansion"),
    "filters": Message("filters"),
    "injection": Message("injection"),
    "summaries": Message("summaries"),
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
    run: RunRecord, mode: str, other: RunRecord | None, other_mode: str | None = None
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
    "hybrid": ({"search.mode": "keyword"}, Message("hybrid loses to its best channel")),
    "expansion": ({"expansion.enabled": False}, Message("query expansion costs MRR here")),
    "rerank": ({"rerank.provider": "none"}, Message("the reranker costs MRR here")),
    "injection": ({"injection.enabled": False}, Message("injection costs MRR here")),
    "summaries": ({"index.use_summaries": False}, Message("summaries cost MRR here")),
}
_SWITCH_ON: dict[str, Change] = {
    "hybrid": ({"search.mode": "hybrid"}, Message("hybrid beats the current mode")),
    "expansion": ({"expansion.enabled": True}, Message("query expansion measured to help")),
    "injection": ({"injection.enabled": True}, Message("injection measured to help")),
}

# How a measured effect reads: (on?, helps / hurts / neither) -> the word.
_EFFECT_WORDS = {
    (True, 1): Message("helps"),
    (True, -1): Message("hurts"),
    (True, 0): Message("no effect"),
    (False, 1): Message("would help"),
    (False, -1): Message("would hurt"),
    (False, 0): Message("would not help"),
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
    run: RunRecord | None = None,
    extra: Mapping[str, RunRecord] | None = None,
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
    mode = run.modes[0] if run is not None and run.modes else cfg.search.mode
    rerank_on = cfg.rerank.provider != "none"
    on = {
        "hybrid": cfg.search.mode == "hybrid",
        "rerank": rerank_on,
        "expansion": cfg.expansion.enabled and cfg.search.mode != "vector",
        "injection": cfg.injection.enabled and rerank_on,
        "summaries": cfg.index.use_summaries,
    }
    effect, source = _ablation_effects(run, mode, on, dict(extra or {}))
    _log_effects(effect, source, history)
    earned, possible, verdict = _verdicts(kb, on, effect, source)
    score = 100.0 * earned / possible if possible else RERANK_OFF_SCORE
    cands = _candidates(on, effect)
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
        _formula(),
        Message(
            "{verdicts} -> {score}",
            {
                "verdicts": join(
                    [
                        Message(
                            "{capability}: {verdict}",
                            {"capability": CAPABILITY_NAMES[c], "verdict": verdict[c]},
                        )
                        for c in ARCH_POINTS
                        if c not in unmeasured
                    ]
                ),
                "score": f"{score:.0f}",
            },
        ),
        first_change(cfg, cands) if score < 100 else None,
        Message("add `category:` to document front matter so filters can narrow searches")
        if not kb_has_categories(kb)
        else None,
        tuple(valid_changes(cfg, cands)[1:]) if score < 100 else (),
    )


Effects = dict[str, float | None]  # (metric with the capability) - (without it); None: unmeasured


def _ablation_effects(
    run: RunRecord | None, mode: str, on: Mapping[str, bool], extra: Mapping[str, RunRecord]
) -> tuple[Effects, dict[str, Message]]:
    """Each capability's effect from the ablation runs, and where each effect came from."""
    effect: Effects = dict.fromkeys(on)
    source: dict[str, Message] = {}
    if run is None:
        return effect, source
    if on["hybrid"]:
        singles = [_ablation_effect(run, mode, extra.get(m), m) for m in ("keyword", "vector")]
        known = [d for d in singles if d is not None]
        if known:
            effect["hybrid"] = min(known)  # vs the best single channel
            source["hybrid"] = Message("hybrid vs its best single channel")
    elif extra.get("hybrid") is not None:
        effect["hybrid"] = _ablation_effect(extra["hybrid"], "hybrid", run, mode)
        source["hybrid"] = Message("hybrid vs {mode}", {"mode": mode})
    if extra.get("ablate_expansion") is not None:
        d = _ablation_effect(run, mode, extra["ablate_expansion"])
        effect["expansion"] = d if on["expansion"] else (None if d is None else -d)
        source["expansion"] = Message("expansion on vs off")
    if on["rerank"] and extra.get("no_rerank") is not None:
        effect["rerank"] = _ablation_effect(run, mode, extra["no_rerank"])
        source["rerank"] = Message("rerank on vs off")
    if on["rerank"] and extra.get("ablate_injection") is not None:
        d = _ablation_effect(run, mode, extra["ablate_injection"])
        effect["injection"] = d if on["injection"] else (None if d is None else -d)
        source["injection"] = Message("injection on vs off")
    return effect, source


def _log_effects(
    effect: Effects, source: dict[str, Message], history: Sequence[Mapping[str, Any]]
) -> None:
    """What ablation cannot measure, the latest experiment that switched it alone may have."""
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
            decision = str(rec.get("decision", "?"))
            source[cap] = Message(
                "experiment #{number}, {decision}",
                {
                    "number": rec.get("number"),
                    "decision": Message(OUTCOME_WORDS.get(decision, decision)),
                },
            )
            break


def _verdicts(
    kb: Any, on: Mapping[str, bool], effect: Effects, source: Mapping[str, Message]
) -> tuple[float, float, dict[str, Message]]:
    """Points earned, points measurable, and each capability's verdict in words."""
    earned = 0.0
    possible = 0.0
    verdict: dict[str, Message] = {}
    for cap, pts in ARCH_POINTS.items():
        if cap == "filters":
            has = kb_has_categories(kb)
            possible += pts
            earned += pts if has else 0
            verdict[cap] = Message(
                "on: documents have categories" if has else "no categories to filter on"
            )
            continue
        d = effect.get(cap)
        if d is None:
            verdict[cap] = Message(
                "on, effect not measured" if on[cap] else "off, effect not measured"
            )
            continue
        possible += pts
        helps = d > ABLATION_TOLERANCE
        hurts = d < -ABLATION_TOLERANCE
        # off: fine unless switching it on would help
        ok = not hurts if on[cap] else not helps
        earned += pts if ok else 0
        verdict[cap] = Message(
            "on, {word} ({delta} {measure}, {source})"
            if on[cap]
            else "off, {word} ({delta} {measure}, {source})",
            {
                "word": _EFFECT_WORDS[on[cap], 1 if helps else -1 if hurts else 0],
                "delta": f"{d:+.3f}",
                "measure": ABLATION_MEASURE,
                "source": source[cap],
            },
        )
    return earned, possible, verdict


def _formula() -> Message:
    return Message(
        "points of capabilities that earn them / points of measured capabilities x 100; "
        "points: {points}; a capability earns its points when on and not hurting, or off and "
        "not helping ({measure} tolerance {tolerance})",
        {
            "points": join(
                [
                    Message(
                        "{capability} {points}", {"capability": CAPABILITY_NAMES[c], "points": p}
                    )
                    for c, p in ARCH_POINTS.items()
                ],
                ", ",
            ),
            "measure": ABLATION_MEASURE,
            "tolerance": ABLATION_TOLERANCE,
        },
    )


def _candidates(on: Mapping[str, bool], effect: Effects) -> list[Change]:
    """The switches the measured effects call for: off what hurts, on what would help."""
    cands: list[Change] = []
    for cap, d in effect.items():
        if d is None:
            continue
        if on[cap] and d < -ABLATION_TOLERANCE:
            cands.append(_SWITCH_OFF[cap])
        elif not on[cap] and d > ABLATION_TOLERANCE and cap in _SWITCH_ON:
            cands.append(_SWITCH_ON[cap])
    return cands
