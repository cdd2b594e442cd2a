"""Scale bench (issue 15, part 3): a synthetic KB of N chapters built and served, each step
in its own process so each memory figure is that step's own.

    nice -n 10 python benchmarks/bench_scale.py --chapters 1000000 --work /tmp/scale1m \\
        --json benchmarks/results/scale_1m.json [--set index.fp16_vectors_min_rows=...]

Steps (``--steps write,build,serve``; a later run can redo only ``serve`` on a kept folder):

- ``write``: ``workbench.bench.synthetic.synthetic_kb`` (deterministic) writes the Markdown files;
- ``build``: ``parse_kb`` + ``build_index`` with the hash embedder; peak RSS of the build
  process (``VmHWM``) and of the process tree (the row-building workers included, sampled
  every 0.5 s), time per stage;
- ``serve``: a fresh process opens the engine as ``wikirag serve`` would (parse the KB, load
  the snapshot), then times ``vector``, ``keyword`` and ``hybrid`` search over sampled
  queries (p50/p95, stage medians), and reports the BM25 channel's bytes in memory; then,
  after the latency figures, reads the stored float32 vectors and computes the vector
  channel's recall@10 against exact float32 cosine search, asked for 10 and for hybrid's
  channel pool (the top 10 of that pool is what fusion sees).

The load average is recorded at each step: the machine is shared, compare ratios in a run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent


def vm_hwm_mb() -> float:
    """This process's peak resident memory (``VmHWM``; not ru_maxrss, see bench.py)."""
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def reset_hwm() -> None:
    """Start this process's ``VmHWM`` afresh (Linux: ``5`` in ``clear_refs``), so the next
    read is the peak since now; a no-op where the kernel refuses."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
    except OSError:
        pass


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as fh:
                out += [int(c) for c in fh.read().split()]
    except OSError:
        pass
    return out


class TreeRss:
    """Samples the RSS of this process plus its descendants; keeps the peak (MB)."""

    def __init__(self, every_s: float = 0.5) -> None:
        self.peak_mb = 0.0
        self._every = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            todo, total = [os.getpid()], 0
            while todo:
                pid = todo.pop()
                total += _rss_kib(pid)
                todo += _children(pid)
            self.peak_mb = max(self.peak_mb, total / 1024)
            self._stop.wait(self._every)

    def __enter__(self) -> TreeRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _config(overrides: list[str]) -> Any:
    from engine.config import EngineConfig, parse_override

    pairs = dict(parse_override(o) for o in ["embedding.provider=hash", *overrides])
    return EngineConfig().with_overrides(pairs)


def step_write(args: argparse.Namespace) -> dict[str, Any]:
    from workbench.bench.synthetic import synthetic_kb

    t = time.perf_counter()
    counts = synthetic_kb(Path(args.work) / "kb", args.chapters, seed=args.seed)
    return {"write_s": round(time.perf_counter() - t, 1), **counts}


def step_build(args: argparse.Namespace) -> dict[str, Any]:
    from engine.embedding import make_embedder
    from engine.indexer import build_index
    from engine.tree import parse_kb

    cfg = _config(args.set)
    work = Path(args.work)
    stages: dict[str, float] = {}
    peaks: dict[str, float] = {}  # peak RSS (MB) of this process per stage
    last: dict[str, Any] = {"stage": "", "t": time.perf_counter()}

    def progress(done: int, total: int, stage: str) -> None:
        now = time.perf_counter()
        if now - last.get("logged", 0.0) > 30 or stage != last["stage"]:
            last["logged"] = now
            sys.stderr.write(f"build: {stage} {done}/{total} {time.strftime('%H:%M:%S')}\n")
            sys.stderr.flush()
        if stage != last["stage"]:
            if last["stage"]:
                stages[last["stage"]] = round(stages.get(last["stage"], 0.0) + now - last["t"], 1)
            # The exact peak of each stage: read the high-water mark, then start it afresh.
            name = last["stage"] or "before build"
            peaks[name] = max(peaks.get(name, 0.0), vm_hwm_mb())
            reset_hwm()
            last["stage"], last["t"] = stage, now

    with TreeRss() as tree:
        t = time.perf_counter()
        kb = parse_kb(work / "kb")
        parse_s = time.perf_counter() - t
        rss_parsed = vm_hwm_mb()
        peaks["parse"] = rss_parsed
        reset_hwm()
        embedder = make_embedder(cfg.embedding)
        t = time.perf_counter()
        report = build_index(kb, cfg, str(work / "index"), progress, embedder=embedder)
        build_s = time.perf_counter() - t
        progress(0, 0, "")
    return {
        "chapters": len(kb.nodes),
        "documents": len(kb.documents),
        "parse_s": round(parse_s, 1),
        "build_s": round(build_s, 1),
        "build_stage_s": stages,
        "report": report.summary(),
        "rss_parsed_mb": rss_parsed,
        "build_peak_rss_mb": max([vm_hwm_mb(), *peaks.values()]),
        "build_stage_peak_rss_mb": peaks,
        "build_tree_peak_rss_mb": round(tree.peak_mb, 1),
        "index_disk_mb": round(
            sum(p.stat().st_size for p in (work / "index").rglob("*") if p.is_file()) / 2**20, 1
        ),
    }


def step_ann(args: argparse.Namespace) -> dict[str, Any]:
    """Lower the threshold on the built (unchanged) index: ``build_index`` adds the vector
    index as a build past the threshold would; then sweep the query-time settings."""
    from engine.ann import ann_search
    from engine.indexer import build_index
    from engine.manifest import read_manifest
    from engine.store import Location, Store
    from engine.tree import parse_kb
    from workbench.bench.measure import overlap, top_ids
    from workbench.bench.queries import sample_queries

    cfg = _config([*args.set, "index.ann_min_rows=1"])
    work = Path(args.work)
    kb = parse_kb(work / "kb")
    t = time.perf_counter()
    build_index(kb, cfg, str(work / "index"))
    index_s = time.perf_counter() - t
    loc = Location(str(work / "index"))
    m = read_manifest(loc)
    assert m is not None
    tbl = Store(str(work / "index")).open_table(m.table, m.version)
    ids_arr, mat = stored_unit_vectors(work / "index", m)
    ids = ids_arr.tolist()
    from engine.embedding import make_embedder

    embedder = make_embedder(cfg.embedding)
    qs = sample_queries(kb, args.queries, seed=7)
    del kb
    qvecs = [np.asarray(embedder.embed_query(q), dtype=np.float32) for q in qs]
    exact, lat = [], []
    for qv in qvecs:
        t = time.perf_counter()
        exact.append(top_ids(mat @ qv, ids, 10))
        lat.append((time.perf_counter() - t) * 1000)
    del mat
    sweep = []
    for nprobes, refine in ((32, 10), (32, 50), (64, 50), (128, 50), (64, 100)):
        rec, ms = [], []
        for qv, want in zip(qvecs, exact, strict=True):
            t = time.perf_counter()
            got = [i for i, _ in ann_search(tbl, qv, 10, nprobes=nprobes, refine_factor=refine)]
            ms.append((time.perf_counter() - t) * 1000)
            rec.append(overlap(got, want))
        row = {
            "nprobes": nprobes,
            "refine_factor": refine,
            "recall_at_10": round(float(np.mean(rec)), 4),
            **_pcts(ms),
        }
        sys.stderr.write(json.dumps(row) + "\n")
        sweep.append(row)
    return {
        "vector_index": m.vector_index,
        "vector_index_s": round(index_s, 1),
        "exact_numpy_float32_ms": _pcts(lat),
        "ann_sweep": sweep,
        "queries": len(qs),
    }


def _sparse_bytes(m: Any) -> int:
    if m is None:
        return 0
    return int(m.data.nbytes + m.indices.nbytes + m.indptr.nbytes)


def _pcts(values: list[float]) -> dict[str, float]:
    arr = np.asarray(values, dtype=float)
    return {
        "p50": round(float(np.percentile(arr, 50)), 2),
        "p95": round(float(np.percentile(arr, 95)), 2),
    }


def stored_unit_vectors(index_dir: Path, manifest: Any) -> tuple[np.ndarray, np.ndarray]:
    """The snapshot's ids and float32 vectors, L2-normalised: the exact-search reference."""
    from engine.store import Store, vectors_of

    data = Store.read(
        Store(str(index_dir)).open_table(manifest.table, manifest.version), ["id", "vector"]
    )
    ids = np.array(data.column("id").to_pylist(), dtype=object)
    mat = np.array(vectors_of(data), dtype=np.float32)
    del data
    mat /= np.maximum(np.linalg.norm(mat, axis=1, keepdims=True), 1e-12)
    return ids, mat


def step_serve(args: argparse.Namespace) -> dict[str, Any]:
    from engine.pipeline import pool_size
    from engine.search import Engine
    from workbench.bench.queries import sample_queries

    cfg = _config(args.set)
    work = Path(args.work)
    t = time.perf_counter()
    engine = Engine.open(work / "kb", work / "index", cfg)
    engine.warm_up()
    open_s = time.perf_counter() - t
    rss_open = vm_hwm_mb()
    state = engine._shared.current()
    snap = state.snapshot
    qs = sample_queries(state.kb, args.queries, seed=7)
    out: dict[str, Any] = {
        "serve_open_s": round(open_s, 1),
        "serving_rss_open_mb": rss_open,
        "queries": len(qs),
        "vector_index": snap.manifest.vector_index or "none (exact, in memory)",
    }
    for mode in ("vector", "keyword", "hybrid"):
        for q in qs[:3]:
            engine.search(q, mode=mode, rerank=False)
        lat, stages = [], []
        for q in qs:
            t = time.perf_counter()
            resp = engine.search(q, mode=mode, rerank=False)
            lat.append((time.perf_counter() - t) * 1000)
            stages.append(resp.timings)
        pc = _pcts(lat)
        out[f"{mode}_p50_ms"], out[f"{mode}_p95_ms"] = pc["p50"], pc["p95"]
        out[f"{mode}_stage_p50_ms"] = {
            k: round(float(np.median([float(s.get(k, 0.0)) for s in stages])), 2)
            for k in ("expand", "embed", "vector", "bm25", "fusion")
        }
    bm25 = snap.lexical
    weights = [_sparse_bytes(getattr(b, "_weights_cache", None)) for b in list(snap._bm25.values())]
    out["bm25"] = {
        "terms": len(bm25.terms),
        "nnz": int(bm25.counts.nnz),
        "counts_mb": round(_sparse_bytes(bm25.counts) / 2**20, 1),
        "title_counts_mb": round(_sparse_bytes(bm25.title_counts) / 2**20, 1),
        "weights_mb": round(sum(weights) / 2**20, 1),
        "keyword_p50_ms": out["keyword_p50_ms"],
        "keyword_p95_ms": out["keyword_p95_ms"],
    }
    out["serving_rss_after_queries_mb"] = vm_hwm_mb()

    # Recall of the vector channel against exact float32 cosine over the stored vectors
    # (read after the latency runs: this copy is the bench's, not serving's).
    ids, mat = stored_unit_vectors(work / "index", snap.manifest)
    # Two pools: 10 (the vector search a user asks for) and hybrid's channel pool (top_k x
    # multiplier), whose top 10 is what fusion sees.
    embedder = engine._embedder()
    hybrid_pool = pool_size(cfg, cfg.search.top_k, use_rerank=False)
    recalls: dict[int, list[float]] = {10: [], hybrid_pool: []}
    for q in qs[: args.recall_queries]:
        qv = np.asarray(embedder.embed_query(q), dtype=np.float32)
        sims = mat @ qv
        top = np.argpartition(-sims, 10)[:10]
        exact = set(ids[top].tolist())
        for pool, got in recalls.items():
            hits = [nid for nid, _ in engine.candidates(q, pool=pool, mode="vector").vector]
            got.append(len(exact & set(hits[:10])) / 10)
    out["vector_recall_at_10"] = round(float(np.mean(recalls[10])), 4)
    out["hybrid_pool"] = hybrid_pool
    out["vector_recall_at_10_hybrid_pool"] = round(float(np.mean(recalls[hybrid_pool])), 4)
    out["recall_queries"] = len(recalls[10])
    return out


STEPS = {"write": step_write, "build": step_build, "ann": step_ann, "serve": step_serve}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chapters", type=int, default=1_000_000)
    ap.add_argument("--work", required=True, help="folder for the KB and the index (kept)")
    ap.add_argument("--steps", default="write,build,serve")
    ap.add_argument("--set", action="append", default=[], help="config override key=value")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--recall-queries", type=int, default=200)
    ap.add_argument("--seed", type=int, default=20250101)
    ap.add_argument("--json", help="write (merge into) this result file")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # run one step in this process
    args = ap.parse_args()
    if args.one:
        res = STEPS[args.one](args)
        res["load_avg"] = [round(x, 2) for x in os.getloadavg()]
        print(json.dumps(res))
        return
    path = Path(args.json) if args.json else None
    result: dict[str, Any] = {}
    if path is not None and path.is_file():
        result = json.loads(path.read_text(encoding="utf-8"))
    result.update({"chapters_asked": args.chapters, "overrides": args.set, "cpus": os.cpu_count()})
    for step in args.steps.split(","):
        sys.stderr.write(f"bench_scale: {step} ({time.strftime('%H:%M:%S')})\n")
        argv = [sys.executable, __file__, "--one", step, *sys.argv[1:]]
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=None, text=True, check=False)
        if proc.returncode != 0:
            result[step] = {"error": f"exit status {proc.returncode}; see stderr"}
            break
        result[step] = json.loads(proc.stdout.strip().splitlines()[-1])
        sys.stderr.write(json.dumps(result[step]) + "\n")
        if path is not None:
            from engine.atomic import atomic_write_text

            atomic_write_text(path, json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    if path is None:
        print(json.dumps(result, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
