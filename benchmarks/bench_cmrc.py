"""CMRC 2018 trial (real Chinese questions): quality of each channel, LanceDB's hybrid as a
peer, fusion mixes via the cached evaluator, and the cached re-scoring timings.

    python benchmarks/bench_cmrc.py [--data ../shared/data/benchmarks/cmrc2018-trial]
                                    [--work /tmp/wikirag-cmrc] [--out benchmarks/results/cmrc.json]

Steps (the CLI where there is one, so the figures are what a user gets):
1. ``wikirag import-beir`` -> temp KB (one Markdown file per paragraph) + golden set;
2. ``wikirag index`` with the default embedder (multilingual USE);
3. ``wikirag eval --modes hybrid vector keyword --json`` (defaults: RRF k=60, 1:1);
4. in-process: LanceDB built-in hybrid (vector + FTS over the jieba token column,
   RRFReranker) over the same rows and queries, scored with the same metrics;
5. fusion mixes re-scored from the evaluation cache (no model calls);
6. ``workbench.bench.rescoring.bench_rescoring``: 1,000 queries re-scored, an experiment and a
   25-point sweep on 100 queries, all from a warm cache.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HEADLINE = ("recall@1", "recall@5", "recall@10", "mrr", "ndcg@10", "hit@1", "hit@5")


def _cli(*args: str) -> tuple[float, str]:
    t = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "workbench.cli", *args],
        check=True,
        capture_output=True,
        text=True,
    )
    return time.perf_counter() - t, proc.stdout


def _pick(means: dict[str, float]) -> dict[str, float]:
    return {m: round(float(means.get(m, 0.0)), 4) for m in HEADLINE}


def main(argv: list[str] | None = None) -> int:
    root = Path(__file__).resolve().parents[1]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(root.parent / "shared/data/benchmarks/cmrc2018-trial"))
    ap.add_argument("--work", default="/tmp/wikirag-cmrc")
    ap.add_argument("--out", default=str(root / "benchmarks/results/cmrc.json"))
    ap.add_argument("--reuse", action="store_true", help="reuse an existing --work index")
    args = ap.parse_args(argv)
    os.environ.setdefault("LANCEDB_LOG", "error")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    sys.path.insert(0, str(root))

    from workbench.bench.measure import load_avg, peak_rss_mb
    from workbench.bench.peer import LanceHybridPeer
    from workbench.bench.rescoring import bench_rescoring

    work = Path(args.work)
    kb, idx, ds = work / "kb", work / "index", work / "cmrc.yaml"
    out: dict = {"load_avg_start": load_avg(), "data": args.data}
    if not (args.reuse and (idx / "manifest.json").is_file()):
        shutil.rmtree(work, ignore_errors=True)
        _, text = _cli(
            "import-beir", args.data, "--kb-out", str(kb), "--dataset-out", str(ds), "--json"
        )
        out["import"] = json.loads(text)
        print("imported", out["import"], file=sys.stderr)
        secs, text = _cli("index", "--kb", str(kb), "--index", str(idx), "--json")
        out["index_s"] = round(secs, 2)
        out["index_report"] = json.loads(text)
        print(f"indexed in {secs:.1f}s", file=sys.stderr)
    eval_json = work / "eval.json"
    secs, _ = _cli(
        "eval", "--kb", str(kb), "--index", str(idx), "--dataset", str(ds),
        "--modes", "hybrid", "vector", "keyword", "--json", str(eval_json), "--no-save",
    )  # fmt: skip
    out["eval_s"] = round(secs, 2)
    record = json.loads(eval_json.read_text(encoding="utf-8"))
    out["config_hash"] = record["config_hash"]
    out["queries"] = record["summary"]["hybrid"]["queries"]
    out["modes"] = {
        mode: {**_pick(s["means"]), "latency_ms": s["latency"]}
        for mode, s in record["summary"].items()
    }
    print("eval:", json.dumps(out["modes"], ensure_ascii=False), file=sys.stderr)

    # In-process: engine, cached evaluator (the cache `wikirag eval` saved), peer.
    from engine.config import EngineConfig
    from engine.manifest import read_manifest
    from engine.search import Engine
    from engine.store import Location, Store, vectors_of
    from engine.tokenizer import tokenize
    from workbench.eval import golden
    from workbench.eval import metrics as M
    from workbench.eval.evaluate import EvalCache, Evaluator, _measures, parent_function
    from workbench.eval.percentiles import latency_percentiles

    cfg = EngineConfig()
    engine = Engine.open(kb, idx, cfg)
    gs = golden.load(ds)
    cache = EvalCache.open(idx / "cache")

    # Fusion mixes from cache.
    mixes = {
        "rrf k60 v1:b1 (default)": {},
        "rrf k60 v0.5:b1": {"fusion.vector_weight": 0.5},
        "rrf k60 v1:b2": {"fusion.bm25_weight": 2.0},
        "rrf k20 v1:b1": {"fusion.k": 20.0},
        "rrf k20 v0.5:b1": {"fusion.k": 20.0, "fusion.vector_weight": 0.5},
        "rrf k60 v0.25:b1": {"fusion.vector_weight": 0.25},
        "rrf k10 v0.25:b1": {"fusion.k": 10.0, "fusion.vector_weight": 0.25},
        "rrf k60 v2:b1 (seeds)": {"fusion.vector_weight": 2.0},
        "rrf k5 v0.3:b1": {"fusion.k": 5.0, "fusion.vector_weight": 0.3},
        "rrf k1 v0.5:b1": {"fusion.k": 1.0, "fusion.vector_weight": 0.5},
    }
    mix_out = {}
    t0 = time.perf_counter()
    for name, ov in mixes.items():
        c = cfg.with_overrides(ov) if ov else cfg
        run = Evaluator(engine.with_config(c), cache).run(gs, c, modes=["hybrid"])
        mix_out[name] = {**_pick(run.means("hybrid")), "cache_misses": run.cache_misses}
    out["fusion_mixes"] = mix_out
    out["fusion_mixes_s"] = round(time.perf_counter() - t0, 3)
    best_single = max(("vector", "keyword"), key=lambda m: out["modes"][m]["mrr"])
    best_mix = max(mix_out, key=lambda n: (mix_out[n]["mrr"], mix_out[n]["hit@1"]))
    out["best_single_channel"] = {"mode": best_single, **out["modes"][best_single]}
    out["best_mix"] = {"name": best_mix, **mix_out[best_mix]}
    out["hybrid_beats_best_single"] = {
        m: mix_out[best_mix][m] > out["modes"][best_single][m] for m in HEADLINE
    }
    print("mixes:", json.dumps(mix_out, ensure_ascii=False), file=sys.stderr)

    # LanceDB built-in hybrid peer over the same vectors and tokens.
    loc = Location(str(idx))
    man = read_manifest(loc)
    tbl = Store(str(idx)).open_table(man.table, man.version)
    data = Store.read(tbl, ["id", "vector", "tokens"])
    ids = data.column("id").to_pylist()
    peer = LanceHybridPeer(work / "peer", ids, vectors_of(data), data.column("tokens").to_pylist())
    embedder = engine._embedder()
    measures = _measures()
    hierarchy = parent_function(engine.kb)
    per_q, lat = {}, []
    for item in gs.answerable():
        t = time.perf_counter()
        got = peer.search(embedder.embed_query(item.query), tokenize(item.query), k=20)
        lat.append((time.perf_counter() - t) * 1000)
        per_q[item.id] = M.evaluate_query(got, item.qrels, measures, hierarchy)
    out["peer_lancedb_hybrid"] = {
        **_pick(M.mean_scores(per_q)),
        "latency_ms": latency_percentiles(lat),
    }
    print("peer:", json.dumps(out["peer_lancedb_hybrid"]), file=sys.stderr)

    # Cached re-scoring timings (issues 4/5).
    out["rescoring"] = bench_rescoring(engine, ds, cfg, work / "rescore")
    for k in ("rescore_1000_s", "experiment_100_s", "sweep25_100_s"):
        out[k] = out["rescoring"][k]
    print("rescoring:", json.dumps(out["rescoring"], default=str), file=sys.stderr)
    out["peak_rss_mb"] = peak_rss_mb()
    out["load_avg_end"] = load_avg()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, ensure_ascii=False, indent=1, default=str) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
