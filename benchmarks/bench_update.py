"""One changed chapter re-indexed at scale (issue 15): parse + incremental ``build_index``.

Two steps, so one big build serves many timed updates (run each with ``nice -n 10``):

    python benchmarks/bench_update.py build  --chapters 100000 --work /tmp/upd100k
    python benchmarks/bench_update.py update --work /tmp/upd100k --runs 5 \
        --json benchmarks/results/scale_update_100k.json [--profile /tmp/upd.prof]

``build`` writes the synthetic KB (workbench.bench.synthetic.synthetic_kb, hash embedder), parses it
through a ParseCache (saved beside the index, as ``wikirag index`` keeps one) and times one
full build. ``update`` loads that cache, then per run appends a sentence to one chapter
file (a different file each run), re-parses (only that file is read) and times the
incremental ``build_index``. The first run is in a fresh process before jieba's dictionary
is loaded ("cold", as ``wikirag index`` after an edit); later runs are "warm" (a
long-running engine). Every run checks that exactly one chapter was re-embedded. The
JSON records the load average, the full build of the same work folder and each run's
ratio to it.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import sys
import time
from pathlib import Path
from typing import Any


def _cfg() -> Any:
    from engine.config import EngineConfig

    return EngineConfig().with_overrides({"embedding.provider": "hash"})


def _edit(kb_dir: Path, kb: Any, nth: int) -> str:
    """Append a sentence to the ``nth`` multi-chapter file counted from the middle."""
    docs = [d for d in kb.documents if len(d.nodes) > 1] or list(kb.documents)
    doc = docs[(len(docs) // 2 + 7 * nth) % len(docs)]
    path = kb_dir / doc.file_path
    text = path.read_text(encoding="utf-8")
    path.write_text(text.rstrip("\n") + f"\n\n本段为基准测试的增量修改 {nth}。Edited {nth}.\n")
    return str(doc.file_path)


def build(work: Path, chapters: int) -> dict[str, Any]:
    from engine.embedding import make_embedder
    from engine.indexer import build_index
    from engine.parse_cache import ParseCache
    from engine.tree import parse_kb
    from workbench.bench.measure import load_avg, peak_rss_mb
    from workbench.bench.synthetic import synthetic_kb

    cfg = _cfg()
    out: dict[str, Any] = {"chapters_requested": chapters, "load_avg_start": load_avg()}
    work.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    synthetic_kb(work / "kb", chapters, seed=20250101)
    out["write_kb_s"] = round(time.perf_counter() - t, 3)
    cache = ParseCache()
    t = time.perf_counter()
    kb = parse_kb(work / "kb", cache=cache)
    out["parse_s"] = round(time.perf_counter() - t, 3)
    out["chapters"], out["documents"] = len(kb.nodes), len(kb.documents)
    embedder = make_embedder(cfg.embedding)
    t = time.perf_counter()
    report = build_index(kb, cfg, str(work / "index"), embedder=embedder)
    out["index_full_s"] = round(time.perf_counter() - t, 3)
    out["index_full_report"] = report.to_dict()
    out["rss_mb"] = peak_rss_mb()
    cache.save(work / "parse_cache.pkl")
    out["load_avg_end"] = load_avg()
    (work / "build.json").write_text(json.dumps(out, indent=1))
    return out


def update(work: Path, runs: int, profile: str | None) -> dict[str, Any]:
    from engine.embedding import make_embedder
    from engine.indexer import build_index
    from engine.parse_cache import ParseCache
    from engine.tree import parse_kb
    from workbench.bench.measure import load_avg

    cfg = _cfg()
    code = os.environ.get("PYTHONPATH", "").split(os.pathsep)[0]
    built = json.loads((work / "build.json").read_text())
    out: dict[str, Any] = {"build": built, "code": code, "load_avg_start": load_avg()}
    cache = ParseCache.load(work / "parse_cache.pkl")
    kb = parse_kb(work / "kb", cache=cache)
    embedder = make_embedder(cfg.embedding)
    results = []
    for i in range(runs):
        edited = _edit(work / "kb", kb, int(time.time()) % 1000 + i)
        cache.reset_counts()
        t, cpu = time.perf_counter(), time.process_time()
        kb = parse_kb(work / "kb", cache=cache)
        parse_s, parse_cpu_s = time.perf_counter() - t, time.process_time() - cpu
        prof = cProfile.Profile() if profile and i == 0 else None
        cpu = time.process_time()  # all threads of this process: less load-bound than wall
        t = time.perf_counter()
        if prof:
            prof.enable()
        rep = build_index(kb, cfg, str(work / "index"), embedder=embedder)
        if prof:
            prof.disable()
            prof.dump_stats(profile)
        index_s = time.perf_counter() - t
        index_cpu_s = time.process_time() - cpu
        if rep.full_rebuild or rep.embedded < 1:
            raise SystemExit(f"expected an incremental update, got {rep.summary()}")
        total = parse_s + index_s
        results.append(
            {
                "kind": "cold" if i == 0 else "warm",
                "edited_file": edited,
                "files_parsed": cache.parsed,
                "chapters_updated": rep.updated,
                "chapters_embedded": rep.embedded,
                "parse_s": round(parse_s, 3),
                "parse_cpu_s": round(parse_cpu_s, 3),
                "index_s": round(index_s, 3),
                "index_cpu_s": round(index_cpu_s, 3),
                "total_s": round(total, 3),
                "ratio_to_full_build": round(total / built["index_full_s"], 5),
                "load_avg_1m": load_avg()[0],
            }
        )
        print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    cache.save(work / "parse_cache.pkl")
    warm = [r["total_s"] for r in results if r["kind"] == "warm"]
    out["runs"] = results
    out["warm_median_total_s"] = sorted(warm)[len(warm) // 2] if warm else None
    out["load_avg_end"] = load_avg()
    out["cpu_count"] = os.cpu_count()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("step", choices=["build", "update"])
    ap.add_argument("--work", required=True, type=Path)
    ap.add_argument("--chapters", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--profile", help="cProfile the first update into this file")
    ap.add_argument("--json", help="write the result here")
    args = ap.parse_args()
    if args.step == "build":
        out = build(args.work, args.chapters)
    else:
        out = update(args.work, args.runs, args.profile)
    text = json.dumps(out, indent=1, ensure_ascii=False)
    if args.json:
        Path(args.json).write_text(text + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
