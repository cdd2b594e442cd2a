"""The dimensions read from retrieval runs: Recall@5, MRR, Hit@5, embedding quality (vector
vs hybrid) and the reranker's effect (on vs off)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from engine.config import EngineConfig
from workbench.eval.attribution import CAUSES
from workbench.eval.messages import Message
from workbench.eval.run_record import RunRecord
from workbench.tune.dimension import (
    NAMES,
    WEIGHTS,
    Change,
    Dimension,
    bands_text,
    first_change,
    piecewise,
    valid_changes,
)

# Piecewise-linear bands (x, score), clamped at both ends. The bands follow he-rag-eval's
# qualitative ranges: recall@5 0.5 is "usable" (50), 0.9 "excellent" (100).
RECALL5_BANDS = ((0.0, 0.0), (0.5, 50.0), (0.9, 100.0))
MRR_BANDS = ((0.0, 0.0), (0.4, 50.0), (0.8, 100.0))
HIT5_BANDS = ((0.0, 0.0), (0.6, 50.0), (0.95, 100.0))
EMBED_RATIO_BANDS = ((0.0, 0.0), (0.5, 40.0), (0.8, 80.0), (1.0, 100.0))
RERANK_DELTA_BANDS = ((-0.1, 0.0), (0.0, 50.0), (0.1, 100.0))

RERANK_OFF_SCORE = 50.0  # no reranker: the middle of the band, "neither helps nor hurts"


def mode_run(run: RunRecord, mode: str, rerank: bool | None = None) -> RunRecord | None:
    if mode in run.modes and (rerank is None or run.rerank == rerank) and run.for_mode(mode):
        return run
    return None


def recall_fixes(run: RunRecord, mode: str, cfg: EngineConfig) -> list[Change]:
    """Candidate changes for low recall, led by the commonest stage-attribution cause."""
    causes = Counter({c: len(ids) for c, ids in run.failures(mode).items()})
    top = causes.most_common(1)[0][0] if causes else None
    m, vw, bw = cfg.fusion.multiplier, cfg.fusion.vector_weight, cfg.fusion.bm25_weight
    widen = (
        {"fusion.multiplier": min(100, m + 2)},
        Message(
            "misses are mostly '{cause}': a wider candidate pool (top_k x {now} -> x {wider}) "
            "lets more relevant chapters reach fusion",
            {
                "cause": Message(str(CAUSES.get(top or "cut_at_k"))),
                "now": m,
                "wider": min(100, m + 2),
            },
        ),
    )
    if top == "dropped_by_fusion":
        vec = bm = 0
        for r in run.for_mode(mode):
            for a in r.attribution:
                if a.cause == "dropped_by_fusion":
                    vec += (a.vector_rank or 10**9) <= 5
                    bm += (a.bm25_rank or 10**9) <= 5
        if bm >= vec:
            first = (
                {"fusion.bm25_weight": round(bw * 2, 4)},
                Message(
                    "fusion drops chapters BM25 ranked in its top 5 ({bm} vs {vec} from "
                    "vectors); weight BM25 up",
                    {"bm": bm, "vec": vec},
                ),
            )
        else:
            first = (
                {"fusion.vector_weight": round(vw * 2, 4)},
                Message(
                    "fusion drops chapters the vectors ranked in their top 5 ({vec} vs {bm} "
                    "from BM25); weight vectors up",
                    {"bm": bm, "vec": vec},
                ),
            )
        return [first, widen]
    if top == "demoted_by_rerank":
        return [
            (
                {"rerank.weight": 0.5},
                Message("rerank pushes relevant chapters out of the top 5; blend it"),
            ),
            widen,
        ]
    return [
        widen,
        ({"fusion.k": 20.0}, Message("a smaller RRF k lets each channel's top ranks dominate")),
    ]


def metric_dimension(
    key: str,
    metric: str,
    bands: Sequence[tuple[float, float]],
    run: RunRecord,
    mode: str,
    fixes: list[Change],
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
        bands_text(metric, bands),
        Message(
            "{metric} {value} on {n} queries ({mode}, split {split}) -> {score}",
            {
                "metric": metric,
                "value": f"{value:.3f}",
                "n": n,
                "mode": mode,
                "split": run.split,
                "score": f"{score:.1f}",
            },
        ),
        first_change(run.config, fixes) if score < 100 else None,
        alternatives=tuple(valid_changes(run.config, fixes)[1:]) if score < 100 else (),
    )


def embedding_dimension(
    run: RunRecord, extra: Mapping[str, RunRecord], cfg: EngineConfig
) -> Dimension:
    """vector-only recall@5 / hybrid recall@5, both without rerank."""
    formula = Message(
        "r = recall@5(vector only) / recall@5(hybrid), both without rerank; {bands}; "
        "r > 1 scores 100",
        {"bands": bands_text("r", EMBED_RATIO_BANDS)},
    )
    vec = mode_run(run, "vector", False) or extra.get("vector")
    hyb = mode_run(run, "hybrid", False) or extra.get("hybrid")
    if hyb is None and "no_rerank" in extra and "hybrid" in extra["no_rerank"].modes:
        hyb = extra["no_rerank"]
    fix = first_change(
        cfg,
        [
            (
                {"fusion.vector_weight": round(cfg.fusion.vector_weight / 2, 4)},
                Message(
                    "the vector channel is weaker than the hybrid: give it less weight "
                    "(or index with a better local embedder, which needs a re-index)"
                ),
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
            Message("not measured: no vector-only and hybrid run without rerank -> 0"),
            None,
            Message(
                "run `wikirag scorecard` (it evaluates the vector-only mode from cached candidates)"
            ),
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
        Message(
            "vector {v} / hybrid {h} = {ratio} -> {score}",
            {"v": f"{v:.3f}", "h": f"{h:.3f}", "ratio": f"{ratio:.3f}", "score": f"{score:.1f}"},
        ),
        fix if score < 100 else None,
        Message(
            "a stronger local embedder (embedding.provider=sentence-transformers with a local "
            "model folder) raises this after a re-index"
        )
        if score < 100
        else None,
    )


def rerank_dimension(run: RunRecord, mode: str, extra: Mapping[str, RunRecord]) -> Dimension:
    cfg = run.config
    formula = Message(
        "d = mean of (delta recall@5, delta MRR), rerank on minus off on the same queries; "
        "{bands}; rerank off (provider none) scores {off}",
        {"bands": bands_text("d", RERANK_DELTA_BANDS), "off": f"{RERANK_OFF_SCORE:g}"},
    )
    if not run.rerank or cfg.rerank.provider == "none":
        fix = first_change(
            cfg,
            [
                (
                    {"rerank.provider": "onnx-cross-encoder"},
                    Message(
                        "no reranker: try the bundled ONNX cross-encoder (English-only; "
                        "measure it on your queries)"
                    ),
                )
            ],
        )
        return Dimension(
            "rerank",
            NAMES["rerank"],
            WEIGHTS["rerank"],
            RERANK_OFF_SCORE,
            {"rerank": Message("off"), "provider": cfg.rerank.provider},
            formula,
            Message(
                "rerank off: no measured effect -> {score} (weakness: no reranker)",
                {"score": f"{RERANK_OFF_SCORE:g}"},
            ),
            fix,
        )
    off = extra.get("no_rerank")
    if off is None or mode not in off.modes:
        return Dimension(
            "rerank",
            NAMES["rerank"],
            WEIGHTS["rerank"],
            RERANK_OFF_SCORE,
            {"rerank": Message("on"), "provider": cfg.rerank.provider, "measured": False},
            formula,
            Message(
                "rerank on but no run without it to compare -> {score}",
                {"score": f"{RERANK_OFF_SCORE:g}"},
            ),
            None,
            Message("run `wikirag scorecard` (it evaluates rerank off from cached candidates)"),
        )
    on_m, off_m = run.means(mode), off.means(mode)
    dr = on_m.get("recall@5", 0.0) - off_m.get("recall@5", 0.0)
    dm = on_m.get("mrr", 0.0) - off_m.get("mrr", 0.0)
    d = (dr + dm) / 2
    score = round(piecewise(d, RERANK_DELTA_BANDS), 2)
    cands: list[Change]
    if d < 0:
        cands = [
            (
                {"rerank.weight": 0.5},
                Message("rerank hurts on these queries: blend it with fusion"),
            ),
            (
                {"rerank.provider": "none"},
                Message("rerank hurts on these queries: measure without it"),
            ),
        ]
    else:
        cands = [
            (
                {"rerank.max_candidates": min(1000, cfg.rerank.max_candidates + 15)},
                Message("rerank helps: let it see more candidates"),
            )
        ]
    return Dimension(
        "rerank",
        NAMES["rerank"],
        WEIGHTS["rerank"],
        score,
        {
            "rerank": Message("on"),
            "provider": cfg.rerank.provider,
            "delta_recall@5": round(dr, 4),
            "delta_mrr": round(dm, 4),
            "d": round(d, 4),
        },
        formula,
        Message(
            "delta recall@5 {dr}, delta MRR {dm}, d {d} -> {score}",
            {"dr": f"{dr:+.3f}", "dm": f"{dm:+.3f}", "d": f"{d:+.3f}", "score": f"{score:.1f}"},
        ),
        first_change(cfg, cands) if score < 100 else None,
        alternatives=tuple(valid_changes(cfg, cands)[1:]) if score < 100 else (),
    )
